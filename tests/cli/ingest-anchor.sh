#!/usr/bin/env bash
# ingest-anchor: alignment anchors (formats.md 4.1, 4.2) as the `anchor` format: find-all on glued lines,
# leading blank lines, per-rank clocks, step/micro/kind from --micro-batches and --order (the final_loss
# clock) or from the loss-path lines (each kind counted on its own, so print order does not matter), md5
# verification of printed values, warnings (mid-step, anchors after the last loss, md5 mismatch, truncated
# last line), gzip, per-rank files as one run, and bad input (message, exit 2, database unchanged).
# Every md5 of a value below is md5(float32 little-endian bytes) of that value (checked with md5sum).
. "$SRCROOT/tests/cli/lib.sh"

# rows DB RUN: rank|step|micro|name|bits|digest in execution order per rank
rows() {
	sql "$1" "SELECT r.rank||'|'||r.step||'|'||r.micro||'|'||r.name||'|'||(CASE WHEN r.bits IS NULL THEN '' ELSE printf('%08x', r.bits) END)||'|'||coalesce(r.digest,'') FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$2' ORDER BY r.rank, r.seq"
}
# f32md5 HEX: md5 of the float32 with bit pattern HEX, little-endian (independent of align)
f32md5() { printf "\\x${1:6:2}\\x${1:4:2}\\x${1:2:2}\\x${1:0:2}" | md5sum | cut -c1-32; }
expect_eq "md5sum of 1.0f" "$(f32md5 3f800000)" "429d81ed2795e3c586906c6c335aa136"
expect_eq "md5sum of 10.86875057f" "$(f32md5 412de667)" "36c089f8e14e6d67e0621d7c6dad1be5"

# 1. the spec's examples: every tag, leading blank lines, two ranks glued on one line, an ANSI-coloured
# anchor with another process's log line glued after its md5, and a trainer key that is not an anchor
{
	printf '\nper_token_loss: rank=0 shape=[1, 4096] md5=a4c123b1612dd272d1371c17149d4395\n'
	printf '\nfinal_loss: rank=0 val=10.86875057220458984375 md5=36c089f8e14e6d67e0621d7c6dad1be5\n'
	printf '[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=10.87521934509277343750 mtp1.final_loss_md5=bce45fd92085fa4aaf8d5a0464e1f55f\n'
	printf '[LOSS_PATH_MD5] rank=3 loss_input_logits shape=[1, 4096, 151552] md5=36b3216fdaeeb975729fae923d5a4fd1\n'
	printf '[MD5 Probe] Rank=0 Layer=3 attn_output MD5=2aabfe228f219e9cb0eb53f16947ccf2 shape=[4096, 1, 2048]\n'
	printf '[MD5 Probe PF] Rank=0 freqs_cis MD5=2AABFE228F219E9CB0EB53F16947CCF2 shape=[4096, 64] q_dtype=paddle.bfloat16\n'
	printf 'final_loss: rank=1 val=10.86875057220458984375 md5=36c089f8e14e6d67e0621d7c6dad1be5final_loss: rank=0 val=10.86863899230957031250 md5=2d5fcaa18e8f4399a2dc27f86daa50a9\n'
	printf 'a trainer print final_loss: 1.5, per_token_loss: 2\n'
	printf '\x1b[33mfinal_loss: rank=2 val=1.00000000000000000000 md5=429d81ed2795e3c586906c6c335aa136\x1b[0m[2026-08-20 10:15:44,512] [    INFO] - other\n'
	printf '[MD5 Probe] Rank=1 Layer=0 ffn_output MD5=36b3216fdaeeb975729fae923d5a4fd1 shape=[2]\n'
} > spec.log
run_align 0 ingest --db a.db spec.log && expect_out "spec.log: anchor, 10 records into run 'spec'"
expect_eq "spec records" "$(rows a.db spec)" "0|1|0|per_token_loss||a4c123b1612dd272d1371c17149d4395
0|1|0|final_loss|412de667|36c089f8e14e6d67e0621d7c6dad1be5
0|2|0|loss_path.mtp1.final_loss|412e00e6|bce45fd92085fa4aaf8d5a0464e1f55f
0|2|0|layers.3.attn_output||2aabfe228f219e9cb0eb53f16947ccf2
0|2|0|freqs_cis||2aabfe228f219e9cb0eb53f16947ccf2
0|2|0|final_loss|412de5f2|2d5fcaa18e8f4399a2dc27f86daa50a9
1|1|0|final_loss|412de667|36c089f8e14e6d67e0621d7c6dad1be5
1|2|0|layers.0.ffn_output||36b3216fdaeeb975729fae923d5a4fd1
2|1|0|final_loss|3f800000|429d81ed2795e3c586906c6c335aa136
3|1|0|loss_path.loss_input_logits||36b3216fdaeeb975729fae923d5a4fd1"
expect_eq "canonical names" "$(sql a.db "SELECT group_concat(DISTINCT canon) FROM (SELECT canon FROM record WHERE name LIKE '%final_loss' ORDER BY canon)")" "loss,loss_path.mtp1.final_loss"
expect_eq "text, digits, digest kept together" "$(sql a.db "SELECT text||' '||digits||' '||digest_alg||' '||dtype||' '||phase FROM record WHERE rank=2")" "1.00000000000000000000 21 md5 fp32 loss"
expect_eq "shape normalised" "$(sql a.db "SELECT shape FROM record WHERE name='layers.3.attn_output'")" "[4096,1,2048]"
expect_eq "q_dtype kept" "$(sql a.db "SELECT extra FROM record WHERE name='freqs_cis'")" '{"q_dtype":"paddle.bfloat16"}'
expect_eq "per-rank, no micro/step of their own" "$(sql a.db "SELECT count(DISTINCT rank) FROM record")" "4"
# rank 3 has no final_loss to count by; rank 1 printed a probe after its last loss
expect_err "spec.log:12: rank 3: 1 anchors but no loss anchor"
expect_err "spec.log:12: rank 1: 1 anchors after its last loss anchor, counted into step 2 micro-batch 0"

