#!/usr/bin/env bash
# moe-atomic.sh ALIGN: the one non-deterministic order (ALIGN_MOE_COMBINE_BWD_ORDER=atomic, float atomicAdd in
# moe_combine_bwd's CUDA twin; modes.def GPU_NONDET) run twice on the same inputs at a DSv4-like size, and
# once in the portable expert order. Reports whether the two atomic runs' dx bits changed and how many dx
# bytes differ from the fixed order; the other outputs (d_eo, d_w, d_shared: no atomics) must not change.
# Not a determinism assertion (the order is documented as non-deterministic): exit 0 with the report, 1 when
# a run fails or a non-atomic output changes, 77 without a GPU (suite gpu). Also checks that the C twin
# refuses the value (exit 2).
set -uo pipefail
align=${1:?usage: moe-atomic.sh ALIGN}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
shape=T=4096,K=6,D=1024,E=256
"$align" run moe_combine_bwd --shape "$shape" --mode ALIGN_MOE_COMBINE_BWD_ORDER=atomic >/dev/null 2>cpu.err
rc=$?
if [ "$rc" != 2 ] || ! grep -q 'ALIGN_MOE_COMBINE_BWD_ORDER=atomic' cpu.err; then
	echo "FAIL: the C twin should refuse ALIGN_MOE_COMBINE_BWD_ORDER=atomic with exit 2 (got $rc: $(cat cpu.err))"
	exit 1
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: no NVIDIA GPU (nvidia-smi -L fails)"
	exit 77
fi
run() { # ORDER OUT
	"$align" run moe_combine_bwd --device cuda --shape "$shape" --inputs in.st --mode ALIGN_MOE_COMBINE_BWD_ORDER="$1" \
		--outputs "$2" >/dev/null || { echo "FAIL: align run --device cuda ORDER=$1"; exit 1; }
}
"$align" run moe_combine_bwd --shape "$shape" --save-inputs in.st >/dev/null || { echo "FAIL: inputs"; exit 1; }
run atomic a1.st
run atomic a2.st
run expert e.st
python3 - a1.st a2.st e.st <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
a1, a2, e = (load(p) for p in sys.argv[1:4])
bad = [k for k in ("d_eo", "d_w", "d_shared") if a1[k] != a2[k] or a1[k] != e[k]]
diff = lambda x, y: sum(x[i:i + 2] != y[i:i + 2] for i in range(0, len(x), 2))
print("moe_combine_bwd ORDER=atomic, 2 runs: dx bits %s (%d of %d elements differ); vs the expert order: %d differ"
      % ("CHANGED" if a1["dx"] != a2["dx"] else "unchanged", diff(a1["dx"], a2["dx"]), len(a1["dx"]) // 2,
         diff(a1["dx"], e["dx"])))
if bad:
    print("FAIL: outputs without atomics changed: %s" % ", ".join(bad))
    sys.exit(1)
PY
