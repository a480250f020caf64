#!/usr/bin/env bash
# golden-kernels: the C twins' output digests for every op x profile x seed x step are pinned in
# refs/golden/kernels.tsv; any change in bits fails here and must be explained (regenerate with
# tools/golden-kernels.sh and say why in the commit).
. "$SRCROOT/tests/cli/lib.sh"
bash "$SRCROOT/tools/golden-kernels.sh" "$ALIGN" > now.tsv || fail "golden-kernels.sh failed"
if ! diff -u "$SRCROOT/refs/golden/kernels.tsv" now.tsv > golden.diff; then
	fail "digests changed ($(grep -c '^+[a-z]' golden.diff) rows):"
	head -40 golden.diff
fi
expect_eq "op x profile x seed x step" "$(grep -v '^#' now.tsv | cut -f1-4 | sort -u | wc -l)" \
	"$(( $(grep -c '^OP(' "$SRCROOT/kernels/core/ops.def") * 4 * 2 * 2 ))"
finish
