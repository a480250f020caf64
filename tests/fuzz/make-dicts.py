#!/usr/bin/env python3
"""make-dicts.py: write tests/fuzz/dict/<target>.dict, the libFuzzer dictionary of each target (the
tokens of its format). Stdlib only; rerun after editing the lists."""
import os

here = os.path.dirname(os.path.abspath(__file__))


def esc(tok):
    out = ""
    for b in tok.encode("latin-1"):
        c = chr(b)
        out += "\\\\" if c == "\\" else '\\"' if c == '"' else c if 32 <= b < 127 else "\\x%02X" % b
    return out


def w(t, toks):
    with open(os.path.join(here, "dict", t + ".dict"), "w") as f:
        f.write("# libFuzzer dictionary of fuzz-%s (tests/fuzz/make-dicts.py writes it)\n" % t)
        for i, k in enumerate(toks):
            f.write('kw%d="%s"\n' % (i, esc(k)))


atf = ['"align_trace"', '"run"', '"framework"', '"rank"', '"world_size"', '"env"', '"step"', '"micro"', '"seq"', '"name"',
       '"phase"', '"dtype"', '"shape"', '"bits"', '"payload"', '"digest"', '"digest_alg"', '"missing"', '"stats"', '"head"',
       '"text"', '"digits"', '"value"', '"call"', '"io"', '"fwd"', '"bwd"', '"grad"', '"param"', '"optim"', '"loss"',
       '"metric"', '"eval"', '"meta"', '"in"', '"out"', '"fp32"', '"bf16"', '"fp16"', '"fp64"', '"int64"', '"bool"',
       '"xxh3t64"', '"0x412de666"', '"nan"', '"inf"', '"AACAPw=="', '[2]', 'null', 'true', '{"align_trace":1}', ':', ',']
nums = ["E+01", "e-05", "INF", "NAN", "nan", "inf", "-inf", "NaN", "Infinity", "-Infinity", "0.", "1e309", "0x", "."]
os.makedirs(os.path.join(here, "dict"), exist_ok=True)
w("ingest-atf", atf)
w("atf-records", atf)
w("ingest-megatron-log", [" iteration ", "lm loss:", "grad norm:", "learning rate:", "validation loss at iteration",
                          "mtp_1 loss:", "consumed samples:", "loss scale:", "number of skipped iterations:",
                          "number of nan iterations:", "|", "/"] + nums)
w("ingest-megatron-golden", ['"values"', '"start_step"', '"end_step"', '"step_interval"', '"lm loss"', '"num-zeros"',
                             '"iteration-time"', '"mem-allocated-bytes"', '{}', '[]', 'null', '"nan"', ':', ','] + nums)
w("ingest-torchtitan", [" ", "\n", "1 ", "10.8"] + nums)
w("ingest-torchtitan-log", ["step:", "loss:", "grad_norm:", "memory:", "tps:", "tflops:", "mfu:", "GiB", "%",
                            "\x1b[32m", "\x1b[0m", "[rank0]:", "[titan]"] + nums)
w("ingest-anchor", ["final_loss", "per_token_loss", "[LOSS_PATH_MD5]", "[MD5 Probe]", "mtp", "main", "=", ":", "md5"] + nums)
w("ingest-paddle-log", ["global_step:", "loss:", "lr:", "grad_norm:", "global_step", "[INFO]", "[TRAIN]", "step:",
                        "epoch:", "final_loss", "per_token_loss", "{'loss':", "'global_step':", "[LOSS_PATH_MD5]",
                        "[MD5 Probe]", "learning_rate:"] + nums)
w("ingest-paddle-metrics", ['"global_step"', '"loss"', '"lr"', '"grad_norm"', '"rank"', '"step"', '"metrics"', 'NaN',
                            'Infinity', '{}', '[]', 'null'] + nums)
w("ingest-xtuner", ['"name"', '"shape"', '"dtype"', '"sum"', '"mean"', '"std"', '"tensor_sum"', '"weight_sum"',
                    '"grad_sum"', '"grad_mean"', '"grad_std"', '"before_clip_grad_norm"', '"after_clip_grad_norm"',
                    '"forward_records"', '"param_info"', '"micro_batch_iter"', '"step"', '"rank"', '"torch.bfloat16"',
                    '"torch.float32"', '"[layers.0][before]hidden_states"', '"[layers.0][after]hidden_states"',
                    '][before]', '][after]', '"['] + nums)
w("ingest-xtuner-log", ["Iter(train)", "Epoch(train)", "Iter(val)", "lr:", "loss:", "grad_norm:", "eta:", "time:",
                        "data_time:", "memory:", "[1/10]", "  "] + nums)
w("ingest-detect", sorted(set(atf + ["lm loss:", " iteration ", "step:", "loss:", "final_loss", "global_step:",
                                     "Iter(train)", '"values"', '"forward_records"', "[LOSS_PATH_MD5]", "\x1f\x8b"])))
w("reader", ["\n", "\r\n", "\x00", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", "\x1f\x8b"])
w("numtext", nums + ["E-", "e+", "1", "9", "-", "+", "00000000000000000000", "99999999999999999999", "3.4028235e+38",
                     "1e-45"])
w("safetensors", ['"dtype"', '"shape"', '"data_offsets"', '"__metadata__"', '"F32"', '"BF16"', '"F16"', '"F64"', '"I64"',
                  '"I32"', '"U8"', '"BOOL"', '"F8_E4M3"', '[0, 4]', '[]', '{}', '\x08\x00\x00\x00\x00\x00\x00\x00'])
w("map", ["->", "^", "$", "(", ")", "|", "[[:digit:]]", "[^a]", "{1,}", "{2,3}", "*", "+", "?", ".", "\\.", "\\1", "#",
          "\n", "{255}", "{1000}"])
w("bisect-spec", ["=", ",", "@", "profile:", "\n", "#", "ALIGN_", "\x00", "strict", "fast", "CUDA_LAUNCH_BLOCKING"])
w("ingest-msprobe", ['"task"', '"level"', '"framework"', '"dump_data_dir"', '"data"', '"input_args"', '"input_kwargs"',
                     '"output"', '"type"', '"dtype"', '"shape"', '"Max"', '"Min"', '"Mean"', '"Norm"', '"md5"',
                     '"requires_grad"', '"value"', '"data_name"', '"parameters"', '"parameters_grad"', '"statistics"',
                     '"tensor"', '"md5"', '"mix"', '"L0"', '"L1"', '"pytorch"', '"mindspore"', '"torch.Tensor"',
                     '"torch.float32"', '"torch.bfloat16"', '"torch.int64"', '"torch.bool"', '"float"', '"int"',
                     '"bool"', '".forward"', '".backward"', '"Tensor.__mul__.0.forward"',
                     '"Module.fc1.Linear.forward.0"', '"Module.fc1.Linear.parameters_grad.0"',
                     '"Functional.linear.0.forward"', 'null', 'true', 'false', '{}', '[]', ':', ','] + nums)
