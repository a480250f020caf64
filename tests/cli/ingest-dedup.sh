#!/usr/bin/env bash
# ingest-dedup: content dedup belongs to a run. Two byte-identical multi-file runs (2 ranks x 3 steps
# of ATF traces, one file per rank and step) ingested as A and as B compare bitwise-equal; the same
# bytes into the same run are a no-op that says so (also given twice in one command); a bisect trial
# whose traces are identical to another run's files is usable and lands in its own run.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

# traces DIR: rank R, step S: the loss and a module called twice (two digests), no explicit seq
traces() {
	local r s
	mkdir -p "$1"
	for r in 0 1; do
		for s in 1 2 3; do
			{
				printf '{"align_trace":1,"run":"job","framework":"align","rank":%d,"world_size":2}\n' "$r"
				printf '{"step":%d,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x4020000%d"}\n' "$s" "$s"
				printf '{"step":%d,"name":"layers.0.mlp","phase":"fwd","dtype":"bf16","shape":[4],"digest":"00000000000a%d%d00"}\n' "$s" "$r" "$s"
				printf '{"step":%d,"name":"layers.0.mlp","phase":"fwd","dtype":"bf16","shape":[4],"digest":"00000000000b%d%d00"}\n' "$s" "$r" "$s"
			} >"$1/rank$r-step$s.atf"
		done
	done
}
traces a
cp -r a b
run_align 0 ingest --db a.db --as A a/rank0-step1.atf a/rank0-step2.atf a/rank0-step3.atf a/rank1-step1.atf a/rank1-step2.atf a/rank1-step3.atf
run_align 0 ingest --db a.db --as B b/rank0-step1.atf b/rank0-step2.atf b/rank0-step3.atf b/rank1-step1.atf b/rank1-step2.atf b/rank1-step3.atf
expect_eq "every file of B ingested" "$(grep -c "3 records into run 'B'" out.txt)" "6"
expect_eq "records per run" "$(sql a.db "SELECT group_concat(n, ' ') FROM (SELECT run.name, count(*) AS n FROM record JOIN run ON run.id = run_id GROUP BY run.name ORDER BY run.name)")" "18 18"
expect_eq "sources per run" "$(sql a.db "SELECT group_concat(n, ' ') FROM (SELECT run_id, count(*) AS n FROM source GROUP BY run_id ORDER BY run_id)")" "6 6"
# the question that failed when the answer is yes: are these two runs bitwise identical?
run_align 0 report --db a.db --runs A,B && expect_out "no difference"
run_align 0 report --db a.db --runs A,B --format json --out r.json
expect_eq "every record bitwise-equal" "$(jget r.json "'%d %d %d %d %d' % tuple(r['totals'][k] for k in ('compared', 'bitwise_equal', 'differ', 'only_in_a', 'only_in_b'))")" "18 18 0 0 0"
# the module called twice stays two occurrences in each run
expect_eq "occurrences" "$(sql a.db "SELECT group_concat(DISTINCT occ) FROM record WHERE canon LIKE '%mlp%'")" "0,1"

# the same content (also compressed) into a third run is that run's records
gzip -c a/rank0-step1.atf >c.atf.gz
run_align 0 ingest --db a.db --as C c.atf.gz && expect_out "c.atf.gz: atf, 3 records into run 'C'"

# the same bytes into the same run: a no-op that names the run and the file that holds them
before=$(sqlite3 a.db .dump | sha256sum)
run_align 0 ingest --db a.db --as A b/rank1-step2.atf &&
	expect_out "b/rank1-step2.atf: already ingested into run 'A' \(sha256 [0-9a-f]{16}, as 'a/rank1-step2.atf'\): nothing to do"
run_align 0 ingest --db a.db --as A --append a/rank0-step3.atf && expect_out "already ingested into run 'A'"
expect_eq "database unchanged by the no-ops" "$(sqlite3 a.db .dump | sha256sum)" "$before"
# ... also when one command gives them twice
run_align 0 ingest --db a.db --as D a/rank0-step1.atf b/rank0-step1.atf
expect_out "a/rank0-step1.atf: atf, 3 records into run 'D'"
expect_out "b/rank0-step1.atf: already ingested into run 'D' .*nothing to do"
expect_eq "D once" "$(sql a.db "SELECT count(*) || ' ' || (SELECT count(*) FROM source WHERE run_id = run.id) FROM record JOIN run ON run.id = run_id WHERE run.name = 'D'")" "3 1"

# without --as (and without a run name in the ATF header) each file is its own run: a copy under another
# name is another run, under the same name (its run holds that content) a no-op
sed '1s/"run":"job",//' a/rank1-step3.atf > x.atf
mkdir again && cp x.atf again/x.atf && cp x.atf y.atf
run_align 0 ingest --db n.db x.atf && run_align 0 ingest --db n.db y.atf && expect_out "y.atf: atf, 3 records into run 'y'"
run_align 0 ingest --db n.db again/x.atf && expect_out "already ingested into run 'x'"
expect_eq "runs x and y" "$(db_count n.db)" "2 2 6"

# bisect: the good trial's rank-0 trace is byte-identical to a run's file that holds only it; the trial
# is usable (it used to be "partly identical to another run's files") and its run holds both ranks
mkdir ref && (cd ref && ALIGN_TRIAL_DIR=$PWD "$TRACE" --culprit S10 --ranks 2 --write-to out) || fail "fixture failed"
run_align 0 ingest --db g.db --as solo ref/out/rank0.atf
run_align 0 bisect --db g.db --good "$GOOD12" --bad "$BAD12" --trace-glob 'out/rank*.atf' --format json --out g.json \
	-- "$TRACE" --culprit S10 --ranks 2 --write-to out
expect_eq "culprit" "$(culprit_of g.json)" "S10"
expect_eq "no unusable trial" "$(jget g.json "r['counts']['unusable']")" "0"
good=$(jget g.json "r['trials'][0]['run']")
expect_eq "good trial's own run" "$(sql g.db "SELECT count(DISTINCT rank) || ' ' || count(*) FROM record JOIN run ON run.id = run_id WHERE run.name = '$good'")" "2 6"
finish
