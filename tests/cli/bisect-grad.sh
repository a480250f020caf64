#!/usr/bin/env bash
# bisect-grad: 'align bisect' finds the one gradient switch planted between two profiles (issue 18).
# 1. megatron vs paddle on 'align run matmul_bwd': of the switches the profiles set differently, only the
#    weight gradient's token order (ALIGN_WGRAD_ORDER: Megatron's sequence-first [s,b] vs Paddle's
#    batch-first [b,s]) is read by the op, so it is the one culprit, its first difference is the weight
#    gradient 'matmul_bwd.db' (not the data gradient da, which never reduces over tokens), and the other
#    switches change nothing.
# 2. megatron vs paddle on 'align run rmsnorm_bwd', with every rmsnorm_bwd switch but the planted
#    ALIGN_RMSNORM_BWD_FORM (TE's dx formula vs apex's) given megatron's value on the bad side too: the
#    bisection names that gradient switch alone, and the first difference is dx (dw does not read the form).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

run_align 0 bisect --db a.db --good profile:megatron --bad profile:paddle -j 2 --format json --out r.json -- \
	"$ALIGN" run matmul_bwd --steps 2
expect_eq "matmul_bwd culprit" "$(culprit_of r.json)" "ALIGN_WGRAD_ORDER"
expect_eq "matmul_bwd values" \
	"$(jget r.json "' '.join('%(key)s:%(good)s->%(bad)s' % m for m in r['culprits'][0]['switches'])")" \
	"ALIGN_WGRAD_ORDER:sb->bs"
expect_eq "matmul_bwd first diff" "$(jget r.json "r['culprits'][0]['first_diff']['name']")" "matmul_bwd.db"
expect_eq "matmul_bwd rest" "$(jget r.json "r['rest']['verdict'] if r['rest'] else 'all culprits'")" "same"
expect_eq "matmul_bwd unusable" "$(jget r.json "r['counts']['unusable']")" "0"
[ "$(jget r.json "len(r['switches'])")" -gt 1 ] || fail "megatron vs paddle: only one switch differs"

# 2: pin every other rmsnorm_bwd switch that differs to megatron's value on the bad side
run_align 0 run --list
reads=$(awk '/^rmsnorm_bwd:/ {on = 1; next} /^[a-z_]+:/ {on = 0} on && /switches:/ {sub(/.*switches: */, ""); print}' out.txt)
grep -qw ALIGN_RMSNORM_BWD_FORM <<<"$reads" || fail "rmsnorm_bwd does not read ALIGN_RMSNORM_BWD_FORM ($reads)"
run_align 0 modes --diff megatron paddle
pins=()
while read -r key good _; do
	[ "$key" = ALIGN_RMSNORM_BWD_FORM ] && continue
	grep -qw -- "$key" <<<"$reads" && pins+=(--bad "$key=$good")
done < <(grep '^ALIGN_' out.txt)
[ ${#pins[@]} -gt 0 ] || fail "no other rmsnorm_bwd switch differs between megatron and paddle: nothing to pin"
run_align 0 bisect --db a.db --good profile:megatron --bad profile:paddle "${pins[@]}" -j 2 --format json \
	--out r2.json -- "$ALIGN" run rmsnorm_bwd
expect_eq "rmsnorm_bwd culprit" "$(culprit_of r2.json)" "ALIGN_RMSNORM_BWD_FORM"
expect_eq "rmsnorm_bwd first diff" "$(jget r2.json "r['culprits'][0]['first_diff']['name']")" "rmsnorm_bwd.dx"
expect_eq "rmsnorm_bwd rest" "$(jget r2.json "r['rest']['verdict'] if r['rest'] else 'all culprits'")" "same"
finish
