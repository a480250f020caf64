#!/usr/bin/env bash
# device-session.sh: everything one GPU-machine session runs, in one call (device time is scarce):
#   1. unpack the build directory carried as .gpucarry/build-gpu.tar.gz (built here with
#      `meson setup build-gpu -Dcuda=enabled`, slimmed and packed by tests/gpu/pack-build.sh);
#   2. tests/gpu/run-on-gpu.sh: every GPU test and benchmark of the build, report gpu-report.md;
#   3. `align run OP --device cuda` and `--device cpu` for every op under every profile, both traces
#      ingested and reported: the CUDA twins must be bitwise-equal to the C twins (align-run.md).
# Writes under $OUT (at most 8 files come back): gpu-report.md, align-run.md, session.log.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
exec > >(tee "$out/session.log") 2>&1
if [ -f .gpucarry/build-gpu.tar.gz ]; then
	rm -rf build-gslim build-gpu && tar -xzf .gpucarry/build-gpu.tar.gz && mv build-gslim build-gpu || exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
OUT=$out bash tests/gpu/run-on-gpu.sh build-gpu
gpu_rc=$?
rm -rf "$out/gpu-logs-keep"; mkdir -p "$out/tmp-logs"
align=build-gpu/harness/align
work=$(mktemp -d)
md="$out/align-run.md"
printf '# align run: CUDA twin vs C twin, every op x profile\n\n%s, %s\n\n| op | profile | cpu | cuda | report |\n| --- | --- | --- | --- | --- |\n' \
	"$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" "$(date -u +%FT%TZ)" > "$md"
fails=0
for op in $("$align" run --list | grep -v 'block of' | grep -o '^[a-z_0-9]*:' | tr -d :); do
	for profile in deepseek-ref megatron paddle paddle-accuracy; do
		db="$work/$op-$profile.db"
		c=$("$align" run "$op" --device cpu --profile "$profile" --steps 2 --trace "$work/c.atf" 2>&1 >/dev/null && echo ok || echo fail)
		g=$("$align" run "$op" --device cuda --profile "$profile" --steps 2 --trace "$work/g.atf" 2>&1 >/dev/null && echo ok || echo fail)
		verdict="not run"
		if [ "$c" = ok ] && [ "$g" = ok ]; then
			"$align" ingest --quiet --db "$db" --as cpu "$work/c.atf" >/dev/null
			"$align" ingest --quiet --db "$db" --as cuda "$work/g.atf" >/dev/null
			if "$align" report --db "$db" --runs cpu,cuda --format json > "$work/r.json"; then
				verdict="all $(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print(t["bitwise_equal"], "of", t["compared"])' "$work/r.json") bitwise-equal"
			else
				verdict="DIFFER: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); f=r["first_diff"] or r["first_only_in"]; print(f["name"], "step", f["step"], f["verdict"])' "$work/r.json")"
				fails=$((fails + 1))
			fi
		else
			[ "$g" = ok ] || verdict="cuda run failed: $("$align" run "$op" --device cuda --profile "$profile" 2>&1 | tail -1)"
			fails=$((fails + 1))
		fi
		printf '| %s | %s | %s | %s | %s |\n' "$op" "$profile" "$c" "$g" "$verdict" >> "$md"
	done
done
printf '\n%d op x profile pairs not bitwise-equal or not run\n' "$fails" >> "$md"
cat "$md"
rm -rf "$out/tmp-logs" "$work"
[ "$gpu_rc" -eq 0 ] && [ "$fails" -eq 0 ]
