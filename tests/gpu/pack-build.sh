#!/usr/bin/env bash
# pack-build.sh: build build-gpu here (CUDA), slim it (no objects or static libraries, stripped
# binaries) and pack it as .gpucarry/build-gpu.tar.gz for the device tool's carry (64 MiB limit);
# tests/gpu/run-on-gpu.sh unpacks it on the GPU machine (when it is newer than the build there).
# Usage: tests/gpu/pack-build.sh [--drop REGEX] [BUILD_DIR]   (default build-gpu in the repository root, made
#        when missing). --drop: leave out the binaries whose path matches REGEX (grep -E): every GPU binary
#        links all the kernels (about 26 MB, 7 MB packed), so a call that runs a few of them carries those only,
#        e.g. --drop 'swiglu-table|bench-gpu-(ops|coll|matmul)|matmul-impl'
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
drop=""
if [ "${1:-}" = --drop ]; then
	drop=${2:?--drop needs a regular expression}
	shift 2
fi
bdir=${1:-build-gpu}
[ -d "$bdir" ] || meson setup "$bdir" -Dcuda=enabled
# incremental: every .cu object records its headers (kernels/meson.build compiles them with nvcc -MD)
ninja -C "$bdir"
rm -rf build-gslim && cp -a "$bdir" build-gslim
find build-gslim -name '*.p' -type d -prune -exec rm -rf {} +
find build-gslim \( -name '*.a' -o -name '*.o' \) -delete
# CPU-only tests (the fuzz replay drivers, unit tests): not run on the GPU machine
rm -rf build-gslim/tests/fuzz build-gslim/tests/unit
[ -z "$drop" ] || find build-gslim -type f | grep -E -- "$drop" | xargs -r rm -f
find build-gslim -type f -perm -u+x -exec sh -c 'file "$1" | grep -q ELF && strip "$1"' _ {} \;
mkdir -p .gpucarry
exclude=$(git rev-parse --git-path info/exclude) # .git is a file in a worktree
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpucarry/' "$exclude" 2>/dev/null || echo '/.gpucarry/' >>"$exclude"
tar -cf - build-gslim | gzip -9 > .gpucarry/build-gpu.tar.gz
rm -rf build-gslim
ls -la .gpucarry/build-gpu.tar.gz
