#!/usr/bin/env bash
# run-ranks: `align run OP --ranks N` / `--nccl-id FILE` (harness/run/run-ranks.c) refuses, before any
# process starts or any file is written, what cannot run on ranks: a non-collective op, the CPU models of
# NCCL's order, an N in --shape other than the ranks, parameter variants, both forms at once, a rank
# without RANK/WORLD_SIZE, a rank out of range. In a build without CUDA/NCCL headers the launch itself is
# refused with a message that says so. The GPU runs are tests/gpu/coll-ranks.sh.
. "$SRCROOT/tests/cli/lib.sh"

no_files() { # nothing written in the test directory
	local extra
	extra=$(ls | grep -v -x -e out.txt -e err.txt)
	[ -z "$extra" ] || fail "files were written: $extra"
}

run_align 2 run swiglu --ranks 2 --trace t.atf &&
	expect_err "^error: --ranks/--nccl-id: 'swiglu' is not a collective" && no_files && ok "non-collective refused"
run_align 2 run allreduce --ranks 2 --mode ALIGN_COLL_IMPL=nccl_model_ring --trace t.atf &&
	expect_err "ALIGN_COLL_IMPL=nccl_model_ring: the NCCL model runs on the CPU .*ranks run fixed or nccl" &&
	no_files && ok "model refused on ranks"
run_align 2 run reduce_scatter --ranks 2 --mode ALIGN_COLL_IMPL=nccl_model_tree &&
	expect_err "ALIGN_COLL_IMPL=nccl_model_tree: the NCCL model runs on the CPU" && ok "tree model refused"
run_align 2 run allreduce --ranks 2 --shape N=4,D=8 &&
	expect_err "^error: --shape N=4: N is the number of ranks, 2 here" && ok "N other than the ranks refused"
run_align 2 run allreduce --ranks 2 --variant 1 && expect_err "^error: --variant: the parameter variants" &&
	ok "variant refused"
run_align 2 run allreduce --ranks 2 --nccl-id id.bin && expect_err "give one of them" && no_files &&
	ok "--ranks with --nccl-id refused"
run_align 2 run allreduce --ranks 65 && expect_err "option '--ranks': expected an integer in \[1, 64\]" &&
	ok "--ranks range"
(unset RANK WORLD_SIZE OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
	run_align 2 run allreduce --nccl-id id.bin &&
		expect_err "^error: --nccl-id: WORLD_SIZE \(or OMPI_COMM_WORLD_SIZE\) is not set" && no_files &&
		ok "a rank without WORLD_SIZE refused") || FAILS=$((FAILS + 1))
(export WORLD_SIZE=2 RANK=2
	run_align 2 run allreduce --nccl-id id.bin && expect_err "^error: RANK='2': expected an integer in \[0, 1\]" &&
		ok "rank out of range refused") || FAILS=$((FAILS + 1))
(unset RANK WORLD_SIZE
	export OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=x
	run_align 2 run allreduce --nccl-id id.bin &&
		expect_err "^error: OMPI_COMM_WORLD_RANK='x': expected an integer" && ok "Open MPI's names read") ||
	FAILS=$((FAILS + 1))
# the launch on a build without CUDA/NCCL headers (a CUDA build goes on to start the ranks: the GPU tests)
"$ALIGN" run allreduce --ranks 1 --shape D=8 --trace t.atf >out.txt 2>err.txt
rc=$?
if grep -q "this build has no CUDA and NCCL headers" err.txt; then
	[ $rc = 2 ] && grep -q '^error: --ranks: this build has no CUDA and NCCL headers' err.txt && no_files &&
		ok "no-CUDA build refuses the launch" || fail "no-CUDA refusal: rc $rc, $(cat err.txt)"
else
	ok "CUDA build: the launch ran (rc $rc); tests/gpu/coll-ranks.sh checks it"
fi
# --help documents both forms
run_align 0 run --help && expect_out "--ranks N" && expect_out "--nccl-id FILE" && ok "help"
[ "$FAILS" = 0 ]
