"""compressor_torch_cpu.py ALIGN: the compressor reference of tests/gpu/torch-compare.py (torch_compressor, DS-ref's
Compressor.forward as PyTorch eager ops) run by PyTorch on the CPU against `ALIGN run compressor` on the CPU,
profile deepseek-ref with CSA_QAT=off, on the same inputs (compressor_inputs): with CSA_COMP_SUM_ORDER=torch and
RMSNORM_REDUCE=torch every element must be equal (at these shapes PyTorch's CPU softmax, sum and mean take the
orders align models for its CUDA kernels), which checks the reference's window layout, norm and RoPE positions
before the GPU verdict uses it; the portable orders are printed for contrast, not judged.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

import torch

align = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("torch_compare", os.path.join(here, "..", "gpu", "torch-compare.py"))
tc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tc)
torch.set_num_threads(1)
work = tempfile.mkdtemp()
fails = 0
for (K, N) in ((4, 2), (128, 1)):
    inp = tc.compressor_inputs(tc.CP_T, K, N, tc.CP_D, tc.CP_F)
    ins, outs = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    tc.st_write(ins, inp)
    with torch.no_grad():
        ref = tc.from_torch(torch, tc.torch_compressor(torch, inp, "cpu", K, N)["c"])
    for judged, modes in ((True, ["ALIGN_CSA_COMP_SUM_ORDER=torch", "ALIGN_RMSNORM_REDUCE=torch"]), (False, [])):
        cmd = [align, "run", "compressor", "--profile", "deepseek-ref", "--inputs", ins, "--outputs", outs,
               "--shape", "T=%d,K=%d,N=%d,D=%d,F=%d" % (tc.CP_T, K, N, tc.CP_D, tc.CP_F), "--mode", "ALIGN_CSA_QAT=off"]
        for m in modes:
            cmd += ["--mode", m]
        pr = subprocess.run(cmd, capture_output=True, text=True)
        if pr.returncode:
            print("FAIL: %s: exit %d: %s" % (" ".join(cmd), pr.returncode, pr.stderr.strip()))
            fails += 1
            continue
        got = tc.st_read(outs)["c"]
        n, nd, ulp, first = tc.compare("BF16", got[2], ref[2])
        what = "K=%d N=%d %s" % (K, N, " ".join(modes) or "portable orders")
        if judged and nd:
            print("FAIL: %s: %d of %d elements differ from PyTorch CPU (max %s ulp, first at %s)" % (what, nd, n, ulp, first))
            fails += 1
        print("%s: %d of %d elements differ from PyTorch CPU%s" % (what, nd, n, "" if judged else " (not judged)"))
print("%d failures" % fails)
sys.exit(1 if fails else 0)