# 2. --micro-batches 2 --order mtp,main (Megatron's order), two ranks, two steps: final_loss anchors of
# both ranks glued, a layer probe and per_token_loss before each loss (they take the next loss's
# micro-batch, and per_token_loss its kind)
cat > mb.log <<'EOF'
[MD5 Probe] Rank=0 Layer=0 attn_output MD5=25a872da1a891c683390cb2ceb7522e2 shape=[4096, 1, 2048]

per_token_loss: rank=0 shape=[1, 4096] md5=216b88458ddae542f6a4c7a96164b09a
[MD5 Probe] Rank=1 Layer=0 attn_output MD5=dd8d0d01f972a3436c715c78830f6f6b shape=[4096, 1, 2048]

per_token_loss: rank=1 shape=[1, 4096] md5=cd96d78b498ecb6cf01ba440bbebda09

final_loss: rank=0 val=9.94999980926513671875 md5=7bc8cdf7ccbde9f93f80d2d634bbb713final_loss: rank=1 val=9.94900035858154296875 md5=0756dcca061e6b59abed0f7781af2f53

per_token_loss: rank=0 shape=[1, 4096] md5=ecc5eb99f24b7e31ec691c5c498fd648

final_loss: rank=0 val=9.89999961853027343750 md5=5ff4da607b1612f41868b3702daf7741

per_token_loss: rank=1 shape=[1, 4096] md5=45bb7e026adcfc7324b097c39cac7138

final_loss: rank=1 val=9.89900016784667968750 md5=17b8bdc49cf0796e90bc12ba8168757c
[MD5 Probe] Rank=0 Layer=0 attn_output MD5=896fd13568de75d2ccddd985ced9aa6e shape=[4096, 1, 2048]

per_token_loss: rank=0 shape=[1, 4096] md5=58672cc7a735b2b117026252a54ff09f
[MD5 Probe] Rank=1 Layer=0 attn_output MD5=2f21bf1a0e8ec2f2c0b563fbf3c6eab0 shape=[4096, 1, 2048]

per_token_loss: rank=1 shape=[1, 4096] md5=d3a1649171ff98e86972a76ec7159ba6

