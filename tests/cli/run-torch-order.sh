#!/usr/bin/env bash
# run-torch-order.sh: ALIGN_RMSNORM_REDUCE=torch (ATen's CUDA row reduction, torch_order.h torch_rowsum) end to
# end through `align run` on the CPU: the ops that model it run it, the others refuse it by design (exit 2,
# the message, nothing written, listed by `align run --list`), shapes outside the model are refused, and its
# bits are what the model says: at 16 rows of 64 values ATen's order is WARP32's (32 lanes, x[l] + x[l+32],
# decreasing shuffles; the H200 agreed, torch-compare 2026-12-03), at 64 rows of 4096 it is neither warp32 nor
# pairwise (the spec fill's special values make most rows' factors equal at small shapes).
source "$SRCROOT/tests/cli/lib.sh"
# tensor bytes of output NAME in a safetensors file (the header's offsets; the metadata may differ)
tbytes() {
	python3 - "$1" "$2" <<'PY'
import json, struct, sys, hashlib
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
lo, hi = h[sys.argv[2]]["data_offsets"]
print(hashlib.sha256(b[8 + n + lo:8 + n + hi]).hexdigest())
PY
}

# --- listed, refused by the ops that do not model it -------------------------------------------------------
run_align 0 run --list
for op in qnorm qnorm_bwd compressor_bwd attn; do
	got=$(awk -v op="$op" '$0 ~ "^"op":" {f=1; next} /^[a-z]/ {f=0} f && /refuses:/ {print $2}' out.txt)
	expect_eq "$op refuses" "$got" "ALIGN_RMSNORM_REDUCE=torch"
done
for op in rmsnorm compressor; do
	got=$(awk -v op="$op" '$0 ~ "^"op":" {f=1; next} /^[a-z]/ {f=0} f && /refuses:/' out.txt)
	expect_eq "$op refuses nothing" "$got" ""
done
run_align 2 run qnorm --mode ALIGN_RMSNORM_REDUCE=torch --outputs q.st &&
	expect_err "qnorm: ALIGN_RMSNORM_REDUCE=torch is not modelled for this op"
[ ! -e q.st ] || fail "a refused run wrote q.st"
run_align 2 run compressor_bwd --mode ALIGN_RMSNORM_REDUCE=torch --outputs c.st &&
	expect_err "compressor_bwd: ALIGN_RMSNORM_REDUCE=torch is modelled for the compressor forward only"
[ ! -e c.st ] || fail "a refused run wrote c.st"
# the compressor takes it for its [T, F] entries (the rows are its groups; its factor differs from pairwise's
# in a last bit on some rows, which the bf16 outputs rarely keep: it calls rmsnorm_rowsum, the rmsnorm op's
# checked order, and compressor-torch-cpu compares the whole forward with PyTorch's)
run_align 0 run compressor --mode ALIGN_RMSNORM_REDUCE=torch --shape T=64 --outputs ct.st
[ -s ct.st ] || fail "compressor under RMSNORM_REDUCE=torch wrote no outputs"

# --- shapes outside the model -------------------------------------------------------------------------------
run_align 2 run rmsnorm --shape T=1,D=131072 --mode ALIGN_RMSNORM_REDUCE=torch --outputs big.st &&
	expect_err "rmsnorm: ALIGN_RMSNORM_REDUCE=torch: rows of 131072 values at 1 rows are not modelled"
[ ! -e big.st ] || fail "a refused run wrote big.st"
run_align 2 run rmsnorm --shape T=16,D=131072 --mode ALIGN_RMSNORM_REDUCE=torch --outputs big.st &&
	expect_err "rows of 131072 values at 16 rows are not modelled \(ATen splits such rows over CTAs"
[ ! -e big.st ] || fail "a refused run wrote big.st"
# the block.y split (8 rows of 8192, 16 of 8200): block.x's tree, then block.y's
run_align 0 run rmsnorm_bwd --shape T=8,D=8192 --mode ALIGN_RMSNORM_REDUCE=torch --outputs wide.st
run_align 0 run rmsnorm --shape T=16,D=8200 --mode ALIGN_RMSNORM_REDUCE=torch --outputs wide2.st
run_align 0 run rmsnorm_bwd --shape T=8,D=8192 --mode ALIGN_RMSNORM_BWD_DW_ORDER=torch --outputs w.st
run_align 0 run rmsnorm --shape T=1,D=9000 --mode ALIGN_RMSNORM_REDUCE=torch --outputs one.st

# --- the bits: warp32's at 16 x 64, neither warp32's nor pairwise's at 64 x 4096 -----------------------------
for r in torch warp32 pairwise; do
	run_align 0 run rmsnorm --shape T=16,D=64 --seed 7 --mode ALIGN_RMSNORM_REDUCE=$r --outputs n64-$r.st
	run_align 0 run rmsnorm --shape T=64,D=4096 --seed 7 --mode ALIGN_RMSNORM_REDUCE=$r --outputs n4096-$r.st
	run_align 0 run rmsnorm_bwd --shape T=16,D=64 --seed 7 --mode ALIGN_RMSNORM_REDUCE=$r --outputs b64-$r.st
done
expect_eq "16x64 torch = warp32 (y)" "$(tbytes n64-torch.st y)" "$(tbytes n64-warp32.st y)"
expect_eq "16x64 torch = warp32 (dx)" "$(tbytes b64-torch.st dx)" "$(tbytes b64-warp32.st dx)"
[ "$(tbytes n4096-torch.st y)" != "$(tbytes n4096-warp32.st y)" ] || fail "64x4096: torch gave warp32's bytes"
[ "$(tbytes n4096-torch.st y)" != "$(tbytes n4096-pairwise.st y)" ] || fail "64x4096: torch gave pairwise's bytes"
# --- the backward's autograd forms: deepseek-ref-cuda sets the mHC ones (H200-checked, 2026-12-03) --------
"$ALIGN" modes --profile deepseek-ref-cuda > prof.txt || fail "align modes --profile deepseek-ref-cuda"
for kv in "ALIGN_MHC_BWD_SINKHORN autograd" "ALIGN_MHC_BWD_DSUM torch" "ALIGN_MHC_BWD_TSUM torch"; do
	set -- $kv
	expect_eq "deepseek-ref-cuda $1" "$(awk -v k="$1" '$1 == k {print $2, $3}' prof.txt)" "$2 profile"
done
for v in unrolled autograd; do
	run_align 0 run mhc_pre_bwd --shape T=64,N=4,D=256 --mode ALIGN_MHC_SUM_ORDER=torch \
		--mode ALIGN_MHC_BWD_SINKHORN=$v --outputs m-$v.st
done
[ "$(tbytes m-unrolled.st dbase)" != "$(tbytes m-autograd.st dbase)" ] ||
	fail "mhc_pre_bwd: the autograd Sinkhorn backward gave unrolled's dbase"
for v in full autograd; do
	run_align 0 run sparse_attn_bwd --profile megatron --mode ALIGN_CSA_SUM_ORDER=torch --mode ALIGN_CSA_BWD_P=fp32 \
		--mode ALIGN_CSA_BWD_DELTA=p --mode ALIGN_CSA_BWD_SOFTMAX=$v --outputs s-$v.st
done
[ "$(tbytes s-full.st dsink)" != "$(tbytes s-autograd.st dsink)" ] ||
	fail "sparse_attn_bwd: autograd gave the hand-written full backward's dsink"
finish
