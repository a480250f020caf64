#!/usr/bin/env bash
# detect-formats: every committed sample of every format (tests/samples/<format>/*, and the reference
# logs and real files under refs/) is detected as its own format when ingested without --format: the
# confusion matrix (expected format x detected format) has zeros off the diagonal, and every format of
# 'align ingest --list-formats' has at least one sample.
. "$SRCROOT/tests/cli/lib.sh"
run_align 0 ingest --list-formats
mapfile -t FORMATS < <(awk '{print $1}' out.txt)
[ "${#FORMATS[@]}" -ge 10 ] || fail "--list-formats lists ${#FORMATS[@]} formats"

# the samples: FORMAT<TAB>PATH
{
	for d in "$SRCROOT"/tests/samples/*/; do
		for f in "$d"*; do printf '%s\t%s\n' "$(basename "$d")" "$f"; done
	done
	for f in "$SRCROOT"/refs/real/megatron_golden/*.json; do printf 'megatron-golden\t%s\n' "$f"; done
	for f in "$SRCROOT"/refs/real/torchtitan_losses/*.txt; do printf 'torchtitan\t%s\n' "$f"; done
	printf 'megatron-log\t%s\n' "$SRCROOT/refs/logs/megatron-dsv4.log"
	printf 'paddle-log\t%s\n' "$SRCROOT/refs/logs/paddle-dsv4.log"
} > samples.tsv

declare -A M
n=0
while IFS=$'\t' read -r want f; do
	rm -f d.db
	"$ALIGN" ingest --db d.db "$f" > o.txt 2> e.txt
	got=$(sed -n 's/^.*: \([a-z-]*\), [0-9]* records into run .*$/\1/p' o.txt | head -n 1)
	[ -n "$got" ] || got="(none)"
	M["$want|$got"]=$(( ${M["$want|$got"]:-0} + 1 ))
	[ "$got" = "$want" ] || fail "$f: detected as $got, expected $want ($(head -c 300 e.txt))"
	n=$((n + 1))
done < samples.tsv

# print the matrix (rows: expected, columns: detected)
{
	printf '%-16s' "expected\\got"
	for g in "${FORMATS[@]}" "(none)"; do printf ' %5.5s' "$g"; done
	printf '\n'
	for w in "${FORMATS[@]}"; do
		printf '%-16s' "$w"
		for g in "${FORMATS[@]}" "(none)"; do printf ' %5s' "${M["$w|$g"]:-0}"; done
		printf '\n'
	done
} | tee matrix.txt
for w in "${FORMATS[@]}"; do
	[ "${M["$w|$w"]:-0}" -ge 1 ] || fail "format $w has no committed sample"
	for g in "${FORMATS[@]}" "(none)"; do
		[ "$w" = "$g" ] || [ "${M["$w|$g"]:-0}" -eq 0 ] || fail "$w detected as $g ${M["$w|$g"]} time(s)"
	done
done
[ "$n" -ge 20 ] || fail "only $n samples"
echo "$n samples"
finish
