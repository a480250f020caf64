#!/usr/bin/env bash
# report-scope: job metadata (records of phase "meta": timings, memory, progress) is left out of a
# report unless --all: ingest fills meta_canon (once per canon and file, inside the file's
# transaction, backfilled by the migration for older databases); the default scope "numerics"
# follows every other name as if named with --metric; --all, --metric and --map set the scope
# "all", "metrics" and "all"; JSON scope and meta_left_out, the text and Markdown notes.
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# trace RUN TIME LOSS3: 4 steps of (iteration time [meta], memory [meta], loss bits, grad norm); the
# timings differ between runs at every step, loss may differ at step 3
trace() {
	printf '{"align_trace":1,"run":"%s","framework":"align","rank":0}\n' "$1"
	for s in 1 2 3 4; do
		printf '{"step":%d,"name":"iteration-time","phase":"meta","value":%s.%d}\n' "$s" "$2" "$s"
		printf '{"step":%d,"name":"mem-allocated-bytes","phase":"meta","value":%d}\n' "$s" "$((1000 + $2))"
		bits=0x4120000$s
		[ "$s" = 3 ] && bits=$3
		printf '{"step":%d,"name":"lm loss","phase":"loss","dtype":"fp32","bits":"%s"}\n' "$s" "$bits"
		printf '{"step":%d,"name":"grad norm","phase":"grad","dtype":"fp32","bits":"0x3f80000%d"}\n' "$s" "$s"
	done
}
trace a 1 0x41200003 > a.atf
trace b 2 0x41200003 > b.atf
trace c 3 0x41200009 > c.atf

# --- ingest: meta_canon rows, once per canon, and only for phase meta ------------------------------------
run_align 0 ingest --db s.db --quiet a.atf b.atf c.atf
expect_eq "meta_canon" "$(sql s.db "SELECT group_concat(r.name || ':' || m.canon, ' ') FROM (SELECT * FROM meta_canon ORDER BY run_id, canon) m JOIN run r ON r.id = m.run_id")" \
	"a:iteration_time a:mem_allocated_bytes b:iteration_time b:mem_allocated_bytes c:iteration_time c:mem_allocated_bytes"
expect_eq "schema version" "$(sql s.db "PRAGMA user_version")" "4"

# --- default scope: numerics; equal numerics exit 0 although every timing differs -------------------------
run_align 0 report --db s.db --runs a,b --format json --out ab.json
expect_eq "numerics scope" "$(pyj ab.json '[d["scope"], d["meta_left_out"], [m["name"] for m in d["metrics"]], d["totals"]["compared"], d["totals"]["bitwise_equal"], d["first_diff"], d["first_only_in"]]')" \
	"['numerics', ['iteration_time', 'mem_allocated_bytes'], ['grad_norm', 'loss'], 8, 8, None, None]"
run_align 0 report --db s.db --runs a,b
expect_out "^  left out 2 job-metadata names \(timings, memory\); --all includes them$"
expect_out "^bitwise-equal through step 4; no difference$"
run_align 0 report --db s.db --runs a,b --format md
expect_out '^Scope: left out 2 job-metadata names \(timings, memory\); --all includes them \(`iteration_time`, `mem_allocated_bytes`\)\.$'
# --first-diff follows each numeric name to its own first difference (as with --metric)
run_align 1 report --db s.db --runs a,c --first-diff --format json --out ac.json
expect_eq "numerics first diff" "$(pyj ac.json '[d["first_diff"]["name"], d["first_diff"]["step"], d["searched_through_step"], d["proven_equal_through_step"]] + [(m["name"], m["first_diff_step"]) for m in d["metrics"]]')" \
	"['loss', 3, None, 2, ('grad_norm', None), ('loss', 3)]"

# --- --all: the timings too -------------------------------------------------------------------------------
run_align 1 report --db s.db --runs a,b --all --format json --out all.json
expect_eq "all scope" "$(pyj all.json '[d["scope"], d["meta_left_out"], d["first_diff"]["name"], d["first_diff"]["step"], len(d["metrics"])]')" \
	"['all', [], 'iteration_time', 1, 4]"
