#!/usr/bin/env bash
# align-run-compare.sh ALIGN: `align run OP --device cuda` vs `--device cpu` for every op x portable
# profile (2 steps each), both traces ingested and reported; then, for the GPU-only *-cuda profiles
# (framework-mimic modes, no CPU twin), two `--device cuda` runs against each other (determinism through
# the product path) with the trace header checked ("numerics": "gpu-mimic"). Prints Markdown tables;
# exits 1 when any pair is not all bitwise-equal, 77 when there is no usable GPU (suite gpu). Last, `align
# run model` on both devices under the portable profiles: logs byte-equal and trace records equal.
set -uo pipefail
align=${1:?usage: align-run-compare.sh ALIGN}
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: no NVIDIA GPU (nvidia-smi -L fails)"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# compare OP PROFILE A B TRACE_A TRACE_B: ingest both traces into one database, print the table row,
# return 1 when a record differs or is only in one run
compare() {
	local db="$work/$1-$2.db" v rc=0
	if cmp -s "$5" "$6"; then # byte-identical traces: equal without ingesting them (a shortcut)
		printf '| %s | %s | traces byte-identical (%d records) |\n' "$1" "$2" "$(($(wc -l <"$5") - 1))"
		return 0
	fi
	"$align" ingest --quiet --db "$db" --as "$3" "$5" >/dev/null
	"$align" ingest --quiet --db "$db" --as "$4" "$6" >/dev/null
	if "$align" report --db "$db" --runs "$3,$4" --format json > "$work/r.json"; then
		v=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print("%d of %d records bitwise-equal" % (t["bitwise_equal"], t["compared"]))' "$work/r.json")
	else
		v=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); f=r["first_diff"] or r["first_only_in"]; print("DIFFER:", f["name"], "step", f["step"], f["verdict"])' "$work/r.json")
		rc=1
	fi
	printf '| %s | %s | %s |\n' "$1" "$2" "$v"
	return $rc
}
printf '\n## align run: --device cuda vs --device cpu\n\n| op | profile | report |\n| --- | --- | --- |\n'
fails=0
for op in $("$align" run --list | grep -v 'block of' | grep -o '^[a-z_0-9]*:' | tr -d :); do
	for profile in deepseek-ref megatron paddle paddle-accuracy; do
		if ! "$align" run "$op" --device cpu --profile "$profile" --steps 2 --trace "$work/c.atf" >/dev/null 2>"$work/err" ||
			! "$align" run "$op" --device cuda --profile "$profile" --steps 2 --trace "$work/g.atf" >/dev/null 2>"$work/err"; then
			printf '| %s | %s | not run: %s |\n' "$op" "$profile" "$(tail -1 "$work/err")"
			fails=$((fails + 1))
			continue
		fi
		compare "$op" "$profile" cpu cuda "$work/c.atf" "$work/g.atf" || fails=$((fails + 1))
	done
done
printf '\n## align run --device cuda, GPU-only profiles: run 1 vs run 2\n\n| op | profile | report |\n| --- | --- | --- |\n'
for op in $("$align" run --list | grep -v 'block of' | grep -o '^[a-z_0-9]*:' | tr -d :); do
	for profile in megatron-cuda deepseek-ref-cuda; do
		if ! "$align" run "$op" --device cuda --profile "$profile" --steps 2 --trace "$work/g1.atf" >/dev/null 2>"$work/err" ||
			! "$align" run "$op" --device cuda --profile "$profile" --steps 2 --trace "$work/g2.atf" >/dev/null 2>"$work/err"; then
			printf '| %s | %s | not run: %s |\n' "$op" "$profile" "$(tail -1 "$work/err")"
			fails=$((fails + 1))
			continue
		fi
		if ! python3 -c 'import json,sys; h=json.loads(open(sys.argv[1]).readline()); sys.exit(h["numerics"] != "gpu-mimic" or h.get("implementation") != "cuda-twin")' "$work/g1.atf"; then
			printf '| %s | %s | trace header lacks numerics=gpu-mimic |\n' "$op" "$profile"
			fails=$((fails + 1))
			continue
		fi
		compare "$op" "$profile" run1 run2 "$work/g1.atf" "$work/g2.atf" || fails=$((fails + 1))
	done
done
# the model (align run model: every op on its CUDA twin, host glue): traces and logs equal to the C twin's
printf '\n## align run model: --device cuda vs --device cpu (3 steps)\n\n| op | profile | report |\n| --- | --- | --- |\n'
for profile in deepseek-ref megatron paddle paddle-accuracy; do
	if ! "$align" run model --device cpu --profile "$profile" --steps 3 --trace "$work/c.atf" --log "$work/c.log" 2>"$work/err" ||
		! "$align" run model --device cuda --profile "$profile" --steps 3 --trace "$work/g.atf" --log "$work/g.log" 2>"$work/err"; then
		printf '| model | %s | not run: %s |\n' "$profile" "$(tail -1 "$work/err")"
		fails=$((fails + 1))
		continue
	fi
	if ! cmp -s "$work/c.log" "$work/g.log"; then
		printf '| model | %s | DIFFER: the logs (losses) differ |\n' "$profile"
		fails=$((fails + 1))
		continue
	fi
	# the headers name the device: compare the records
	tail -n +2 "$work/c.atf" > "$work/c.rec" && tail -n +2 "$work/g.atf" > "$work/g.rec"
	compare model "$profile" cpu cuda "$work/c.rec" "$work/g.rec" || {
		fails=$((fails + 1))
		continue
	}
done
printf '\n%d op x profile pairs not all bitwise-equal (or not run)\n' "$fails"
[ "$fails" -eq 0 ]
