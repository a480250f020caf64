#!/usr/bin/env bash
# format.sh: the one formatter (.clang-format at the root, STYLE.md rule 16) over every tracked C, CUDA
# and C++ source (*.c *.h *.cu *.cuh *.cpp). Files listed in $keep keep their own layout.
# Usage: tools/format.sh            format the tree in place
#        tools/format.sh --check    change nothing; list the files that differ and exit 1 if any does
#                                   (.ci/run counts it as one test through tools/test.sh)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
# tests/emu/cuda_runtime_api.h mirrors the declarations of NVIDIA's header, in its order
keep='^tests/emu/cuda_runtime_api\.h$'
command -v clang-format >/dev/null 2>&1 || { echo "error: clang-format is not installed" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' | grep -Ev "$keep")
if [ "${1:-}" = "--check" ]; then
	bad=0
	for f in "${files[@]}"; do
		clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || { echo "format: $f differs from .clang-format"; bad=1; }
	done
	[ $bad = 0 ] && echo "format: ${#files[@]} files agree with .clang-format" ||
		echo "format: run tools/format.sh to fix" >&2
	exit $bad
fi
clang-format -i "${files[@]}"
