#!/usr/bin/env bash
# ingest-xtuner: XTuner AccProber JSONL (formats.md section 5): forward records and gradient records,
# step/micro/rank from the file name when the fields are absent (fields win, a disagreement warns),
# execution order kept whatever order the files are given in, tensor_sum/first_10 as stats/head,
# torch dtypes mapped, 0-d tensors as scalars with bits, json.dumps NaN/Infinity, recomputed activations
# as a second occurrence, the global grad_norm kept once across ranks, gzip, a truncated last line, and
# bad input (message, exit 2, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"

D=acc_prober
mkdir $D
# micro-batch 0: each call's [before] records, its submodules' records, then its [after] records; the
# checkpointed q_proj recomputed during backward (a second call, a second occurrence of its names)
cat > $D/Step_1_MicroIter_0_RANK_3_forward_records.jsonl <<'EOF'
{"name": "[embed_tokens][before]input_ids", "tensor_sum": 1864736512.0, "shape": [1, 4096], "dtype": "torch.int64", "step": 1, "micro_batch_iter": 0, "first_10": [151644.0, 8948.0, 198.0, 2610.0, 525.0, 1207.0, 16948.0, 11.0, 3465.0, 553.0]}
{"name": "[embed_tokens][after]hidden_states", "tensor_sum": 12.0625, "shape": [1, 4096, 4096], "dtype": "torch.bfloat16", "step": 1, "micro_batch_iter": 0, "first_10": [0.0012969970703125, -0.0081787109375]}
{"name": "[layers.0.self_attn.q_proj][before]input", "tensor_sum": 50.5, "shape": [1, 4096, 4096], "dtype": "torch.bfloat16", "step": 1, "micro_batch_iter": 0, "first_10": [0.0849609375, -0.5234375]}
{"name": "[layers.0.self_attn.q_proj][after]output", "tensor_sum": -3127.84521484375, "shape": [1, 4096, 4096], "dtype": "torch.bfloat16", "step": 1, "micro_batch_iter": 0, "first_10": [0.0213623046875, -0.1103515625, 0.046875, 0.0, -0.005859375, 0.2734375, -0.0712890625, 0.01171875, 0.130859375, -0.193359375]}
{"name": "[layers.3.dispatch][before]topk_ids", "tensor_sum": 2281736.0, "shape": [4096, 8], "dtype": "torch.int64", "step": 1, "micro_batch_iter": 0, "first_10": [17.0, 92.0, 3.0, 55.0, 120.0, 8.0, 64.0, 31.0, 77.0, 101.0]}
{"name": "[layers.3.dispatch][after]tokens_per_expert", "tensor_sum": 32768.0, "shape": [128], "dtype": "torch.int64", "step": 1, "micro_batch_iter": 0, "first_10": [301.0, 254.0]}
{"name": "[lm_head][before]hidden_states", "tensor_sum": -88.0, "shape": [1, 4096, 4096], "dtype": "torch.bfloat16", "step": 1, "micro_batch_iter": 0, "first_10": [1.5, -0.75]}
{"name": "[lm_head][after]loss", "tensor_sum": 10.86875057220459, "shape": [], "dtype": "torch.float32", "step": 1, "micro_batch_iter": 0, "first_10": [10.86875057220459]}
{"name": "[layers.0.self_attn.q_proj][before]input", "tensor_sum": 50.5, "shape": [1, 4096, 4096], "dtype": "torch.bfloat16", "step": 1, "micro_batch_iter": 0, "first_10": [0.0849609375]}
{"name": "[layers.0.self_attn.q_proj][after]output", "tensor_sum": -3127.84521484375, "shape": [1, 4096, 4096], "dtype": "torch.bfloat16", "step": 1, "micro_batch_iter": 0, "first_10": [0.0213623046875]}
EOF
# micro-batch 1 without step/micro fields (from the name), with json.dumps specials and a bf16 scalar
# recorded by ProberList.record_tensor under a custom name (no [before]/[after]: no call link)
cat > $D/Step_1_MicroIter_1_RANK_3_forward_records.jsonl <<'EOF'
{"name": "[layers.0.mlp][before]x", "tensor_sum": 1.0, "shape": [2, 2], "dtype": "torch.float32", "first_10": [0.25, 0.25, 0.25, 0.25]}
{"name": "[layers.0.mlp][after]output", "tensor_sum": NaN, "shape": [2, 2], "dtype": "torch.float32", "first_10": [Infinity, -Infinity, NaN, 1.5]}
{"name": "router.scale", "tensor_sum": -0.5, "shape": [], "dtype": "torch.bfloat16", "first_10": [-0.5]}
EOF
cat > $D/STEP_1_RANK_3_before_clip_grad_norm.jsonl <<'EOF'
{"name": "layers.0.mlp.gate.weight", "grad_sum": 0.00031280517578125, "grad_mean": 1.862645149230957e-09, "grad_std": 2.1457672119140625e-05, "weight_sum": -12.5, "shape": [128, 2048], "dtype": "torch.float32", "param_info": "Parameter containing:\ntensor([[...]], device='cuda:0', requires_grad=True)"}
EOF
cat > $D/STEP_1_RANK_3_after_clip_grad_norm.jsonl <<'EOF'
{"name": "layers.0.mlp.gate.weight", "grad_sum": 0.0001564025878906, "grad_mean": 9.313225746154785e-10, "grad_std": 1.0728836059570312e-05, "weight_sum": -12.5, "shape": [128, 2048], "dtype": "torch.float32", "param_info": "Parameter containing:\ntensor([[...]], device='cuda:0', requires_grad=True)"}
{"name": "grad_norm", "grad_sum": 2.4172463417053223, "weight_sum": 2.4172463417053223, "shape": [], "dtype": "torch.float32", "param_info": "tensor(2.4172, device='cuda:0')"}
EOF
sed 's/"step": 1/"step": 2/' $D/Step_1_MicroIter_0_RANK_3_forward_records.jsonl | head -n 2 | gzip -c > $D/Step_2_MicroIter_0_RANK_3_forward_records.jsonl.gz
# rank 4's after-clip file: the same global grad_norm (kept once), and a truncated last line
sed 's/"weight_sum": -12.5/"weight_sum": -11.5/' $D/STEP_1_RANK_3_after_clip_grad_norm.jsonl > $D/STEP_1_RANK_4_after_clip_grad_norm.jsonl
printf '{"name": "x", "grad_sum": 1.0' >> $D/STEP_1_RANK_4_after_clip_grad_norm.jsonl