final_loss: rank=0 val=9.94000053405761718750 md5=4bd297bb12a480e4b0b6196c3ef126a1final_loss: rank=1 val=9.93900012969970703125 md5=5f1bd403c31fd771242d513a30f9d407

per_token_loss: rank=0 shape=[1, 4096] md5=6ca26c86d939ae74dc2e61b4f2c6eeb9

final_loss: rank=0 val=9.89000034332275390625 md5=2689fbe15255d11df974b5dff72680cf

per_token_loss: rank=1 shape=[1, 4096] md5=08ecf5c5dd1b3db468c869a3e2e5f93f

final_loss: rank=1 val=9.88899993896484375000 md5=a4cfa0f92197b72d2802eba7bd14d9d3
[MD5 Probe] Rank=0 Layer=0 attn_output MD5=b3b38fe0d7d9f13602c069e6c54b2415 shape=[4096, 1, 2048]

per_token_loss: rank=0 shape=[1, 4096] md5=73e3aba022aef14f586528ae339e90db
[MD5 Probe] Rank=1 Layer=0 attn_output MD5=bf91977f31917346317cc18b0fe2d8ae shape=[4096, 1, 2048]

per_token_loss: rank=1 shape=[1, 4096] md5=8f68b546ec0d3440df9df151318f8495

final_loss: rank=0 val=9.85000038146972656250 md5=c0775769630607ced686d709a11da981final_loss: rank=1 val=9.84899997711181640625 md5=dc7e9560343dd4d8906fd74d5c321068

per_token_loss: rank=0 shape=[1, 4096] md5=31b331da1c7c6f9d359360082b564d5f

final_loss: rank=0 val=9.80000019073486328125 md5=abfe192274f43ed9324e39ce5108c371

per_token_loss: rank=1 shape=[1, 4096] md5=7d8f95751026da51261a4f07b880d89b

final_loss: rank=1 val=9.79899978637695312500 md5=e1b87105701a210bbd8a7a9e982939c5
[MD5 Probe] Rank=0 Layer=0 attn_output MD5=f77a300e4cb81072237bbc50f2136480 shape=[4096, 1, 2048]

per_token_loss: rank=0 shape=[1, 4096] md5=4b90f0a36aa0df561e40f8344d4bdb44
[MD5 Probe] Rank=1 Layer=0 attn_output MD5=097977397e8b94ae17fbf275aed32e32 shape=[4096, 1, 2048]

per_token_loss: rank=1 shape=[1, 4096] md5=3fc81db179b2d4cebd250216bc5c1838

final_loss: rank=0 val=9.84000015258789062500 md5=9d6d1c01be90d7ed5442ea9784f0cd47final_loss: rank=1 val=9.83899974822998046875 md5=f715a1a1c240fc82ef3f32f989b2d267

per_token_loss: rank=0 shape=[1, 4096] md5=735f7128c5309906712c9a0fc15f6016

final_loss: rank=0 val=9.78999996185302734375 md5=f9b76d924e4618d4995f3db0b3bdc86c

per_token_loss: rank=1 shape=[1, 4096] md5=7136b6521a51930540db341c7d1dc52d

