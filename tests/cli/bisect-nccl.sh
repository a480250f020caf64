#!/usr/bin/env bash
# bisect-nccl: `align bisect` over NCCL's own environment (issue 16): on the C twin's model of NCCL's
# Ring order (ALIGN_COLL_IMPL=nccl_model_ring reads NCCL_MAX_NCHANNELS, NCCL_PROTO, ... as NCCL does),
# good and bad differ in four NCCL_* variables of which only the channel count changes the sum order at
# this size: the bisection names exactly NCCL_MAX_NCHANNELS, the rest changes nothing, and each trial's
# trace records the NCCL_* variables it ran under (nccl_env). Then protocol and channels together: two
# culprit sets, each alone flipping bits (LL's smaller chunks make 1 and 4 channels sum alike).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

cmd=("$ALIGN" run allreduce --shape N=4,D=524288 --mode ALIGN_COLL_IMPL=nccl_model_ring)
good=NCCL_MAX_NCHANNELS=1,NCCL_PROTO=Simple,NCCL_ALGO=Ring,NCCL_NTHREADS=256,NCCL_DEBUG=WARN
bad=NCCL_MAX_NCHANNELS=4,NCCL_PROTO=Simple,NCCL_ALGO=Ring,NCCL_NTHREADS=512,NCCL_DEBUG=INFO
run_align 0 bisect --db a.db --good "$good" --bad "$bad" --format json --out r.json -- "${cmd[@]}"
expect_eq "switches" "$(jget r.json "','.join(sorted(s['key'] for s in r['switches']))")" \
	"NCCL_DEBUG,NCCL_MAX_NCHANNELS,NCCL_NTHREADS"
expect_eq "culprit" "$(culprit_of r.json)" "NCCL_MAX_NCHANNELS"
expect_eq "values" "$(jget r.json "' '.join('%(key)s:%(good)s->%(bad)s' % m for m in r['culprits'][0]['switches'])")" \
	"NCCL_MAX_NCHANNELS:1->4"
expect_eq "the rest changes nothing" "$(jget r.json "r['rest']['verdict'] if r['rest'] else 'all culprits'")" "same"
expect_eq "no unusable trial" "$(jget r.json "r['counts']['unusable']")" "0"
# the trials' traces say which NCCL environment they ran under
n=0
for t in .align-bisect/*/t-*/trace.atf; do
	[ -f "$t" ] || continue
	grep -q '"nccl_env"' "$t" || fail "$t records no nccl_env"
	n=$((n + 1))
done
[ "$n" -ge 2 ] || fail "expected at least 2 trial traces, found $n"
# the same bits by hand: 4 channels alone flip them, the other three variables alone do not
digest() { env "$@" "${cmd[@]}" --outputs y.safetensors >/dev/null 2>&1 && cksum <y.safetensors; }
base=$(digest NCCL_MAX_NCHANNELS=1 NCCL_PROTO=Simple)
[ "$(digest NCCL_MAX_NCHANNELS=4 NCCL_PROTO=Simple)" != "$base" ] || fail "4 channels do not change the bits by hand"
[ "$(digest NCCL_MAX_NCHANNELS=1 NCCL_PROTO=Simple NCCL_NTHREADS=512 NCCL_DEBUG=INFO)" = "$base" ] ||
	fail "NCCL_NTHREADS/NCCL_DEBUG change the bits by hand"
# protocol and channels: each alone changes the bits from good, so two culprit sets
bad2=NCCL_MAX_NCHANNELS=4,NCCL_PROTO=LL,NCCL_ALGO=Ring,NCCL_NTHREADS=256,NCCL_DEBUG=WARN
run_align 0 bisect --db b.db --good "$good" --bad "$bad2" --format json --out r2.json -- "${cmd[@]}"
expect_eq "two culprit sets" "$(jget r2.json "';'.join(sorted(','.join(m['key'] for m in c['switches']) for c in r['culprits']))")" \
	"NCCL_MAX_NCHANNELS;NCCL_PROTO"
ok "bisect over NCCL_* switches"
finish