# given in reverse (and sorted-lexically) order on purpose
run_align 0 ingest --db a.db --as xt $D/Step_2_MicroIter_0_RANK_3_forward_records.jsonl.gz \
	$D/STEP_1_RANK_4_after_clip_grad_norm.jsonl $D/STEP_1_RANK_3_after_clip_grad_norm.jsonl \
	$D/STEP_1_RANK_3_before_clip_grad_norm.jsonl $D/Step_1_MicroIter_1_RANK_3_forward_records.jsonl \
	$D/Step_1_MicroIter_0_RANK_3_forward_records.jsonl
expect_err "STEP_1_RANK_4_after_clip_grad_norm.jsonl:3: last line is not terminated"
expect_eq "records" "$(sql a.db "SELECT count(*) FROM record")" "19"
expect_eq "execution order of rank 3" "$(sql a.db "SELECT group_concat(step||':'||micro||':'||occ||':'||name, ' | ') FROM (SELECT * FROM record WHERE rank=3 ORDER BY seq)")" "1:0:0:[embed_tokens][before]input_ids | 1:0:0:[embed_tokens][after]hidden_states | 1:0:0:[layers.0.self_attn.q_proj][before]input | 1:0:0:[layers.0.self_attn.q_proj][after]output | 1:0:0:[layers.3.dispatch][before]topk_ids | 1:0:0:[layers.3.dispatch][after]tokens_per_expert | 1:0:0:[lm_head][before]hidden_states | 1:0:0:[lm_head][after]loss | 1:0:1:[layers.0.self_attn.q_proj][before]input | 1:0:1:[layers.0.self_attn.q_proj][after]output | 1:1:0:[layers.0.mlp][before]x | 1:1:0:[layers.0.mlp][after]output | 1:1:0:router.scale | 1:-1:0:layers.0.mlp.gate.weight.grad | 1:-1:0:layers.0.mlp.gate.weight.grad.clipped | 2:0:0:[embed_tokens][before]input_ids | 2:0:0:[embed_tokens][after]hidden_states"
# the call/io link: [before] -> in, [after] -> out of call MODULE#K (K-th call of the module in the file);
# the recomputed q_proj is its second call; custom names and gradient records have none
expect_eq "call/io links" "$(sql a.db "SELECT group_concat(micro||':'||ifnull(call,'-')||':'||ifnull(io,'-'), ' ') FROM (SELECT * FROM record WHERE rank=3 AND step=1 ORDER BY seq)")" "0:embed_tokens#0:in 0:embed_tokens#0:out 0:layers.0.self_attn.q_proj#0:in 0:layers.0.self_attn.q_proj#0:out 0:layers.3.dispatch#0:in 0:layers.3.dispatch#0:out 0:lm_head#0:in 0:lm_head#0:out 0:layers.0.self_attn.q_proj#1:in 0:layers.0.self_attn.q_proj#1:out 1:layers.0.mlp#0:in 1:layers.0.mlp#0:out 1:-:- -1:-:- -1:-:-"
expect_eq "grad_norm once, global" "$(sql a.db "SELECT rank||':'||step||':'||micro||':'||canon||':'||printf('%x', bits)||':'||text FROM record WHERE name='grad_norm'")" "-1:1:-1:grad_norm:401ab42a:2.4172463417053223"
expect_eq "dtype and shape" "$(sql a.db "SELECT dtype||' '||shape FROM record WHERE name='[layers.0.self_attn.q_proj][after]output' AND occ=0")" "bf16 [1,4096,4096]"
expect_eq "stats and head" "$(sql a.db "SELECT stats||' '||json_extract(head, '\$[9]') FROM record WHERE name='[layers.0.self_attn.q_proj][after]output' AND occ=0")" '{"sum":-3127.84521484375} -0.193359375'
expect_eq "int64 tensor" "$(sql a.db "SELECT dtype||' '||json_extract(stats, '\$.sum')||' '||json_array_length(head) FROM record WHERE name='[layers.3.dispatch][before]topk_ids'")" "int64 2281736.0 10"
expect_eq "fp32 scalar: its sum is its value" "$(sql a.db "SELECT dtype||' '||printf('%x', bits)||' '||text FROM record WHERE name='[lm_head][after]loss'")" "fp32 412de667 10.86875057220459"
expect_eq "bf16 scalar bits" "$(sql a.db "SELECT dtype||' '||printf('%x', bits)||' '||text FROM record WHERE name='router.scale'")" "bf16 bf00 -0.5"
expect_eq "NaN/Infinity" "$(sql a.db "SELECT stats||' '||head FROM record WHERE name='[layers.0.mlp][after]output'")" '{"sum":"nan"} ["inf", "-inf", "nan", 1.5]'
expect_eq "grad stats" "$(sql a.db "SELECT phase||' '||stats||' '||json_extract(extra,'\$.param_info') FROM record WHERE name='layers.0.mlp.gate.weight.grad'")" "grad {\"sum\":0.00031280517578125,\"mean\":1.862645149230957e-09,\"std\":2.1457672119140625e-05,\"weight_sum\":-12.5} Parameter containing:
tensor([[...]], device='cuda:0', requires_grad=True)"
expect_eq "rank 4 kept its own gradient" "$(sql a.db "SELECT rank||' '||json_extract(stats,'\$.weight_sum') FROM record WHERE name LIKE '%clipped' ORDER BY rank")" "3 -12.5
4 -11.5"

