#!/usr/bin/env bash
# ingest-empty: a file that yields no record is an input error (exit 2) that says which format was
# detected (or given) and what the file lacks; its run is not created and the database is unchanged.
# Several files: each empty one is an error, the others still land (one transaction per file).
. "$SRCROOT/tests/cli/lib.sh"

printf '{"align_trace":1,"run":"x","framework":"align","rank":0}\n' >header.atf
printf '{"align_trace":1,"rank":0}\n{"step":1,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x40200000"}\n' >one.atf
printf '{"align_trace":1,"rank":1}\n{"step":1,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x40200001"}\n' >two.atf
run_align 0 ingest --db a.db --as base one.atf
before=$(sqlite3 a.db .dump | sha256sum)

run_align 2 ingest --db a.db header.atf &&
	expect_err "^error: header.atf: no records: detected as atf, but it has no record line after the header$"
expect_eq "no run 'header'" "$(sql a.db "SELECT count(*) FROM run WHERE name = 'header'")" "0"
gzip -c header.atf >header.atf.gz
run_align 2 ingest --db a.db --as h --format atf header.atf.gz &&
	expect_err "header.atf.gz: no records: read as atf, but it has no record line after the header"
run_align 2 ingest --db a.db --as base --append header.atf && expect_err "header.atf: no records"
expect_eq "database unchanged" "$(sqlite3 a.db .dump | sha256sum)" "$before"
run_align 2 report --db a.db --runs base,header && expect_err "no run 'header'"

# several files: the empty one fails, the others land in the run
run_align 2 ingest --db m.db --as M one.atf header.atf two.atf
expect_err "header.atf: no records: detected as atf"
expect_out "one.atf: atf, 1 records into run 'M'"
expect_out "two.atf: atf, 1 records into run 'M'"
expect_eq "the others landed" "$(db_count m.db)" "1 2 2"
# the empty file first: the run is created by the next one
run_align 2 ingest --db f.db --as F header.atf one.atf
expect_eq "run from the next file" "$(sql f.db "SELECT name || ' ' || (SELECT count(*) FROM record) FROM run")" "F 1"
finish