final_loss: rank=1 val=9.78899955749511718750 md5=4148789d7a5b5bc1f91e3629d0620c98
EOF
run_align 0 ingest --db a.db --micro-batches 2 --order mtp,main mb.log && expect_out "40 records into run 'mb'"
expect_eq "step/micro/kind by order" "$(rows a.db mb)" "0|1|0|layers.0.attn_output||25a872da1a891c683390cb2ceb7522e2
0|1|0|mtp1.per_token_loss||216b88458ddae542f6a4c7a96164b09a
0|1|0|mtp1.final_loss|411f3333|7bc8cdf7ccbde9f93f80d2d634bbb713
0|1|0|per_token_loss||ecc5eb99f24b7e31ec691c5c498fd648
0|1|0|final_loss|411e6666|5ff4da607b1612f41868b3702daf7741
0|1|1|layers.0.attn_output||896fd13568de75d2ccddd985ced9aa6e
0|1|1|mtp1.per_token_loss||58672cc7a735b2b117026252a54ff09f
0|1|1|mtp1.final_loss|411f0a3e|4bd297bb12a480e4b0b6196c3ef126a1
0|1|1|per_token_loss||6ca26c86d939ae74dc2e61b4f2c6eeb9
0|1|1|final_loss|411e3d71|2689fbe15255d11df974b5dff72680cf
0|2|0|layers.0.attn_output||b3b38fe0d7d9f13602c069e6c54b2415
0|2|0|mtp1.per_token_loss||73e3aba022aef14f586528ae339e90db
0|2|0|mtp1.final_loss|411d999a|c0775769630607ced686d709a11da981
0|2|0|per_token_loss||31b331da1c7c6f9d359360082b564d5f
0|2|0|final_loss|411ccccd|abfe192274f43ed9324e39ce5108c371
0|2|1|layers.0.attn_output||f77a300e4cb81072237bbc50f2136480
0|2|1|mtp1.per_token_loss||4b90f0a36aa0df561e40f8344d4bdb44
0|2|1|mtp1.final_loss|411d70a4|9d6d1c01be90d7ed5442ea9784f0cd47
0|2|1|per_token_loss||735f7128c5309906712c9a0fc15f6016
0|2|1|final_loss|411ca3d7|f9b76d924e4618d4995f3db0b3bdc86c
1|1|0|layers.0.attn_output||dd8d0d01f972a3436c715c78830f6f6b
1|1|0|mtp1.per_token_loss||cd96d78b498ecb6cf01ba440bbebda09
1|1|0|mtp1.final_loss|411f2f1b|0756dcca061e6b59abed0f7781af2f53
1|1|0|per_token_loss||45bb7e026adcfc7324b097c39cac7138
1|1|0|final_loss|411e624e|17b8bdc49cf0796e90bc12ba8168757c
1|1|1|layers.0.attn_output||2f21bf1a0e8ec2f2c0b563fbf3c6eab0
1|1|1|mtp1.per_token_loss||d3a1649171ff98e86972a76ec7159ba6
1|1|1|mtp1.final_loss|411f0625|5f1bd403c31fd771242d513a30f9d407
1|1|1|per_token_loss||08ecf5c5dd1b3db468c869a3e2e5f93f
1|1|1|final_loss|411e3958|a4cfa0f92197b72d2802eba7bd14d9d3
1|2|0|layers.0.attn_output||bf91977f31917346317cc18b0fe2d8ae
1|2|0|mtp1.per_token_loss||8f68b546ec0d3440df9df151318f8495
1|2|0|mtp1.final_loss|411d9581|dc7e9560343dd4d8906fd74d5c321068
1|2|0|per_token_loss||7d8f95751026da51261a4f07b880d89b
1|2|0|final_loss|411cc8b4|e1b87105701a210bbd8a7a9e982939c5
1|2|1|layers.0.attn_output||097977397e8b94ae17fbf275aed32e32
1|2|1|mtp1.per_token_loss||3fc81db179b2d4cebd250216bc5c1838
1|2|1|mtp1.final_loss|411d6c8b|f715a1a1c240fc82ef3f32f989b2d267
1|2|1|per_token_loss||7136b6521a51930540db341c7d1dc52d
1|2|1|final_loss|411c9fbe|4148789d7a5b5bc1f91e3629d0620c98"
expect_eq "no warnings for whole steps" "$(sql a.db "SELECT coalesce(warnings,'none') FROM source WHERE path LIKE '%mb.log'")" "none"
expect_eq "bits of mtp r0 s2 m1 recovered from {:.20f}" "$(sql a.db "SELECT printf('%08x', r.bits) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='mb' AND r.rank=0 AND r.step=2 AND r.micro=1 AND r.canon='mtp_1_loss'")" "411d70a4"
expect_eq "md5 of that float32" "$(f32md5 411d70a4)" "9d6d1c01be90d7ed5442ea9784f0cd47"
# the same anchors read with the wrong micro-batch count land elsewhere (the options matter)
{ cat mb.log; echo; } > mb1.log
run_align 0 ingest --db a.db --order mtp,main mb1.log
expect_eq "mb=1 puts micro 1 in step 2" "$(sql a.db "SELECT r.step||':'||r.micro FROM record r JOIN run ON run.id=r.run_id WHERE run.name='mb1' AND r.rank=0 AND r.name='final_loss' AND r.text LIKE '9.89000%'")" "2:0"
# a rank that stops mid-step
head -n 20 mb.log > mid.log
run_align 0 ingest --db a.db --micro-batches 2 --order mtp,main mid.log
expect_err "mid.log:20: rank 0 ended mid-step: 2 final_loss anchors are not whole steps of 2 micro-batches x 2 losses"