# a field that disagrees with the name wins, with a warning; detection by content alone
printf '{"name": "a", "tensor_sum": 1.0, "shape": [1], "dtype": "torch.float32", "step": 5, "micro_batch_iter": 0}\n' > Step_4_MicroIter_0_RANK_0_forward_records.jsonl
run_align 0 ingest --db a.db Step_4_MicroIter_0_RANK_0_forward_records.jsonl
expect_err "Step_4_MicroIter_0_RANK_0_forward_records.jsonl:1: field 'step' is 5 but the file name says 4"
expect_eq "field wins" "$(sql a.db "SELECT step FROM record WHERE name='a'")" "5"
printf '{"name": "b", "tensor_sum": 2.0, "shape": [1], "dtype": "torch.complex64", "step": 1, "micro_batch_iter": 0, "rank": 7}\n' > probe.jsonl
run_align 0 ingest --db a.db probe.jsonl && expect_out "probe.jsonl: xtuner, 1 records"
expect_err "probe.jsonl:1: dtype 'torch.complex64' is not one align knows"

bad() { # bad FILE PATTERN [OPTIONS...]: exit 2, PATTERN on stderr, database unchanged
	local f=$1 pat=$2 before
	shift 2
	before=$(db_count a.db)
	run_align 2 ingest --db a.db --as "bad-$(basename "$f")" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(db_count a.db)" "$before"
}
S=Step_1_MicroIter_0_RANK_0_forward_records.jsonl
mkdir b
printf '{"name": "a", "tensor_sum": 1.0, "shape": [1], "dtype": "torch.float32"}\nnot json\n' > b/$S
bad b/$S "$S:2: not a JSON object"
mkdir c
printf '{"name": "a", "tensor_sum": "1.0", "shape": [1], "dtype": "torch.float32"}\n' > c/$S
bad c/$S "$S:1: field 'tensor_sum': expected a number"
mkdir d
printf '{"name": "a", "tensor_sum": 1.0, "shape": [1, -2], "dtype": "torch.float32"}\n' > d/$S
bad d/$S "$S:1: field 'shape': dimension 1 is not a non-negative integer"
mkdir e
printf '{"name": "a", "tensor_sum": 1.0, "shape": [1], "dtype": "torch.float32", "step": "1"}\n' > e/$S
bad e/$S "$S:1: field 'step': expected an integer"
mkdir f
printf '{"tensor_sum": 1.0, "shape": [1], "dtype": "torch.float32"}\n' > f/$S
bad f/$S "$S:1: missing field 'name'" --format xtuner
printf '{"name": "a", "tensor_sum": 1.0, "shape": [1], "dtype": "torch.float32", "step": 1, "micro_batch_iter": 0}\n' > norank.jsonl
bad norank.jsonl "norank.jsonl:1: no rank: neither a 'rank' field nor RANK_N in the file name"
printf '{"name": "a", "shape": [1], "dtype": "torch.float32", "step": 1, "micro_batch_iter": 0, "rank": 0}\n' > nosum.jsonl
bad nosum.jsonl "nosum.jsonl:1: neither 'tensor_sum'" --format xtuner
printf '[1, 2]\n' > arr.jsonl
bad arr.jsonl "arr.jsonl:1: not a JSON object" --format xtuner
mkdir g
{ printf '{"name": "'; head -c 1100000 /dev/zero | tr '\0' a; printf '"}\n'; } > g/$S
bad g/$S "$S:1: line longer than 1 MiB" --format xtuner
finish
