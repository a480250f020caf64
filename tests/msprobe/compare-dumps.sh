# shellcheck shell=bash
# compare-dumps.sh: sourced by the msprobe CLI tests (after tests/cli/lib.sh). msprobe_compare FP32 BF16
# [FP32B] ingests msprobe md5 dump directories of the tiny model of make-dumps.py, fp32 (FP32B: a second
# fp32 run, default FP32 itself) and bf16 (autocast), and checks the report: fp32 against the second fp32
# run bitwise-equal in every record, exit 0; bf16 against fp32:
# exit 1, the first difference is the first linear's output (Functional.linear.0.forward: its inputs are
# the same fp32 tensors, its output is bf16) and it is flagged as the root cause.
# A deterministic second run writes the same bytes: dedup is per run, so they are that run's records.
msprobe_compare() {
	local fp32=$1 bf16=$2 fp32b=${3:-$1} db=cmp.db f n
	rm -rf fp32b "$db"
	cp -r "$fp32b" fp32b
	run_align 0 ingest --db "$db" --quiet --as fp32 "$fp32" || return
	run_align 0 ingest --db "$db" --quiet --as fp32b fp32b || return
	run_align 0 ingest --db "$db" --quiet --as bf16 "$bf16" || return
	n=$(sqlite3 "$db" "SELECT count(*) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='fp32'")
	[ "$n" -gt 20 ] || fail "only $n records in the fp32 run"
	expect_eq "every record has a crc32 digest" "$(sqlite3 "$db" "SELECT count(*) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='fp32' AND (digest_alg='crc32' OR dtype IN ('fp64','int64','bool'))")" "$n"
	run_align 0 report --db "$db" --runs fp32,fp32b && expect_out "totals: $n/$n bitwise-equal"
	run_align 1 report --db "$db" --runs fp32,bf16 || return
	expect_out "^first difference: functional\.linear\.0\.forward\.output\.0 at step 1, micro -, rank 0: differ: crc32 digests differ"
	expect_out "^root cause candidate: functional\.linear\.0\.forward\.output\.0 \(inputs equal, output differs\) at step 1, micro -, rank 0: call 'Functional\.linear\.0\.forward', 3 inputs bitwise-equal; it is the first difference"
	# the ops before it (x * 0.5 + 1.0) are equal in both runs
	expect_out "tensor\.__add__\.0\.forward\.output\.0 +[0-9]+/[0-9]+ bitwise-equal$"
}
