#!/usr/bin/env bash
# run-mimic: the framework-mimic modes on the CPU side. GPU-only values (modes.def GPU_ONLY: MATH_IMPL=cuda,
# the *-cuda profiles, ...) are refused by the C twins with exit 2, a message naming the switch, and no
# trace or outputs written; the portable torch orders (ROUTER_TOPK_ORDER/ROUTER_SUM/MHC_SUM_ORDER=torch)
# run on the CPU and change bits; traces record numerics, gpu_only and the params variant; --variant
# reaches the router's sigmoid/group parameters and refuses unknown variants. The GPU side (bitwise
# against PyTorch, determinism) runs in tests/gpu (torch-compare.py, align-run-compare.sh).
. "$SRCROOT/tests/cli/lib.sh"

for spec in "--profile megatron-cuda" "--profile deepseek-ref-cuda" "--mode ALIGN_MATH_IMPL=cuda" \
	"--mode ALIGN_MATH_IMPL=cuda_fast"; do
	# shellcheck disable=SC2086
	run_align 2 run swiglu $spec --shape T=4,F=16 --trace g.atf --outputs g.st &&
		expect_err "ALIGN_MATH_IMPL=cuda(_fast)? exists only in the CUDA twins \(use --device cuda"
	[ -e g.atf ] || [ -e g.st ] && fail "$spec: a refused run left a trace or outputs"
done
ALIGN_MATH_IMPL=cuda run_align 2 run router --shape T=4,D=32 && expect_err "ALIGN_MATH_IMPL=cuda exists only"
run_align 2 run rmsnorm --mode ALIGN_RMSNORM_RSQRT=cuda --shape T=2,D=16 && expect_err "ALIGN_RMSNORM_RSQRT=cuda"
run_align 2 run matmul --mode ALIGN_MATMUL_IMPL=tc --shape T=2,D=16,F=8 && expect_err "ALIGN_MATMUL_IMPL=tc"
# a GPU-only value of a switch the op does not read is no obstacle (swiglu reads no matmul switch)
run_align 0 run swiglu --mode ALIGN_MATMUL_IMPL=cublas --shape T=2,F=8 --trace s.atf
python3 - s.atf <<'PY' || fail "trace header of a CPU run with an unread GPU-only switch"
import json, sys
h = json.loads(open(sys.argv[1]).readline())
assert h["numerics"] == "gpu-mimic" and h["gpu_only"] == {"ALIGN_MATMUL_IMPL": "cublas"}, h
PY

# the torch orders are portable: they run on the CPU, are recorded, and change the routing bits
run_align 0 run router --shape T=64,D=64,E=16,K=4 --seed 3 --outputs a.st --trace a.atf
run_align 0 run router --shape T=64,D=64,E=16,K=4 --seed 3 --outputs b.st --trace b.atf \
	--mode ALIGN_ROUTER_TOPK_ORDER=torch --mode ALIGN_ROUTER_SUM=torch
python3 - a.atf b.atf <<'PY' || fail "trace headers of portable runs"
import json, sys
a, b = (json.loads(open(p).readline()) for p in sys.argv[1:3])
assert a["numerics"] == b["numerics"] == "portable" and a["gpu_only"] == b["gpu_only"] == {}, (a, b)
assert b["modes"]["ROUTER_TOPK_ORDER"] == "torch" and b["modes"]["ROUTER_SUM"] == "torch", b["modes"]
assert a["variant"] == b["variant"] == 0
PY
cmp -s a.st b.st && fail "ROUTER_TOPK_ORDER/ROUTER_SUM=torch left the router's outputs unchanged"
run_align 0 run mhc_pre --shape T=8,N=4,D=64 --outputs c.st
run_align 0 run mhc_pre --shape T=8,N=4,D=64 --outputs d.st --mode ALIGN_MHC_SUM_ORDER=torch
cmp -s c.st d.st && fail "MHC_SUM_ORDER=torch left the Sinkhorn outputs unchanged"

# --variant: the router's V3.2 parameters (sigmoid, groups) are reachable; unknown variants refused
run_align 0 run router --variant 1 --shape T=8,D=64 --trace v.atf --outputs v1.st
python3 -c 'import json,sys; h=json.loads(open("v.atf").readline()); sys.exit(h["variant"] != 1)' ||
	fail "variant not recorded"
run_align 0 run router --shape T=8,D=64 --outputs v0.st
cmp -s v0.st v1.st && fail "--variant 1 gave the default parameters' outputs"
run_align 2 run router --variant 4 --shape T=8,D=64 && expect_err "--variant 4: op 'router' has no such parameter variant"
run_align 2 run router --variant x && expect_err "variant"

# align modes marks the GPU-only values and resolves the *-cuda profiles on top of their base
run_align 0 modes --format md && expect_out "portable\|libm\|cuda\*\|cuda_fast\*"
run_align 0 modes --diff megatron megatron-cuda && expect_out "^14 switches differ between 'megatron' and 'megatron-cuda'"
run_align 0 modes --diff megatron megatron-cuda && expect_out "ALIGN_MATH_IMPL +portable +cuda"
finish
