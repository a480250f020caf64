"""make-dumps.py: real msprobe (mindstudio-probe) dumps of a tiny CPU model, for align's tests.

usage: python make-dumps.py OUT_DIR TASK LEVEL PRECISION [STEPS]
  TASK: statistics | md5 (the statistics task with summary_mode md5: a CRC-32 per tensor)
  LEVEL: L1 (APIs) | mix (APIs and modules) | L0 (modules)
  PRECISION: fp32 | bf16 (the same model and data; bf16 runs the model under CPU autocast to bfloat16,
  so the first API whose inputs are equal and whose output differs is the first linear)
Writes OUT_DIR/step{N}/rank/dump.json (msprobe's layout) and checks, for md5, that msprobe's 8-hex
"md5" of the model input is zlib.crc32 of the tensor's raw bytes (exit 1 otherwise).
"""
import json
import os
import sys
import zlib

import torch

from msprobe.pytorch import PrecisionDebugger


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        x = x * 0.5 + 1.0  # elementwise ops: equal in fp32 and under bf16 autocast
        h = torch.relu(self.fc1(x))
        return self.fc2(h)


def main():
    out, task, level, precision = sys.argv[1:5]
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 8)
    y = torch.randn(2, 4)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        first_linear = torch.nn.functional.linear(x * 0.5 + 1.0, model.fc1.weight, model.fc1.bias)
    cfg = {
        "task": "statistics",
        "dump_path": out,
        "rank": [],
        "step": [],
        "level": level,
        "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                       "summary_mode": "md5" if task == "md5" else "statistics"},
    }
    os.makedirs(out, exist_ok=True)
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    debugger = PrecisionDebugger(config_path=cfg_path)
    for _ in range(steps):
        debugger.start(model)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            pred = model(x)
        loss = torch.nn.functional.mse_loss(pred.float(), y)
        loss.backward()
        debugger.stop()
        # the optimizer's in-place updates (Tensor.add_) stay out of the dump: msprobe computes the CRC of
        # an API's inputs in a thread pool, and an in-place op may change its input before that thread
        # reads it (seen: two fp32 runs whose Tensor.add_ input CRCs differed)
        opt.step()
        opt.zero_grad()
        debugger.step()
    os.remove(cfg_path)
    if task == "md5":
        check_crc(out, "Tensor.__mul__.0.forward", "input_args", x)
        check_crc(out, "Functional.linear.0.forward", "output", first_linear)


def raw_bytes(t):
    """The tensor's bytes as stored (bf16: its 16-bit patterns, not an fp32 copy)."""
    t = t.contiguous()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()


def check_crc(out, key, field, t):
    """msprobe's "md5" is zlib's CRC-32 of the tensor's raw bytes: check it on tensors whose bytes we
    know (the model input x, and the first linear's output recomputed here: bf16 under autocast)."""
    want = "%08x" % zlib.crc32(raw_bytes(t))
    for root, _, files in os.walk(out):
        if "dump.json" not in files or not os.path.basename(os.path.dirname(root)) == "step0":
            continue
        with open(os.path.join(root, "dump.json")) as f:
            got = json.load(f)["data"][key][field][0].get("md5")
        if got != want:
            print(f"{root}: {key} {field} 0: md5 {got}, zlib.crc32 of its {t.dtype} bytes {want}", file=sys.stderr)
            sys.exit(1)
    print(f"{key} {field} 0 ({t.dtype}): msprobe md5 = zlib.crc32 of the raw bytes ({want})")


if __name__ == "__main__":
    main()
