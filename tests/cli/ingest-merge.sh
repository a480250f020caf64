#!/usr/bin/env bash
# ingest-merge: files merged into one run (given together under one --as, or added with --append). A key
# (name, rank, step, micro) repeated within one file is a further occurrence; across the files of a run
# the i-th occurrence meets the run's occurrence i: an identical value is kept once (said in the file's
# summary line), a different one is an error naming both files and lines (exit 2, the file rolled
# back), unless --occurrences, which keeps both. Global values (rank -1, printed by every rank's log)
# are kept once when equal and are an error when two files disagree.
. "$SRCROOT/tests/cli/lib.sh"

# loss FILE RANK STEP=BITS...: an ATF trace of rank RANK with one loss per step
loss() {
	local f=$1 r=$2 kv
	shift 2
	printf '{"align_trace":1,"run":"job","framework":"align","rank":%d}\n' "$r" >"$f"
	for kv in "$@"; do
		printf '{"step":%d,"name":"loss","phase":"loss","dtype":"fp32","bits":"%s"}\n' "${kv%%=*}" "${kv#*=}" >>"$f"
	done
}
# rows DB RUN: "step:occ:bits" of the run's losses
rows() { sql "$1" "SELECT group_concat(step || ':' || occ || ':' || printf('%x', bits), ' ') FROM (SELECT r.* FROM record r JOIN run ON run.id = r.run_id WHERE run.name = '$2' AND r.canon = 'loss' ORDER BY step, occ)"; }

loss first.atf 0 1=0x40200000 2=0x40200001
loss same.atf 0 2=0x40200001 3=0x40200002 # step 2 as in first.atf, step 3 new
loss other.atf 0 3=0x40200002 2=0x40300000 # step 2 differs from first.atf (line 3)

# --- files given together: a disagreement fails the file that disagrees; the others land ------------
run_align 2 ingest --db a.db --as M first.atf other.atf
expect_err "error: other.atf:3: 'loss' rank 0 step 2 micro 0 is bits 0x40300000 fp32 here but bits 0x40200001 fp32 in first.atf:3 \(same run 'M'\); pass --occurrences to keep both"
expect_out "first.atf: atf, 2 records into run 'M'"
expect_eq "other.atf rolled back whole" "$(rows a.db M) / $(sql a.db "SELECT count(*) FROM source")" "1:0:40200000 2:0:40200001 / 1"

# --- --append: an identical record is kept once, said in the summary line ---------------------------
run_align 0 ingest --db a.db --as M --append same.atf &&
	expect_out "same.atf: atf, 1 records into run 'M', 1 records already in the run \(identical; the first at first.atf:3\)"
expect_eq "kept once" "$(rows a.db M)" "1:0:40200000 2:0:40200001 3:0:40200002"
expect_eq "source records" "$(sql a.db "SELECT group_concat(path || '=' || records, ' ') FROM source")" "first.atf=2 same.atf=1"
# ... and a disagreement leaves the database unchanged
before=$(sqlite3 a.db .dump | sha256sum)
run_align 2 ingest --db a.db --as M --append other.atf &&
	expect_err "other.atf:3: 'loss' rank 0 step 2 micro 0 is bits 0x40300000 fp32 here but bits 0x40200001 fp32 in first.atf:3 \(same run 'M'\)"
expect_eq "database unchanged" "$(sqlite3 a.db .dump | sha256sum)" "$before"

# --- --occurrences keeps both (documented in --help) -------------------------------------------------
run_align 0 ingest --help && expect_out "--occurrences"
run_align 0 ingest --db a.db --as M --append --occurrences other.atf && expect_out "other.atf: atf, 2 records into run 'M'"
expect_eq "--occurrences" "$(rows a.db M)" "1:0:40200000 2:0:40200001 2:1:40300000 3:0:40200002 3:1:40200002"
run_align 0 ingest --db o.db --as O --occurrences first.atf other.atf
expect_eq "--occurrences, files given together" "$(rows o.db O)" "1:0:40200000 2:0:40200001 2:1:40300000 3:0:40200002"

