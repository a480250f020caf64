#!/usr/bin/env bash
# align-run-compare.sh ALIGN: `align run OP --device cuda` vs `--device cpu` for every op x profile
# (2 steps each), both traces ingested and reported; prints a Markdown table, exits 1 when any pair
# is not all bitwise-equal.
set -uo pipefail
align=${1:?usage: align-run-compare.sh ALIGN}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '\n## align run: --device cuda vs --device cpu\n\n| op | profile | report |\n| --- | --- | --- |\n'
fails=0
for op in $("$align" run --list | grep -v 'block of' | grep -o '^[a-z_0-9]*:' | tr -d :); do
	for profile in deepseek-ref megatron paddle paddle-accuracy; do
		db="$work/$op-$profile.db"
		if ! "$align" run "$op" --device cpu --profile "$profile" --steps 2 --trace "$work/c.atf" >/dev/null 2>"$work/err" ||
			! "$align" run "$op" --device cuda --profile "$profile" --steps 2 --trace "$work/g.atf" >/dev/null 2>"$work/err"; then
			printf '| %s | %s | not run: %s |\n' "$op" "$profile" "$(tail -1 "$work/err")"
			fails=$((fails + 1))
			continue
		fi
		"$align" ingest --quiet --db "$db" --as cpu "$work/c.atf" >/dev/null
		"$align" ingest --quiet --db "$db" --as cuda "$work/g.atf" >/dev/null
		if "$align" report --db "$db" --runs cpu,cuda --format json > "$work/r.json"; then
			v=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print("%d of %d records bitwise-equal" % (t["bitwise_equal"], t["compared"]))' "$work/r.json")
		else
			v=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); f=r["first_diff"] or r["first_only_in"]; print("DIFFER:", f["name"], "step", f["step"], f["verdict"])' "$work/r.json")
			fails=$((fails + 1))
		fi
		printf '| %s | %s | %s |\n' "$op" "$profile" "$v"
	done
done
printf '\n%d op x profile pairs not all bitwise-equal (or not run)\n' "$fails"
[ "$fails" -eq 0 ]
