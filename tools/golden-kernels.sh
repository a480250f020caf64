#!/usr/bin/env bash
# golden-kernels.sh: print the golden digest table of the C twins: every op x profile x seed x step,
# each output tensor's xxh3t64 digest, from `align run` traces (default dims of each op).
# usage: golden-kernels.sh ALIGN_BINARY > refs/golden/kernels.tsv
set -euo pipefail
align=${1:?usage: golden-kernels.sh ALIGN_BINARY}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '# op\tprofile\tseed\tstep\toutput\tdtype\tshape\tdigest (xxh3t64)\n'
for op in $("$align" run --list | grep -v 'block of' | grep -o '^[a-z_0-9]*:' | tr -d :); do
	for profile in deepseek-ref megatron paddle paddle-accuracy; do
		for seed in 1 2; do
			"$align" run "$op" --profile "$profile" --seed "$seed" --steps 2 --trace "$work/t.atf" >/dev/null
			python3 - "$work/t.atf" "$op" "$profile" "$seed" <<'PY'
import json, sys
path, op, profile, seed = sys.argv[1:]
for line in list(open(path))[1:]:
    r = json.loads(line)
    if r["phase"] == "fwd":
        print("\t".join([op, profile, seed, str(r["step"]), r["name"], r["dtype"],
                         "x".join(map(str, r["shape"])), r["digest"]]))
PY
		done
	done
done
