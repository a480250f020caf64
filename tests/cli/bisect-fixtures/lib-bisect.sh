# lib-bisect.sh: helpers shared by the bisect CLI tests; source it after lib.sh.
FIX="$SRCROOT/tests/cli/bisect-fixtures"
TRACE="$FIX/trace.sh"
# twelve switches S01..S12: good value 0, bad value 1 (trace.sh takes "1" as bad)
GOOD12=$(printf 'S%02d=0,' $(seq 1 12)); GOOD12=${GOOD12%,}
BAD12=$(printf 'S%02d=1,' $(seq 1 12)); BAD12=${BAD12%,}

# jget FILE PYEXPR: evaluate PYEXPR with r = the JSON document in FILE; strings print bare
jget() {
	python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(v if isinstance(v, str) else json.dumps(v))' "$1" "$2"
}
# culprit_of FILE: the culprit sets found, members joined by ',', sets by ';'
culprit_of() { jget "$1" "';'.join(','.join(m['key'] for m in c['switches']) for c in r['culprits'])"; }
# check_trials FILE ARGS...: every trial verdict is the planted one (see check_trials.py)
check_trials() {
	local why
	if ! why=$(python3 "$FIX/check_trials.py" "$@"); then fail "trial table of $1 disagrees with the plant: $why"; return 1; fi
}
# ref_trials N --culprit I,J ... [--unusable I,!J]... [--first]: trials the reference search needs
# (0-based switch indices; see ddmin_ref.py)
ref_trials() { python3 "$FIX/ddmin_ref.py" "$@" | cut -d' ' -f1; }
# no_trace_of_run: nothing was written in the current directory besides the inputs named
nothing_written() { # nothing_written WHAT: no database, work directory or report here
	local f
	for f in a.db .align-bisect report.json; do
		if [ -e "$f" ]; then fail "$1: '$f' was written"; rm -rf "$f"; fi
	done
}
