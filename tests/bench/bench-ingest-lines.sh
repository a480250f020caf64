#!/usr/bin/env bash
# bench-ingest-lines.sh: align ingest of the line formats vs the sqlite3 shell's .import of the same rows.
# usage: bench-ingest-lines.sh [N_LINES (default 1000000)] [FORMAT...] (default: every line format but atf,
#        which bench-ingest.sh measures)
# Per format, all figures measured in this one run, same machine, same disk:
#   lines    = loss lines of the generated log (gen-lines.py: one value per line, steps 1..N)
#   records  = rows align stores for them (= lines: every generated line holds one value)
#   ingest_s = wall time of `align ingest --format F` of the log into a new database (median of 3)
#   import_s = wall time of `sqlite3 db ".import --csv"` of the same rows into a new database whose
#              record table has the same columns (those align fills for these rows) and the same two
#              indexes (record_order, record_key), median of 3
#   ratio    = ingest_s / import_s   (goal <= 1.5)
#   cpu      = user+sys seconds of the median ingest / of the median import (load on a shared machine
#              stretches wall times; CPU times show how much of a ratio is work)
# With ALIGN_BASE=path/to/an/older/align, each round also times that binary (base_s, base_ratio =
# base_s / import_s): before and after in one run, under the same load.
# The CSV is exactly what align stores: the record rows of an untimed first ingest, exported with
# sqlite3 (columns: those non-NULL in some row). Runs alternate ingest/import so that load on the
# machine hits both alike; every run's time is printed.
set -euo pipefail
ALIGN=${ALIGN:-$(cd "$(dirname "$0")/../.." && pwd)/build/harness/align}
here=$(cd "$(dirname "$0")" && pwd)
n=${1:-1000000}
shift || true
formats=("$@")
[ ${#formats[@]} -gt 0 ] || formats=(torchtitan torchtitan-log megatron-log paddle-log paddle-metrics xtuner-log anchor)
work=$(mktemp -d "${TMPDIR:-/tmp}/align-bench-lines.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
median() { sort -g | sed -n 2p; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
# timed CMD...: runs it, appends "wall cpu" to the array named by $T
timed() {
	local TIMEFORMAT='%R %U %S' # bash's time: no /usr/bin/time or bc needed (the GPU machine has neither)
	{ time "$@" >/dev/null; } 2>"$work/time.txt"
	read -r w u s < <(tail -1 "$work/time.txt")
	eval "$T+=(\"$w $(calc "$u + $s")\")"
}
# med ARRAY FIELD: the FIELD (1 wall, 2 cpu) of the run with the median wall time
med() {
	local -n a=$1
	printf '%s\n' "${a[@]}" | sort -g | sed -n 2p | cut -d' ' -f"$2"
}
walls() {
	local -n a=$1
	printf '%.2f ' $(printf '%s\n' "${a[@]}" | cut -d' ' -f1)
}
# column name -> declared type, as in schema/0001-init.sql
declare -A type=([run_id]=INTEGER [source_id]=INTEGER [line]=INTEGER [rank]=INTEGER [step]=INTEGER
	[micro]=INTEGER [seq]=INTEGER [occ]=INTEGER [name]=TEXT [canon]=TEXT [phase]=TEXT [dtype]=TEXT
	[shape]=TEXT [bits]=INTEGER [value]=REAL [text]=TEXT [digits]=INTEGER [lo]=REAL [hi]=REAL
	[digest]=TEXT [digest_alg]=TEXT [stats]=TEXT [head]=TEXT [payload]=BLOB [missing]=TEXT [extra]=TEXT
	[superseded]=INTEGER [call]=TEXT [io]=TEXT)
printf 'machine: %s, %s cores, load %s; sqlite %s; commit %s\n' "$(uname -m)" "$(nproc)" \
	"$(cut -d' ' -f1-3 /proc/loadavg)" "$(sqlite3 --version | cut -d' ' -f1)" \
	"$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
base=${ALIGN_BASE:-}
if [ -n "$base" ]; then
	printf '%-15s %8s %8s %9s %9s %6s %9s %6s %11s   %s\n' format lines records ingest_s import_s ratio base_s \
		base_r 'cpu i/imp' 'wall runs (ingest | import | base)'
else
	printf '%-15s %8s %8s %9s %9s %6s %11s   %s\n' format lines records ingest_s import_s ratio 'cpu i/imp' \
		'wall runs (ingest | import)'
fi
for f in "${formats[@]}"; do
	python3 "$here/gen-lines.py" "$f" "$n" log.txt
	rm -f ref.db
	"$ALIGN" ingest --quiet --db ref.db --format "$f" log.txt >/dev/null
	cols=()
	for c in "${!type[@]}"; do
		[ "$(sqlite3 ref.db "SELECT count(\"$c\") > 0 FROM record")" = 1 ] && cols+=("$c")
	done
	mapfile -t cols < <(printf '%s\n' "${cols[@]}" | sort)
	decl=$(for c in "${cols[@]}"; do printf '"%s" %s, ' "$c" "${type[$c]}"; done)
	list=$(IFS=,; echo "${cols[*]/#/\"}" | sed 's/,/",/g; s/$/"/')
	sqlite3 -csv ref.db "SELECT $list FROM record ORDER BY id" > rows.csv
	records=$(sqlite3 ref.db "SELECT count(*) FROM record")
	cat > import.sql <<SQL
CREATE TABLE record (${decl%, });
CREATE UNIQUE INDEX record_order ON record(run_id, rank, seq);
CREATE INDEX record_key ON record(run_id, canon, rank, step, micro, occ);
SQL
	ing=(); imp=(); bas=()
	for rep in 1 2 3; do
		rm -f a.db import.db b.db
		T=ing timed "$ALIGN" ingest --quiet --db a.db --format "$f" log.txt
		sqlite3 import.db < import.sql
		T=imp timed sqlite3 import.db ".import --csv rows.csv record"
		[ -z "$base" ] || T=bas timed "$base" ingest --quiet --db b.db --format "$f" log.txt
	done
	irows=$(sqlite3 import.db "SELECT count(*) FROM record")
	[ "$irows" = "$records" ] || { echo "$f: imported $irows rows, align stored $records" >&2; exit 1; }
	ingest_s=$(med ing 1) import_s=$(med imp 1)
	cpu=$(printf '%.1f/%.1f' "$(med ing 2)" "$(med imp 2)")
	ratio=$(calc "$ingest_s / $import_s")
	if [ -n "$base" ]; then
		base_s=$(med bas 1)
		printf '%-15s %8s %8s %9.3f %9.3f %6.2f %9.3f %6.2f %11s   %s| %s| %s\n' "$f" "$n" "$records" "$ingest_s" \
			"$import_s" "$ratio" "$base_s" "$(calc "$base_s / $import_s")" "$cpu" "$(walls ing)" \
			"$(walls imp)" "$(walls bas)"
	else
		printf '%-15s %8s %8s %9.3f %9.3f %6.2f %11s   %s| %s\n' "$f" "$n" "$records" "$ingest_s" "$import_s" \
			"$ratio" "$cpu" "$(walls ing)" "$(walls imp)"
	fi
done
