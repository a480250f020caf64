#!/usr/bin/env bash
# run-on-gpu.sh: on a machine with an NVIDIA GPU, run every GPU test (meson suite 'gpu') and every GPU
# benchmark of an already built build directory, and write a Markdown report.
#
# Usage (from anywhere): tests/gpu/run-on-gpu.sh [--only REGEX] [BUILD_DIR]   BUILD_DIR defaults to
#   build-gpu, relative to the repository root; --only runs the tests and benchmarks whose names match
#   REGEX (Python re.search), so a long suite can be split over several calls. Report:
#   ${OUT:-.}/gpu-report.md; one log per binary under ${OUT:-.}/gpu-logs/. Exit status: 0 when every
#   test and benchmark passed, 1 otherwise, 2 when nothing could be run (no GPU, no build directory and
#   no way to make one, no GPU tests in it).
#
# The build directory: used as it is when it exists; else unpacked from .gpucarry/build-gpu.tar.gz
# (tests/gpu/pack-build.sh, for GPU machines without the -dev packages: the GPU machine has the runtime
# libraries of sqlite, zlib, jansson, xxhash, OpenSSL 3 but not their headers); else built here with
# meson + nvcc when the headers are there (see "GPU build directory" below). GPU binaries link the CUDA
# runtime statically, so a directory built on a machine without a GPU runs here.
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
only=""
if [ "${1:-}" = "--only" ]; then
	only=${2:?--only needs a regular expression}
	shift 2
fi
build=${1:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
if [ ! -f "$build/meson-info/intro-tests.json" ]; then
	if [ -f "$root/.gpucarry/build-gpu.tar.gz" ] && [ "$build" = "$root/build-gpu" ]; then
		echo "run-on-gpu: unpacking the carried build (.gpucarry/build-gpu.tar.gz)"
		(cd "$root" && rm -rf build-gslim && tar -xzf .gpucarry/build-gpu.tar.gz && rm -rf build-gpu &&
			mv build-gslim build-gpu) || exit 2
	elif command -v nvcc >/dev/null 2>&1 && command -v meson >/dev/null 2>&1 &&
		pkg-config --exists sqlite3 jansson libxxhash zlib 2>/dev/null; then
		echo "run-on-gpu: building $build (meson setup -Dcuda=enabled, then compile)"
		meson setup "$build" "$root" -Dcuda=enabled >"${OUT:-.}/gpu-build.log" 2>&1 &&
			meson compile -C "$build" >>"${OUT:-.}/gpu-build.log" 2>&1 ||
			{ echo "error: the build failed; see ${OUT:-.}/gpu-build.log" >&2; exit 2; }
	fi
fi
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

exec python3 - "$root" "$build" "$out" "$only" <<'PY'
import datetime, json, os, re, socket, subprocess, sys, time

root, build, out, only = sys.argv[1:5]
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
    return [e for e in entries if any(s == "gpu" or s.endswith(":gpu") for s in e.get("suite", []))
            and (not only or re.search(only, e["name"]))]

def run(entry, kind):
    cmd = [remap(c) for c in entry["cmd"]]
    if not os.access(cmd[0], os.X_OK) and os.path.basename(cmd[0]) in ("python3", "python", "bash", "sh"):
        import shutil  # an interpreter recorded at another path on the build machine (pyenv shims, ...)
        cmd[0] = shutil.which(os.path.basename(cmd[0])) or cmd[0]
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
if not tests and not benches:
    what = f"matching /{only}/ " if only else ""
    print(f"error: no tests or benchmarks of suite 'gpu' {what}in {build} (configured with -Dcuda=enabled?)",
          file=sys.stderr)
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
         f"- selection: names matching /{only}/" if only else "- selection: every test and benchmark of suite gpu",
         "", "## Tests (suite gpu)", "", "| test | verdict | exit status | seconds | log |", "|---|---|---|---|---|"]
for r in results:
    lines.append(f"| {r['name']} | {r['verdict']} | {r['rc']} | {r['secs']:.1f} | {r['log']} |")
for r in results:
    if not r["ok"]:
        tail = "\n".join(r["text"].splitlines()[-40:])
        lines += ["", f"### {r['name']}: last lines of the output", "", "```", tail, "```"]
# the CUDA-vs-C driver's per-case lines, summed per op x mode set (verdict, op, variant, dims, modes, fill, seed)
ops = next((r for r in results if r["name"] == "gpu-ops-cuda"), None)
if ops:
    table = {}
    for ln in ops["text"].splitlines():
        f = ln.split()
        if len(f) < 7 or f[0] not in ("PASS", "PASS-GPU", "FAIL", "UNSUPPORTED"):
            continue
        row = table.setdefault((f[1], f[4]), {"PASS": 0, "PASS-GPU": 0, "FAIL": 0, "UNSUPPORTED": 0, "fills": set()})
        row[f[0]] += 1
        row["fills"].add(f[5].rstrip(":"))
    lines += ["", "## CUDA twin vs C twin per op x mode set (gpu-ops-cuda)", "",
              "Each case: every launch configuration, run twice, guard bytes, batch invariance (T vs its first "
              "half). equal = bytes equal to the C twin; GPU-only = modes with no C twin, checked for "
              "determinism and launch/batch invariance against the twin's own first run.", "",
              "| op | modes | cases | equal to C | GPU-only: deterministic + invariant | FAIL | not supported on the GPU |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for (op, modes), r in sorted(table.items()):
        n = r["PASS"] + r["PASS-GPU"] + r["FAIL"] + r["UNSUPPORTED"]
        lines.append(f"| {op} | {modes} | {n} | {r['PASS']} | {r['PASS-GPU']} | {r['FAIL']} | {r['UNSUPPORTED']} |")
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
