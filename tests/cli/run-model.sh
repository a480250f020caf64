#!/usr/bin/env bash
# run-model: 'align run model' (issue 15 item 2): the tiny DSv4 composed of the ops' C twins.
# - under --profile megatron it prints Megatron-LM's log and under --profile paddle PaddleFleet's trainer
#   log (round(x, 8) loss, md5 anchors of the float32 losses), and 'align ingest' reads both back with the
#   md5s matching the printed values; --log-format overrides the pairing; same seed = same bytes;
# - for profiles that differ in one switch (megatron vs megatron + that switch), 'align bisect' names
#   exactly that switch, and 'align report' on the two traces puts the first divergent record in the
#   block of an op that reads the switch (per 'align run --list'), at the expected place in the model;
# - bad options exit 2 with one message and write nothing.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

# the logs
run_align 0 run model --profile megatron --steps 4 --trace m.atf && cp out.txt megatron.log
expect_eq "megatron log lines" "$(grep -c '| lm loss: [0-9.]*E+00 | mtp_1 loss: [0-9.]*E+00 |' megatron.log)" "4"
run_align 0 run model --profile paddle --steps 4 && cp out.txt paddle.log
expect_eq "paddle log lines" "$(grep -cE 'loss: [0-9]+\.[0-9]{1,8}, .*loss_md5: [0-9a-f]{32}, mtp_1_loss: [0-9.]+, mtp_1_loss_md5: [0-9a-f]{32}$' paddle.log)" "4"
# the paddle prints are Python's: loss = repr(round(f32, 8)), mtp_1_loss = repr(float(f32)) of a float32
python3 - paddle.log <<'PY' || fail "paddle log values are not Python's prints of float32 losses"
import re, struct, sys
for line in open(sys.argv[1]):
    loss, mtp = re.search(r"- loss: ([^,]+),", line).group(1), re.search(r"mtp_1_loss: ([^,]+),", line).group(1)
    f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
    m = float(mtp)
    assert f32(m) == m and repr(m) == mtp, mtp
    assert repr(round(float(loss), 8)) == loss, loss
PY
run_align 0 run model --profile megatron --steps 4 && cmp -s out.txt megatron.log || fail "two runs of the same model print different logs"
run_align 0 run model --profile megatron --steps 4 --log-format paddle
grep -q "mtp_1_loss_md5" out.txt || fail "--log-format paddle under the megatron profile does not print the paddle log"
run_align 0 ingest --db logs.db megatron.log paddle.log
grep -q "does not match" err.txt && fail "ingest: an md5 of the paddle log does not match its printed value: $ERR_TXT"
expect_eq "megatron losses ingested" "$(sql logs.db "SELECT count(*) FROM record r JOIN run u ON u.id = r.run_id WHERE u.name = 'megatron' AND r.canon IN ('loss', 'mtp_1_loss')")" "8"
expect_eq "paddle losses with their bits (md5)" "$(sql logs.db "SELECT count(*) FROM record r JOIN run u ON u.id = r.run_id WHERE u.name = 'paddle' AND r.canon IN ('loss', 'mtp_1_loss') AND r.digest_alg = 'md5'")" "8"
run_align 1 report --db logs.db --first-diff
expect_out "first difference: (loss|mtp_1_loss) at step 1"
# megatron prints the float32 losses of the paddle profile's run with 6 digits: the same numbers
paddle_as_megatron=$("$ALIGN" run model --profile paddle --steps 4 --log-format megatron 2>/dev/null | sed 's/.*lm loss: \([^ ]*\) .*/\1/')
paddle_printed=$(sed 's/.*- loss: \([^,]*\),.*/\1/' paddle.log | python3 -c "import sys; print('\n'.join('%E' % float(x) for x in sys.stdin.read().split()))")
expect_eq "paddle loss round(x, 8) = the megatron print of the same float32" "$paddle_printed" "$paddle_as_megatron"

# one switch between two profiles: bisect and the per-block report
run_align 0 run --list
for c in "ALIGN_SWIGLU_SCALE=bf16 swiglu layer0.ffn.swiglu.a" \
	"ALIGN_XENT_MEAN=token xent head.xent.mean" \
	"ALIGN_RMSNORM_EPS=1e-5 rmsnorm layer0.attn.rmsnorm.y" \
	"ALIGN_MOE_COMBINE_ACC=fp32 moe_combine layer0.ffn.moe_combine.y" \
	"ALIGN_MTP_SHIFT=roll_pos model mtp1.layer.attn.rope.y"; do
	read -r kv opname want <<<"$c"
	key=${kv%%=*}
	"$ALIGN" run --list | awk -v op="$opname" '$1 == op":" {on = 1; next} /^[a-z_]+:/ {on = 0} on && /switches:/' | grep -qw -- "$key" ||
		fail "$key is not a switch of $opname per 'align run --list'"
	rm -rf b.db r.json t.db
	run_align 0 bisect --db b.db --good profile:megatron --bad profile:megatron --bad "$kv" --format json --out r.json -- "$ALIGN" run model --steps 2
	expect_eq "$kv: bisect names exactly that switch" "$(culprit_of r.json)" "$key"
	"$ALIGN" run model --profile megatron --steps 2 --trace good.atf >/dev/null 2>&1 || fail "good run"
	env "$kv" "$ALIGN" run model --profile megatron --steps 2 --trace bad.atf >/dev/null 2>&1 || fail "bad run"
	run_align 0 ingest --db t.db --as good good.atf
	run_align 0 ingest --db t.db --as bad bad.atf
	run_align 1 report --db t.db --first-diff --format json --out rep.json
	expect_eq "$kv: first divergent block" "$(jget rep.json "r['first_diff']['name']")" "$want"
	expect_eq "$kv: at step 1" "$(jget rep.json "r['first_diff']['step']")" "1"
done

# bad options: exit 2, one message, nothing written
run_align 2 run model --log-format tensorboard --trace x.atf
expect_err "option '--log-format': expected megatron or paddle, got 'tensorboard'"
[ -e x.atf ] && fail "a refused run wrote its trace"
run_align 2 run model --shape T=4
expect_err "model: --inputs, --outputs, --shape and --variant do not apply"
run_align 2 run swiglu --log-format paddle
expect_err "options '--log' and '--log-format' apply to 'align run model' only"
run_align 0 run model --profile paddle --steps 4 --log p2.log
cmp -s p2.log paddle.log || fail "--log F holds another text than stdout"
[ -s out.txt ] && fail "--log F: the log also went to stdout"
run_align 2 run model --log nodir/x.log
expect_err "--log 'nodir/x.log': cannot write"
run_align 2 run model --device gpu
expect_err "--device 'gpu': not a device \(cpu or cuda\)"
if ! grep -q 'ALIGN_HAVE_CUDA 1' "$(dirname "$ALIGN")/../align-config.h" 2>/dev/null; then
	run_align 2 run model --device cuda --trace c.atf
	expect_err "--device 'cuda': this build has no CUDA"
	[ -e c.atf ] && fail "a refused cuda run wrote its trace"
fi
finish
