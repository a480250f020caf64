#!/usr/bin/env bash
# racecheck-classify: tests/gpu/racecheck-classify.sh (how sanitize.sh tells racecheck reports inside
# cuBLAS's own kernels from align's) on compute-sanitizer logs: a real H200 log of MATMUL_IMPL=cublas_pinned
# (97 errors, 12 displayed: unknown, not library-only), the same hazards all displayed (library-only), a
# race analysis report, a hazard in align's own kernel (a real finding), a clean log, a log without summary.
. "$SRCROOT/tests/cli/lib.sh"
cls=$SRCROOT/tests/gpu/racecheck-classify.sh
fx=$SRCROOT/tests/cli/racecheck-fixtures
check() { # check LOG WANT_RC WANT_PATTERN
	local got rc
	got=$(bash "$cls" "$1")
	rc=$?
	[ "$rc" = "$2" ] || fail "$(basename "$1"): exit $rc, expected $2 ($got)"
	grep -Eq -- "$3" <<<"$got" || fail "$(basename "$1"): '$got' lacks /$3/"
	[ "$rc" = "$2" ] && ok "$(basename "$1"): $got"
}
check "$fx/cublas-pinned-h200-limit12.log" 1 '^undisplayed: 12 of 97 reports displayed'
check "$fx/lib-complete.log" 0 '^library-only 2 nvjet_sm90_tst_152x256_64x4_2x1_v_bz_coopA_TNN$'
check "$fx/lib-race-analysis.log" 0 '^library-only 1 nvjet_sm90_'
check "$fx/align-kernel.log" 1 '^align: .*matmul_portable_kernel'
check "$fx/clean.log" 1 '^no reports$'
printf 'matmul: 1 step on cuda\n' >nosummary.log
check nosummary.log 1 '^no summary'
bash "$cls" missing.log >/dev/null 2>err.txt
[ $? = 2 ] && grep -q 'usage: racecheck-classify.sh LOG' err.txt || fail "a missing log: not exit 2 with the usage"
# sanitize.sh reads the classifier's verdict from this exact first word
grep -q 'racecheck-classify.sh' "$SRCROOT/tests/gpu/sanitize.sh" || fail "sanitize.sh does not call racecheck-classify.sh"
finish