# 3. loss-path clock (LOG_LOSS_MD5=1 only, no final_loss:): main and mtp ticks counted per kind, so
# the PaddleFleet order (main first, file pa) and the Megatron order (mtp first, file pb) agree
cat > pa.log <<'EOF'
[LOSS_PATH_MD5] rank=0 lm_head_logits shape=[1, 4096, 129280] md5=8ad670f7ab6b7a3737beef3106cf8318
[LOSS_PATH_MD5] rank=0 lossmask md5=4b56ae19de84d237c3a93396aa10c478 valid_tokens=4096.0
[LOSS_PATH_MD5] rank=0 line_wise_loss=9.89999961853027343750
[LOSS_PATH_MD5] rank=0 loss_sum=40550.3984375 final_loss=9.899999618530273
[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=9.94999980926513671875 mtp1.final_loss_md5=7bc8cdf7ccbde9f93f80d2d634bbb713
[LOSS_PATH_MD5] rank=0 lm_head_logits shape=[1, 4096, 129280] md5=ffd591c6d14ef7d8044ae38b8efc72a6
[LOSS_PATH_MD5] rank=0 lossmask md5=0eaab06e094ce896c826a2bb65e27e90 valid_tokens=4096.0
[LOSS_PATH_MD5] rank=0 line_wise_loss=9.89000034332275390625
[LOSS_PATH_MD5] rank=0 loss_sum=40509.44140625 final_loss=9.890000343322754
[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=9.94000053405761718750 mtp1.final_loss_md5=4bd297bb12a480e4b0b6196c3ef126a1
[LOSS_PATH_MD5] rank=0 lm_head_logits shape=[1, 4096, 129280] md5=cbadee34424e9d9d0180299dc7fcbec5
[LOSS_PATH_MD5] rank=0 lossmask md5=38fbf34103709b0876cba88aeb288d5f valid_tokens=4096.0
[LOSS_PATH_MD5] rank=0 line_wise_loss=9.80000019073486328125
[LOSS_PATH_MD5] rank=0 loss_sum=40140.80078125 final_loss=9.800000190734863
[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=9.85000038146972656250 mtp1.final_loss_md5=c0775769630607ced686d709a11da981
[LOSS_PATH_MD5] rank=0 lm_head_logits shape=[1, 4096, 129280] md5=cfd805fef93ffc0093daec4d8f059380
[LOSS_PATH_MD5] rank=0 lossmask md5=3040a77b05e3decab6900a9ead79105c valid_tokens=4096.0
[LOSS_PATH_MD5] rank=0 line_wise_loss=9.78999996185302734375
[LOSS_PATH_MD5] rank=0 loss_sum=40099.83984375 final_loss=9.789999961853027
[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=9.84000015258789062500 mtp1.final_loss_md5=9d6d1c01be90d7ed5442ea9784f0cd47
EOF
cat > pb.log <<'EOF'
[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=9.94999980926513671875 mtp1.final_loss_md5=7bc8cdf7ccbde9f93f80d2d634bbb713
[LOSS_PATH_MD5] rank=0 lm_head_logits shape=[1, 4096, 129280] md5=8ad670f7ab6b7a3737beef3106cf8318
[LOSS_PATH_MD5] rank=0 lossmask md5=4b56ae19de84d237c3a93396aa10c478 valid_tokens=4096.0
[LOSS_PATH_MD5] rank=0 line_wise_loss=9.89999961853027343750
[LOSS_PATH_MD5] rank=0 loss_sum=40550.3984375 final_loss=9.899999618530273
[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=9.94000053405761718750 mtp1.final_loss_md5=4bd297bb12a480e4b0b6196c3ef126a1
[LOSS_PATH_MD5] rank=0 lm_head_logits shape=[1, 4096, 129280] md5=ffd591c6d14ef7d8044ae38b8efc72a6
[LOSS_PATH_MD5] rank=0 lossmask md5=0eaab06e094ce896c826a2bb65e27e90 valid_tokens=4096.0
[LOSS_PATH_MD5] rank=0 line_wise_loss=9.89000034332275390625
[LOSS_PATH_MD5] rank=0 loss_sum=40509.44140625 final_loss=9.890000343322754
[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=9.85000038146972656250 mtp1.final_loss_md5=c0775769630607ced686d709a11da981
[LOSS_PATH_MD5] rank=0 lm_head_logits shape=[1, 4096, 129280] md5=cbadee34424e9d9d0180299dc7fcbec5
[LOSS_PATH_MD5] rank=0 lossmask md5=38fbf34103709b0876cba88aeb288d5f valid_tokens=4096.0
[LOSS_PATH_MD5] rank=0 line_wise_loss=9.80000019073486328125
[LOSS_PATH_MD5] rank=0 loss_sum=40140.80078125 final_loss=9.800000190734863
[MTP_LOSS_PATH_MD5] rank=0 mtp1.final_loss=9.84000015258789062500 mtp1.final_loss_md5=9d6d1c01be90d7ed5442ea9784f0cd47
[LOSS_PATH_MD5] rank=0 lm_head_logits shape=[1, 4096, 129280] md5=cfd805fef93ffc0093daec4d8f059380
[LOSS_PATH_MD5] rank=0 lossmask md5=3040a77b05e3decab6900a9ead79105c valid_tokens=4096.0
[LOSS_PATH_MD5] rank=0 line_wise_loss=9.78999996185302734375
[LOSS_PATH_MD5] rank=0 loss_sum=40099.83984375 final_loss=9.789999961853027
EOF
run_align 0 ingest --db a.db --micro-batches 2 pa.log && expect_out "28 records into run 'pa'"
run_align 0 ingest --db a.db --micro-batches 2 pb.log && expect_out "28 records into run 'pb'"
keyed() { sql a.db "SELECT r.rank||'|'||r.step||'|'||r.micro||'|'||r.name||'|'||(CASE WHEN r.bits IS NULL THEN '' ELSE printf('%08x', r.bits) END)||'|'||coalesce(r.digest,'') FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' ORDER BY r.rank, r.step, r.micro, r.name"; }
expect_eq "print order does not matter" "$(keyed pa)" "$(keyed pb)"
expect_eq "loss-path step 2 micro 1" "$(sql a.db "SELECT group_concat(name||'='||(CASE WHEN bits IS NULL THEN digest ELSE printf('%08x', bits) END), ' ') FROM (SELECT r.name, r.bits, r.digest FROM record r JOIN run ON run.id=r.run_id WHERE run.name='pa' AND r.step=2 AND r.micro=1 ORDER BY r.name)")" "loss_path.final_loss=411ca3d7 loss_path.line_wise_loss=411ca3d7 loss_path.lm_head_logits=cfd805fef93ffc0093daec4d8f059380 loss_path.loss_sum=471ca3d7 loss_path.lossmask=3040a77b05e3decab6900a9ead79105c loss_path.mtp1.final_loss=411d70a4 loss_path.valid_tokens=45800000"

# 4. an md5 that does not belong to its printed value: a warning, and both are kept
printf 'final_loss: rank=0 val=9.89999961853027343750 md5=7bc8cdf7ccbde9f93f80d2d634bbb713\n' > mism.log
run_align 0 ingest --db a.db mism.log && expect_err "mism.log:1: rank 0: md5 7bc8cdf7ccbde9f93f80d2d634bbb713 of 'final_loss' does not match its printed value 9.89999961853027343750"
expect_eq "both kept" "$(rows a.db mism)" "0|1|0|final_loss|411e6666|7bc8cdf7ccbde9f93f80d2d634bbb713"
expect_eq "warning stored" "$(sql a.db "SELECT json_array_length(warnings) FROM source WHERE path LIKE '%mism.log'")" "1"

# 5. per-rank files of one job as one run (--as), gzip detected by content, a truncated last line
sed 's/md5=\([0-9a-f]\{32\}\)final_loss/md5=\1\nfinal_loss/' mb.log > split.log
grep -i 'rank=0' split.log > wl.0
grep -i 'rank=1' split.log | gzip -c > wl.1.gz
printf 'final_loss: rank=1 val=9.0 md5=' >> wl.0
run_align 0 ingest --db b.db --as job --micro-batches 2 --order mtp,main wl.0 wl.1.gz
expect_err "wl.0:[0-9]+: last line is not terminated"
expect_eq "one run, both ranks" "$(sql b.db "SELECT count(*)||' '||count(DISTINCT rank)||' '||(SELECT count(*) FROM run) FROM record")" "40 2 1"
expect_eq "per-rank files = one stream" "$(rows b.db job)" "$(rows a.db mb)"

# 6. detection: an anchor file is found without --format; a Paddle log goes to paddle-log instead
run_align 0 ingest --db c.db pa.log && expect_out "pa.log: anchor"

bad() { # bad FILE PATTERN [OPTIONS...]: exit 2, PATTERN on stderr, database unchanged
	local f=$1 pat=$2 before
	shift 2
	before=$(db_count a.db)
	run_align 2 ingest --db a.db --as "bad-$f" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(db_count a.db)" "$before"
}
printf 'final_loss: rank=0 val=1.0 md5=429d81ed2795e3c586906c6c335aa13\n' > short.log
bad short.log "short.log:1: final_loss anchor: field 'md5': malformed md5 '429d81ed2795e3c586906c6c335aa13' \(not 32 hex digits\)"
printf 'final_loss: rank=0 val=1.0 md5=429d81ed2795e3c586906c6c335aa1366\n' > long.log
bad long.log "long.log:1: final_loss anchor: field 'md5': malformed md5"
printf '[MD5 Probe] Rank=0 Layer=1 x MD5=zz9d81ed2795e3c586906c6c335aa136 shape=[1]\n' > hex.log
bad hex.log "hex.log:1: \[MD5 Probe\] anchor: field 'MD5': malformed md5"
printf 'x\nfinal_loss: rank=zero val=1.0 md5=429d81ed2795e3c586906c6c335aa136\n' > rank.log
bad rank.log "rank.log:2: final_loss anchor: field 'rank': not an integer: 'zero"
printf 'final_loss: rank=0 val=abc md5=429d81ed2795e3c586906c6c335aa136\n' > val.log
bad val.log "val.log:1: final_loss anchor: field 'val': not a number: 'abc"
printf 'per_token_loss: rank=0 shape=[1, x] md5=429d81ed2795e3c586906c6c335aa136\n' > shape.log
bad shape.log "shape.log:1: per_token_loss anchor: field 'shape': not a list of integers"
printf 'final_loss: rank=0 val=1.0\n' > nomd5.log
bad nomd5.log "nomd5.log:1: final_loss anchor without a md5= field"
printf '[LOSS_PATH_MD5] lm_head_logits md5=429d81ed2795e3c586906c6c335aa136\n' > norank.log
bad norank.log "norank.log:1: \[LOSS_PATH_MD5\] anchor without a rank= field" --format anchor
printf 'hello\nworld\n' > garbage.log
bad garbage.log "garbage.log:2: no alignment anchors in this file" --format anchor
bad garbage.log "garbage.log: cannot detect the format"
head -c 3000 /dev/urandom > random.bin
bad random.bin "random.bin" --format anchor
{ printf 'final_loss: rank=0 val=1.0 md5=429d81ed2795e3c586906c6c335aa136\n'; head -c 1100000 /dev/zero | tr '\0' a; printf '\n'; } > huge.log
bad huge.log "huge.log:2: line longer than 1 MiB"
bad mb.log "option '--order': 'mtpx' is not main, mtp or mtpK" --order main,mtpx
finish
