#!/usr/bin/env bash
# run-on-gpu.sh: on a machine with an NVIDIA GPU, run every GPU test (meson suite 'gpu') and every GPU
# benchmark of an already built build directory, and write a Markdown report.
#
# Usage (from anywhere): tests/gpu/run-on-gpu.sh [BUILD_DIR]     BUILD_DIR defaults to build-gpu,
#   relative to the repository root. Report: ${OUT:-.}/gpu-report.md; one log per binary under
#   ${OUT:-.}/gpu-logs/. Exit status: 0 when every test and benchmark passed, 1 otherwise, 2 when
#   nothing could be run (no GPU, no build directory, no GPU tests in it).
#
# Nothing is rebuilt: the GPU machine has the runtime libraries (sqlite, zlib, jansson, xxhash,
# OpenSSL 3) but not their headers, so the build directory is made elsewhere and carried over (GPU
# binaries link the CUDA runtime statically). How to make it: see "GPU build directory" below.
#
# The tests and benchmarks are read from the build directory's meson introspection files
# (meson-info/intro-tests.json, intro-benchmarks.json), filtered on the suite 'gpu', so tests added to
# tests/gpu/meson.build are picked up without editing this script. They are run by this script rather
# than by `meson test --no-rebuild` because meson refuses a build directory configured by another
# meson version and the recorded absolute paths change when the directory is carried: the paths are
# mapped from the recorded build and source directories to the actual ones. Tests run one at a time.
# Verdicts: exit 0 PASS; 77 SKIP, which counts as a failure here (a GPU machine must not skip);
# anything else FAIL; over the test's timeout TIMEOUT.
#
# GPU build directory (on a machine with nvcc and the -dev packages; no GPU needed):
#   meson setup build-gpu -Dcuda=enabled && meson compile -C build-gpu
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
out=${OUT:-.}
mkdir -p "$out/gpu-logs" || exit 2
out=$(cd "$out" && pwd)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "error: no NVIDIA GPU here (nvidia-smi missing or failing)" >&2
	printf '# GPU report\n\nerror: no NVIDIA GPU on %s (nvidia-smi missing or failing); nothing was run.\n' \
		"$(hostname)" >"$out/gpu-report.md"
	exit 2
fi
if [ ! -f "$build/meson-info/intro-tests.json" ]; then
	echo "error: '$build' is not a configured meson build directory (no meson-info/intro-tests.json)" >&2
	exit 2
fi
command -v python3 >/dev/null 2>&1 || { echo "error: python3 is needed to read the meson introspection files" >&2; exit 2; }

exec python3 - "$root" "$build" "$out" <<'PY'
import datetime, json, os, socket, subprocess, sys, time

root, build, out = sys.argv[1:4]
logs = os.path.join(out, "gpu-logs")

def read_json(name):
    with open(os.path.join(build, "meson-info", name)) as f:
        return json.load(f)

info = read_json("meson-info.json")
old_build = info["directories"]["build"]
old_source = info["directories"]["source"]

def remap(s):
    """Recorded absolute paths -> the actual build and source directories."""
    if s.startswith(old_build):
        return build + s[len(old_build):]
    if s.startswith(old_source):
        return root + s[len(old_source):]
    return s

def gpu_entries(name):
    try:
        entries = read_json(name)
    except FileNotFoundError:
        return []
    return [e for e in entries if any(s == "gpu" or s.endswith(":gpu") for s in e.get("suite", []))]

def run(entry, kind):
    cmd = [remap(c) for c in entry["cmd"]]
    env = dict(os.environ)
    env.update({k: remap(v) for k, v in (entry.get("env") or {}).items()})
    cwd = remap(entry["workdir"]) if entry.get("workdir") else build
    timeout = entry.get("timeout") or 600
    log = os.path.join(logs, f"{kind}-{entry['name']}.log")
    t0 = time.monotonic()
    if not os.access(cmd[0], os.X_OK):
        text, rc, verdict = f"not built: {cmd[0]}\n", None, "FAIL (not built)"
    else:
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout)
            text, rc = p.stdout.decode("utf-8", "replace"), p.returncode
            verdict = {0: "PASS", 77: "SKIP (counts as a failure on a GPU machine)"}.get(rc, "FAIL")
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b"").decode("utf-8", "replace") + f"\n[timed out after {timeout} s]\n"
            rc, verdict = None, f"TIMEOUT ({timeout} s)"
    secs = time.monotonic() - t0
    with open(log, "w") as f:
        f.write(text)
    print(f"{kind} {entry['name']}: {verdict} ({secs:.1f} s)", flush=True)
    return {"name": entry["name"], "verdict": verdict, "rc": rc, "secs": secs, "text": text,
            "ok": verdict == "PASS", "log": os.path.relpath(log, out)}

def sh(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True,
                              cwd=root).stdout.decode().strip()
    except (OSError, subprocess.CalledProcessError):
        return ""

def commit():
    head = sh(["git", "rev-parse", "HEAD"])
    if head:
        dirty = sh(["git", "status", "--porcelain", "--untracked-files=no"])
        return head + (" (with uncommitted changes)" if dirty else "")
    built = os.path.join(build, "tests", "gpu", "gpu-build-commit.h")
    if os.path.exists(built):
        for line in open(built):
            if "ALIGN_GPU_BUILD_COMMIT" in line and '"' in line:
                return line.split('"')[1] + " (recorded when the build directory was built; git named no commit here)"
    return "unknown (no git and no recorded commit)"

tests, benches = gpu_entries("intro-tests.json"), gpu_entries("intro-benchmarks.json")
if not tests:
    print(f"error: no tests of suite 'gpu' in {build} (configured with -Dcuda=enabled?)", file=sys.stderr)
    sys.exit(2)

device = sh(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total", "--format=csv,noheader"])
results = [run(t, "test") for t in tests]
bresults = [run(b, "benchmark") for b in benches]

lines = ["# GPU report", "",
         f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}",
         f"- host: {socket.gethostname()}",
         "- device (nvidia-smi: index, name, driver, memory): " + "; ".join(device.splitlines()),
         f"- commit: {commit()}",
         f"- build directory: {build} (configured by meson {info['meson_version']['full']} at {old_build})",
         "", "## Tests (suite gpu)", "", "| test | verdict | exit status | seconds | log |", "|---|---|---|---|---|"]
for r in results:
    lines.append(f"| {r['name']} | {r['verdict']} | {r['rc']} | {r['secs']:.1f} | {r['log']} |")
for r in results:
    if not r["ok"]:
        tail = "\n".join(r["text"].splitlines()[-40:])
        lines += ["", f"### {r['name']}: last lines of the output", "", "```", tail, "```"]
lines += ["", "## Benchmarks (suite gpu)", ""]
if not bresults:
    lines.append("(none)")
for r in bresults:
    lines += [f"### {r['name']}: {r['verdict']} (exit status {r['rc']}, {r['secs']:.1f} s)", "", r["text"].rstrip(), ""]
passed = sum(r["ok"] for r in results + bresults)
failed = len(results) + len(bresults) - passed
lines += ["", f"{passed} passed, {failed} failed"]
with open(os.path.join(out, "gpu-report.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{passed} passed, {failed} failed; report: {os.path.join(out, 'gpu-report.md')}")
sys.exit(1 if failed else 0)
PY
