#!/usr/bin/env bash
# bench-ingest.sh: align ingest vs the sqlite3 shell's .import of the same rows, and first-diff time.
# usage: bench-ingest.sh [N_RECORDS (default 1000000)] [N_FIRSTDIFF (default 10000000, 0 to skip)]
# Figures (all measured in this one run, same machine, same disk):
#   ingest_s   = wall time of `align ingest` of an ATF trace of N tensor records
#   import_s   = wall time of `sqlite3 db ".import --csv"` of the same N rows (the columns align fills)
#                into a file database with the same columns and the same two indexes
#   ratio      = ingest_s / import_s   (goal <= 1.5)
#   cpu ratio  = the same with CPU time (user + sys, GNU time), the figure to quote on a loaded machine:
#                wall time there mostly measures the other processes
#   firstdiff_s = wall time of `align report --first-diff` on two runs of N_FIRSTDIFF/2 records each,
#                differing from the last step on (goal < 1 s for 10M records)
set -euo pipefail
ALIGN=${ALIGN:-$(cd "$(dirname "$0")/../.." && pwd)/build/harness/align}
here=$(cd "$(dirname "$0")" && pwd)
n=${1:-1000000}
nf=${2:-10000000}
work=$(mktemp -d "${TMPDIR:-/tmp}/align-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
now() { date +%s.%N; }
python3 "$here/gen-trace.py" "$n" trace.atf rows.csv
cat > import.sql <<'SQL'
CREATE TABLE record (run_id INTEGER NOT NULL, source_id INTEGER NOT NULL, line INTEGER NOT NULL,
  rank INTEGER NOT NULL, step INTEGER NOT NULL, micro INTEGER NOT NULL, seq INTEGER NOT NULL,
  occ INTEGER NOT NULL, name TEXT NOT NULL, canon TEXT NOT NULL, phase TEXT NOT NULL, dtype TEXT,
  shape TEXT, digest TEXT, digest_alg TEXT) STRICT;
CREATE UNIQUE INDEX record_order ON record(run_id, rank, seq);
CREATE INDEX record_key ON record(run_id, canon, rank, step, micro, occ);
SQL
best() { sort -g | head -1; }
ing=(); imp=(); ingc=(); impc=()
cpu() { awk '{printf "%.3f", $1 + $2}' cpu.txt; } # user + sys of the last timed command
for rep in 1 2 3; do
	rm -f a.db import.db
	t0=$(now); /usr/bin/time -o cpu.txt -f '%U %S' "$ALIGN" ingest --quiet --db a.db trace.atf >/dev/null; t1=$(now)
	ing+=("$(echo "$t1 - $t0" | bc -l)") ingc+=("$(cpu)")
	sqlite3 import.db < import.sql
	t0=$(now); /usr/bin/time -o cpu.txt -f '%U %S' sqlite3 import.db ".import --csv rows.csv record"; t1=$(now)
	imp+=("$(echo "$t1 - $t0" | bc -l)") impc+=("$(cpu)")
done
rows=$(sqlite3 a.db "SELECT count(*) FROM record")
irows=$(sqlite3 import.db "SELECT count(*) FROM record")
ingest_s=$(printf '%s\n' "${ing[@]}" | sort -g | sed -n 2p)
import_s=$(printf '%s\n' "${imp[@]}" | sort -g | sed -n 2p)
ingest_c=$(printf '%s\n' "${ingc[@]}" | sort -g | sed -n 2p)
import_c=$(printf '%s\n' "${impc[@]}" | sort -g | sed -n 2p)
printf 'machine: %s, %s cores; sqlite %s; commit %s\n' "$(uname -m)" "$(nproc)" "$(sqlite3 --version | cut -d' ' -f1)" \
	"$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
printf 'ingest  N=%s rows=%s  median of 3: %.3f s  (%.0f rows/s)  runs: %s\n' "$n" "$rows" "$ingest_s" \
	"$(echo "$rows / $ingest_s" | bc -l)" "${ing[*]}"
printf 'import  N=%s rows=%s  median of 3: %.3f s  (%.0f rows/s)  runs: %s\n' "$n" "$irows" "$import_s" \
	"$(echo "$irows / $import_s" | bc -l)" "${imp[*]}"
printf 'ratio ingest/import = %.2f  (goal <= 1.5)\n' "$(echo "$ingest_s / $import_s" | bc -l)"
printf 'cpu (user+sys) median of 3: ingest %.3f s, import %.3f s, ratio %.2f  runs: %s / %s\n' "$ingest_c" "$import_c" \
	"$(echo "$ingest_c / $import_c" | bc -l)" "${ingc[*]}" "${impc[*]}"
if [ "$nf" -gt 0 ]; then
	half=$((nf / 2))
	last=$(( (half + 999) / 1000 ))
	python3 "$here/gen-trace.py" "$half" a.atf
	python3 "$here/gen-trace.py" "$half" b.atf --differ-at "$last"
	rm -f f.db
	t0=$(now); "$ALIGN" ingest --quiet --db f.db --as a a.atf >/dev/null; "$ALIGN" ingest --quiet --db f.db --as b b.atf >/dev/null; t1=$(now)
	printf 'ingest of 2 x %s records: %.1f s\n' "$half" "$(echo "$t1 - $t0" | bc -l)"
	fd=()
	for rep in 1 2 3; do
		t0=$(now); "$ALIGN" report --db f.db --runs a,b --first-diff >/dev/null || true; t1=$(now)
		fd+=("$(echo "$t1 - $t0" | bc -l)")
	done
	printf 'first-diff on %s records (diff in the last step %s): median of 3: %.3f s (goal < 1 s)  runs: %s\n' \
		"$nf" "$last" "$(printf '%s\n' "${fd[@]}" | sort -g | sed -n 2p)" "${fd[*]}"
fi