run_align 1 report --db s.db --runs a,b --all
expect_out "first difference: iteration_time at step 1"
if grep -q "job-metadata" out.txt; then fail "--all printed a left-out note"; fi
# --metric: the scope is the names given (a meta name may be named)
run_align 1 report --db s.db --runs a,b --metric iteration-time --format json --out m.json
expect_eq "metrics scope" "$(pyj m.json '[d["scope"], d["meta_left_out"], [m["name"] for m in d["metrics"]]]')" "['metrics', [], ['iteration_time']]"
# --map implies --all
printf '^lm loss$ -> loss\n' > n.map
run_align 1 report --db s.db --runs a,b --map n.map --format json --out map.json
expect_eq "map scope" "$(pyj map.json '[d["scope"], d["first_diff"]["name"]]')" "['all', 'iteration_time']"
run_align 0 report --help && expect_out "implies --all" && expect_out "^  --all "

# --- a run without meta names: the scope is numerics, nothing left out, every name read ------------------------
grep -v '"phase":"meta"' a.atf | sed 's/"run":"a"/"run":"p"/' > p.atf
grep -v '"phase":"meta"' c.atf | sed 's/"run":"c"/"run":"q"/' > q.atf
run_align 0 ingest --db n.db --quiet p.atf q.atf
run_align 1 report --db n.db --first-diff --format json --out pq.json
expect_eq "no meta" "$(pyj pq.json '[d["scope"], d["meta_left_out"], d["first_diff"]["name"], d["searched_through_step"]]')" "['numerics', [], 'loss', 3]"

# --- a file rolled back: its meta_canon rows go with it; the next file of the run writes its own ---------------
{ head -3 a.atf; printf '{"step":1,"name":"bad","value":"zz"}\n'; } | sed 's/"run":"a"/"run":"r"/' > bad.atf
sed 's/"run":"a"/"run":"r"/' a.atf > good.atf
run_align 2 ingest --db r.db --as r --quiet bad.atf good.atf
expect_eq "meta after rollback" "$(sql r.db "SELECT group_concat(canon, ' ') FROM (SELECT canon FROM meta_canon ORDER BY canon)")" "iteration_time mem_allocated_bytes"
run_align 2 ingest --db r2.db --as r --quiet bad.atf
expect_eq "nothing from a rolled-back file" "$(sql r2.db "SELECT count(*) FROM meta_canon")" "0"

# --- a database of schema version 2: the migration fills meta_canon from the records --------------------------
sqlite3 old.db < "$SRCROOT/schema/0001-init.sql"
sqlite3 old.db < "$SRCROOT/schema/0002-bisect.sql"
sqlite3 old.db "PRAGMA user_version=2;
INSERT INTO run(id, name, framework, format, created) VALUES (1, 'old', 'megatron', 'megatron-log', '2026-01-01T00:00:00Z');
INSERT INTO source(id, run_id, path, sha256, format, bytes, records, ingested) VALUES (1, 1, 'x.log', 'ab', 'megatron-log', 1, 2, 'now');
INSERT INTO record(run_id, source_id, line, rank, step, micro, seq, occ, name, canon, phase, text)
  VALUES (1, 1, 1, -1, 1, -1, 0, 0, 'consumed samples', 'consumed_samples', 'meta', '32'),
         (1, 1, 1, -1, 1, -1, 1, 0, 'lm loss', 'loss', 'loss', '1.0');"
run_align 2 report --db old.db && expect_err "has schema version 2, expected 4: run 'align ingest' once to migrate"
run_align 0 ingest --db old.db --quiet p.atf
expect_eq "backfilled" "$(sql old.db "SELECT group_concat(run_id || ':' || canon) FROM meta_canon")" "1:consumed_samples"
# 0004 rebuilt `source` (unique per run): the old run's source and records survive, keys hold
expect_eq "old records kept" "$(sql old.db "SELECT count(*) FROM record WHERE run_id = 1")" "2"
expect_eq "old source kept" "$(sql old.db "SELECT path FROM source WHERE id = 1")" "x.log"
expect_eq "foreign keys" "$(sql old.db "PRAGMA foreign_key_check")" ""
expect_eq "integrity" "$(sql old.db "PRAGMA integrity_check")" "ok"
finish
