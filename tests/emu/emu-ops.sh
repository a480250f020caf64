#!/usr/bin/env bash
# emu-ops.sh OP...: the CUDA twins of OP... compiled through the host emulator (run-emu.sh) and checked
# against their C twins by test-ops-cuda (--quick: the first launch configurations, every fill, every mode
# set). It runs the twins' code paths and NaN model (nan_host.h, forced on) without a GPU, so CI catches what
# it caught by hand on 2026-11-28: mhc_pre_bwd / mhc_head_bwd NaN signs that gcc's operand commutation in the
# C twin had changed, and sparse_attn_bwd's launch written outside ALIGN_CUDA_LAUNCH. It does not check the
# GPU's own arithmetic (tests/gpu does). An argument OP+DEP+DEP checks OP and also compiles the twins it
# calls (router_bwd+router: the backward runs the forward's twin; allreduce+coll: the twin is in coll.cu); a twin called but not compiled in fails
# the op ("not built into the emulator"). Leading arguments that start with -- go to test-ops-cuda for every
# op (--part I/N, --variant K: a sample of an op too long to run whole, like attn_bwd: 1800 quick cases at
# about 7 s each in the emulator). Exit 1 when an op fails, 2 when the build fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
extra=()
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do
	case "$1" in
	--part | --variant) [ $# -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }; extra+=("$1" "$2"); shift 2 ;;
	*) echo "error: unknown option $1 (emu-ops.sh [--part I/N] [--variant K] OP...)" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: emu-ops.sh [--part I/N] [--variant K] OP..." >&2; exit 2; }
command -v g++ >/dev/null 2>&1 || { echo "skip: no g++"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
twins="" ops=()
for arg in "$@"; do
	ops+=("${arg%%+*}")
	for t in ${arg//+/ }; do
		# an op whose twin lives in another file (allreduce+coll: kernels/ops/coll.cu) names that file after it
		[ "$t" = "${arg%%+*}" ] && [ "$t" != "$arg" ] && [ ! -f "$root/kernels/ops/$t.cu" ] && continue
		[ -f "$root/kernels/ops/$t.cu" ] || { echo "error: no CUDA twin kernels/ops/$t.cu" >&2; exit 2; }
		case " $twins " in *" $t.cu "*) ;; *) twins="$twins $t.cu" ;; esac
	done
done
set -- "${ops[@]}"
# the build (run-emu.sh runs the binary last: given --op of the first op)
EMU_TWINS=$twins bash "$root/tests/emu/run-emu.sh" "$out" -- --op "$1" --quick "${extra[@]}" >"$out/first.log" 2>&1
rc=$?
[ -x "$out/test-ops-cuda-emu" ] || { cat "$out/first.log"; echo "error: the emulator build failed" >&2; exit 2; }
fails=0
for op in "$@"; do
	if [ "$op" = "$1" ]; then
		log="$out/first.log" r=$rc
	else
		log="$out/$op.log"
		t0=$SECONDS
		"$out/test-ops-cuda-emu" --op "$op" --quick "${extra[@]}" >"$log" 2>&1
		r=$?
		echo "($op: $((SECONDS - t0)) s)"
	fi
	summary=$(grep '^ops-cuda' "$log" | tail -1)
	if grep -q 'not built into the emulator' "$log"; then
		echo "FAIL $op: it calls a twin not compiled in (add it as $op+NAME):"
		grep 'not built into the emulator' "$log" | sort -u | head -3
		fails=$((fails + 1))
	elif [ "$r" -ne 0 ]; then
		echo "FAIL $op (exit $r): $summary"
		grep '^FAIL' "$log" | head -5
		fails=$((fails + 1))
	else
		echo "ok $op: $summary"
	fi
done
[ "$fails" -eq 0 ] || exit 1
