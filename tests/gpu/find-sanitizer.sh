# find-sanitizer.sh (sourced by sanitize.sh and initcheck-cublas.sh; needs $root): sets cs to the
# compute-sanitizer to run: PATH, the toolkit, else the nvidia-cuda-sanitizer-api wheel carried in .gpucarry/
# (a GPU machine without the toolkit), unpacked on first use; cs stays empty when there is none.
cs=$(command -v compute-sanitizer || true)
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
	[ -n "$cs" ] || { [ -x "$c" ] && cs=$c; }
done
wheel=$(ls "$root"/.gpucarry/nvidia_cuda_sanitizer_api-*.whl 2>/dev/null | tail -1)
if [ -z "$cs" ] && [ -n "$wheel" ]; then
	unpacked=$root/.gpucarry/cuda-sanitizer
	[ -d "$unpacked" ] || python3 -m zipfile -e "$wheel" "$unpacked" || return 2
	cs=$(find "$unpacked" -name compute-sanitizer -type f | head -1)
	[ -z "$cs" ] || chmod +x "$cs" "$(dirname "$cs")"/* 2>/dev/null
fi
