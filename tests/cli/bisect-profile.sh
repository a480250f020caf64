#!/usr/bin/env bash
# bisect-profile: ENV_SPEC profile:NAME expands to every numeric mode of the registry at the profile's
# value, so the switches of megatron vs paddle are exactly the modes 'align modes --diff' lists; the
# fixture changes the loss only under paddle's SWIGLU_SCALE and RMSNORM_EPS together.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

cmd=("$TRACE" --culprit ALIGN_SWIGLU_SCALE=bf16,ALIGN_RMSNORM_EPS=1e-5)
run_align 0 bisect --db a.db --good profile:megatron --bad profile:paddle --format json --out r.json -- "${cmd[@]}"
expect_eq "culprit" "$(culprit_of r.json)" "ALIGN_RMSNORM_EPS,ALIGN_SWIGLU_SCALE"
expect_eq "values" "$(jget r.json "' '.join('%(key)s:%(good)s->%(bad)s' % m for m in r['culprits'][0]['switches'])")" \
	"ALIGN_RMSNORM_EPS:1e-6->1e-5 ALIGN_SWIGLU_SCALE:fp32->bf16"
run_align 0 modes --diff megatron paddle
want=$(awk '/^ALIGN_/ {print $1}' out.txt | sort | paste -sd,)
[ -n "$want" ] || fail "'align modes --diff megatron paddle' listed no switch"
expect_eq "switches are the modes that differ" "$(jget r.json "','.join(s['key'] for s in r['switches'])")" "$want"
# a later spec wins per key: paddle's RMSNORM_EPS given to the good side removes that switch
run_align 0 bisect --db a.db --good profile:megatron --good ALIGN_RMSNORM_EPS=1e-5 --bad profile:paddle --format json \
	--out r2.json -- "${cmd[@]}"
expect_eq "culprit with the eps on both sides" "$(culprit_of r2.json)" "ALIGN_SWIGLU_SCALE"
expect_eq "one switch fewer" "$(jget r2.json "len(r['switches'])")" "$(($(jget r.json "len(r['switches'])") - 1))"
finish
