# lib.sh: helpers for CLI tests. Source it; every test runs in its own temporary directory.
# The align binary comes from $ALIGN (set by meson), the repository root from $SRCROOT.
set -u
: "${ALIGN:?ALIGN must point at the align binary}"
: "${SRCROOT:?SRCROOT must point at the repository root}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 99
FAILS=0

fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

# run_align EXPECTED_RC ARGS...: runs align, keeps stdout in $OUT_TXT and stderr in $ERR_TXT
run_align() {
	local want=$1
	shift
	"$ALIGN" "$@" >out.txt 2>err.txt
	local got=$?
	OUT_TXT=$(cat out.txt)
	ERR_TXT=$(cat err.txt)
	if [ "$got" != "$want" ]; then
		fail "align $* exited $got, expected $want; stderr: $ERR_TXT; stdout: $(head -c 2000 out.txt)"
		return 1
	fi
	return 0
}

expect_err() { # expect_err PATTERN: stderr contains PATTERN (grep -E)
	if ! grep -Eq -- "$1" err.txt; then fail "stderr lacks /$1/: $ERR_TXT"; return 1; fi
}
expect_out() { # expect_out PATTERN: stdout contains PATTERN (grep -E)
	if ! grep -Eq -- "$1" out.txt; then fail "stdout lacks /$1/: $(head -c 3000 out.txt)"; return 1; fi
}
# db_count DB: "runs sources records" of an align database (or "none")
db_count() {
	if [ ! -f "$1" ]; then echo none; return; fi
	sqlite3 "$1" "SELECT (SELECT count(*) FROM run)||' '||(SELECT count(*) FROM source)||' '||(SELECT count(*) FROM record)"
}
sql() { sqlite3 "$1" "$2"; }
expect_eq() { # expect_eq WHAT GOT WANT
	if [ "$2" != "$3" ]; then fail "$1: got '$2', want '$3'"; return 1; fi
}
finish() {
	if [ "$FAILS" -ne 0 ]; then echo "$FAILS check(s) failed"; exit 1; fi
	echo "all checks passed"
	exit 0
}
