#!/usr/bin/env bash
# msprobe-real: the real msprobe (PyPI mindstudio-probe) on a tiny CPU model (tests/msprobe/make-dumps.py),
# its dumps ingested by align: md5 task at mix and L1 levels, fp32 run twice (the same bytes, every record
# bitwise-equal, report exit 0) and bf16 (autocast) against fp32 (the first difference is the first
# linear's output, flagged as the root cause); the statistics task at L1 compared as summaries. The
# generating script also checks that msprobe's "md5" is zlib's CRC-32 of the raw bytes (bf16 too).
# mindstudio-probe and torch come from the probe tests' cached environment (tests/probe/venv.sh,
# tests/probe/requirements.txt: ${XDG_CACHE_HOME:-~/.cache}/align/venv-probe-<hash>). Exit 77 (skipped)
# only when that install is impossible (no python3 venv, no package index), saying why.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/msprobe/compare-dumps.sh"
skip() {
	echo "SKIP: $*"
	exit 77
}

command -v python3 > /dev/null || skip "no python3 to install mindstudio-probe and torch into a virtual environment"
# the probe tests' environment (tests/probe/requirements.txt: torch, paddlepaddle, mindstudio-probe, pinned)
venv=$(bash "$SRCROOT/tests/probe/venv.sh" | tail -n 1) || skip "tests/probe/venv.sh could not install the environment"
py=$venv/bin/python
"$py" -c 'import msprobe' 2> /dev/null ||
	skip "mindstudio-probe did not install into $venv (optional there; see tests/probe/venv.sh's output)"
"$py" -c 'import torch, msprobe' || fail "the environment $venv cannot import torch and msprobe"

dump() { # dump OUT TASK LEVEL PRECISION: two steps of the tiny model
	echo "msprobe: $2 task, level $3, $4"
	"$py" "$SRCROOT/tests/msprobe/make-dumps.py" "$1" "$2" "$3" "$4" 2 > "$1.log" 2>&1 ||
		fail "make-dumps.py $*: $(grep -v INFO "$1.log" | tail -n 5)"
	grep 'zlib.crc32' "$1.log"
}
for level in mix L1; do
	dump "md5-$level-fp32" md5 $level fp32
	dump "md5-$level-fp32-again" md5 $level fp32
	dump "md5-$level-bf16" md5 $level bf16
	n=$(find "md5-$level-fp32" -name dump.json | wc -l)
	expect_eq "$level: dump.json files (DUMP/step{0,1}/proc{PID})" "$n" "2"
	cmp -s <(cd "md5-$level-fp32" && find . -name dump.json | sort | xargs cat) \
		<(cd "md5-$level-fp32-again" && find . -name dump.json | sort | xargs cat) ||
		fail "$level: two fp32 runs wrote different dump.json"
	msprobe_compare "md5-$level-fp32" "md5-$level-bf16" "md5-$level-fp32-again"
	expect_eq "$level: two steps" "$(sqlite3 cmp.db "SELECT group_concat(DISTINCT step) FROM record")" "1,2"
	[ "$level" = L1 ] && expect_eq "L1: no module records" "$(sqlite3 cmp.db "SELECT count(*) FROM record WHERE name LIKE 'Module.%'")" "0"
done

# the statistics task: summaries, never bitwise
dump stat-L1-fp32 statistics L1 fp32
dump stat-L1-bf16 statistics L1 bf16
run_align 0 ingest --db s.db --quiet stat-L1-fp32 stat-L1-bf16
run_align 1 report --db s.db --runs stat-L1-fp32,stat-L1-bf16
expect_out "^first difference: functional\.linear\.0\.forward\.output\.0 at step 1, micro -, rank 0: differ: summaries differ: "
expect_out "tensor\.__add__\.0\.forward\.output\.0 +0/2 bitwise-equal, 2 equal as printed$"
finish
