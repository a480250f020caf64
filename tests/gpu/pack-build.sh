#!/usr/bin/env bash
# pack-build.sh: build build-gpu here (CUDA), slim it (no objects or static libraries, stripped
# binaries) and pack it as .gpucarry/build-gpu.tar.gz for the device tool's carry (64 MiB limit);
# tests/gpu/run-on-gpu.sh (and the device-*.sh scripts) unpack it on the GPU machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[ -d build-gpu ] || meson setup build-gpu -Dcuda=enabled
# meson's nvcc rule records no header dependencies (ninja -t deps shows "#deps 0" for every .cu object),
# so a changed header (modes.def, ops.h, ...) would leave stale CUDA objects behind: build from clean.
ninja -C build-gpu -t clean >/dev/null
ninja -C build-gpu
rm -rf build-gslim && cp -a build-gpu build-gslim
find build-gslim -name '*.p' -type d -prune -exec rm -rf {} +
find build-gslim \( -name '*.a' -o -name '*.o' \) -delete
find build-gslim -type f -perm -u+x -exec sh -c 'file "$1" | grep -q ELF && strip "$1"' _ {} \;
mkdir -p .gpucarry
grep -qx '/.gpucarry/' .git/info/exclude 2>/dev/null || echo '/.gpucarry/' >> .git/info/exclude
tar -czf .gpucarry/build-gpu.tar.gz build-gslim
rm -rf build-gslim
ls -la .gpucarry/build-gpu.tar.gz