# --- a module called twice in one file: occurrences 0 and 1; the same calls from another file meet them
{
	printf '{"align_trace":1,"rank":0}\n'
	printf '{"step":1,"name":"mlp","phase":"fwd","digest":"00000000000000a1"}\n{"step":1,"name":"mlp","phase":"fwd","digest":"00000000000000a2"}\n'
} >twice.atf
{ cat twice.atf; printf '{"step":2,"name":"mlp","phase":"fwd","digest":"00000000000000b1"}\n'; } >twice-more.atf
{
	printf '{"align_trace":1,"rank":0}\n'
	printf '{"step":1,"name":"mlp","phase":"fwd","digest":"00000000000000a1"}\n{"step":1,"name":"mlp","phase":"fwd","digest":"00000000000000c2"}\n'
} >twice-bad.atf
run_align 0 ingest --db t.db --as T twice.atf twice-more.atf && expect_out "twice-more.atf: atf, 1 records into run 'T', 2 records already"
expect_eq "occurrences kept once" "$(sql t.db "SELECT group_concat(step || ':' || occ || ':' || digest, ' ') FROM (SELECT * FROM record ORDER BY step, occ)")" \
	"1:0:00000000000000a1 1:1:00000000000000a2 2:0:00000000000000b1"
run_align 2 ingest --db t.db --as T --append twice-bad.atf &&
	expect_err "twice-bad.atf:3: 'mlp' rank 0 step 1 micro 0 \(occurrence 1\) is digest 00000000000000c2 here but digest 00000000000000a2 in twice.atf:3"

# --- global values: every rank's log prints them; equal ones are kept once, a disagreement fails ------
printf ' iteration        1/       2 | lm loss: 1.100000E+01 | grad norm: 2.5 |\n iteration        2/       2 | lm loss: 1.090000E+01 | grad norm: 2.4 |\n' >rank0.log
cp rank0.log rank1.log
echo ' iteration        3/       3 | lm loss: 1.080000E+01 |' >>rank1.log # rank 1's log goes on a step
sed 's/1.090000E+01/1.090001E+01/' rank0.log >rank2.log
run_align 0 ingest --db g.db --as G rank0.log rank1.log && expect_out "rank1.log: megatron-log, 1 records into run 'G'"
expect_eq "globals once" "$(sql g.db "SELECT group_concat(rank || ':' || step || ':' || name || '=' || text, ' ') FROM (SELECT * FROM record ORDER BY step, seq)")" \
	"-1:1:lm loss=1.100000E+01 -1:1:grad norm=2.5 -1:2:lm loss=1.090000E+01 -1:2:grad norm=2.4 -1:3:lm loss=1.080000E+01"
before=$(sqlite3 g.db .dump | sha256sum)
run_align 2 ingest --db g.db --as G --append rank2.log &&
	expect_err "rank2.log:2: 'lm loss' \(global\) step 2 is 1.090001E\+01 here but 1.090000E\+01 in rank0.log:2 \(same run 'G'\); pass --occurrences to keep both"
expect_eq "database unchanged" "$(sqlite3 g.db .dump | sha256sum)" "$before"

# --- a restart within a file still supersedes (ingest-megatron.sh has the details) ------------------
printf ' iteration        1/       3 | lm loss: 1.100000E+01 |\n iteration        2/       3 | lm loss: 1.090000E+01 |\n iteration        2/       3 | lm loss: 1.090002E+01 |\n' >restart.log
run_align 0 ingest --db r.db restart.log
expect_eq "restart" "$(sql r.db "SELECT group_concat(step || ':' || occ || ':' || superseded || '=' || text, ' ') FROM (SELECT * FROM record ORDER BY id)")" \
	"1:0:0=1.100000E+01 2:0:1=1.090000E+01 2:0:0=1.090002E+01"
finish
