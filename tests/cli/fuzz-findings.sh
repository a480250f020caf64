#!/usr/bin/env bash
# fuzz-findings.sh: what fuzzing found (issue 11), through the command line. Each input is also kept in
# tests/fuzz/crashes/<target>/ and replayed by the fuzz-* tests (under ASan/UBSan in the sanitizer build).
source "$SRCROOT/tests/cli/lib.sh"

# --- Megatron golden values with an empty "values" object: no record (exit 2), nothing written --------
printf '{"":{"values":{}}}' > golden_values.json
run_align 0 ingest --db g.db --quiet "$SRCROOT/tests/samples/atf/demo.atf"
before=$(sqlite3 g.db .dump | sha256sum)
run_align 2 ingest --db g.db --format megatron-golden golden_values.json &&
	expect_err "^error: golden_values.json: no records: read as megatron-golden, but no metric in it has a value$"
expect_eq "golden: database unchanged" "$(sqlite3 g.db .dump | sha256sum)" "$before"

# --- anchors: an MTP depth of many digits overflowed an int (UBSan; found by fuzz-ingest-anchor), and the
# wrapped depth was ingested: now it is the depth error, nothing written ----------------------------------
printf 'final_loss: rank=0 val=10.86875057220458984375 md5=36c089f8e14e6d67e0621d7c6dad1be5\n[MTP_LOSS_PATH_MD5] rank=1 mtp1999999999999999999999.final_loss=10.5\n' > anchors.log
before=$(sqlite3 g.db .dump | sha256sum)
run_align 2 ingest --db g.db --format anchor anchors.log && expect_err "^error: anchors.log:2: \[MTP_LOSS_PATH_MD5\] anchor: MTP depth [0-9]+ is beyond 7$"
expect_eq "anchors: database unchanged" "$(sqlite3 g.db .dump | sha256sum)" "$before"

# --- --map: a pattern is bounded before regcomp (which expands a{1000}{1000} into gigabytes) --------------
sed 's/"run":"demo"/"run":"b"/' "$SRCROOT/tests/samples/atf/demo.atf" > b.atf
run_align 0 ingest --db r.db --quiet "$SRCROOT/tests/samples/atf/demo.atf" b.atf
printf '^loss$ -> loss\n(a{1000}){1000} -> x\n' > big.map
# a bounded address space: without the bound the old regcomp fails here (or takes the machine's memory);
# not under ASan, whose shadow memory needs terabytes of address space
vlimit=4000000
grep -q __asan_init "$ALIGN" && vlimit=unlimited
(ulimit -v $vlimit; run_align 2 report --db r.db --runs demo,b --map big.map) &&
	expect_err "^error: big.map:2: regex refused: too large once its repetitions are expanded \(at most 2000 nodes\)$"
printf 'a{1000}{1000}{1000} -> x\n' > nested.map
(ulimit -v $vlimit; run_align 2 report --db r.db --runs demo,b --map nested.map) &&
	expect_err "^error: nested.map:1: regex refused: two quantifiers in a row \(POSIX leaves them undefined; group the first\)$"
# found by fuzz-map: glibc's regcomp takes minutes (exponential in the count) on stacked optionals
printf 'e??{50}* -> x\n' > slow1.map
run_align 2 report --db r.db --runs demo,b --map slow1.map && expect_err "^error: slow1.map:1: regex refused: two quantifiers in a row"
printf '# ok\n((e?)?){20}* -> x\n' > slow2.map
run_align 2 report --db r.db --runs demo,b --map slow2.map &&
	expect_err "^error: slow2.map:2: regex refused: quantifiers nested more than 2 deep$"
# found by fuzz-map: each '+' doubles what regcomp builds
printf ']]+++++++++++++++++++++++++++++++++++++++ -> x\n' > plus.map
run_align 2 report --db r.db --runs demo,b --map plus.map && expect_err "^error: plus.map:1: regex refused: two quantifiers in a row"
printf '# back-references: exponential matching\n(a*)*b\\1 -> x\n' > backref.map
run_align 2 report --db r.db --runs demo,b --map backref.map &&
	expect_err "^error: backref.map:2: regex refused: back-references are not supported"
python3 -c 'print("a" * 1100 + " -> x")' > long.map
run_align 2 report --db r.db --runs demo,b --map long.map &&
	expect_err "^error: long.map:1: regex refused: longer than 1024 bytes$"
# {m,} and {,n} are bounds too (found by reading map_bound after fuzz-map's count overflow), counts saturate
printf 'a{30000,} -> x\n' > open.map
run_align 2 report --db r.db --runs demo,b --map open.map && expect_err "^error: open.map:1: regex refused: too large"
printf 'a{,30000} -> x\n' > upto.map
run_align 2 report --db r.db --runs demo,b --map upto.map && expect_err "^error: upto.map:1: regex refused: too large"
printf 'a{99999999999999999999999,} -> x\n' > huge.map
run_align 2 report --db r.db --runs demo,b --map huge.map && expect_err "^error: huge.map:1: regex refused: too large"
# what a real map needs still loads: classes, alternation, bounded repeats, escaped '{'
printf '^(decoder|model)\\.layers\\.[0-9]{1,3}\\.mlp$ -> mlp\n[[:alpha:]]{2,8}\\{x\\} -> y\n^((a|b)+c?)*$ -> z\n^x$ -> x\n' > fine.map
run_align 0 report --db r.db --runs demo,b --map fine.map --format json --out fine.json
expect_eq "fine map: metrics" "$(python3 -c 'import json; print(sorted(m["name"] for m in json.load(open("fine.json"))["metrics"]))')" "['loss', 'x']"
finish
