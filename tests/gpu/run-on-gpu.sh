#!/usr/bin/env bash
# run-on-gpu.sh: the one entry point on a machine with an NVIDIA GPU: run every GPU test (meson suite
# 'gpu') and every GPU benchmark of a built build directory, and write a Markdown report.
#
# Usage (from anywhere): tests/gpu/run-on-gpu.sh [--only REGEX] [--budget SECONDS] [--split-ops]
#                        [--ops-args ARGS] [BUILD_DIR]
#   BUILD_DIR       defaults to build-gpu, relative to the repository root.
#   --only REGEX    run the tests and benchmarks whose names match REGEX (Python re.search), e.g.
#                   '^gpu-(ops|matmul)$', so a long suite can be split over several calls. Tests also in
#                   suite gpu-long (gpu-sanitize) run only when --only is given.
#   --budget S      stop starting tests after S seconds (the rest are reported NOT RUN) and cap each
#                   test's timeout at the time left, so that one device call (10 minutes) ends with a
#                   report; the report is rewritten after every test, so a call killed from outside
#                   keeps the verdicts so far.
#   --split-ops     run the CUDA-vs-C driver (gpu-ops-cuda) as one process per op, all in parallel, each
#                   with its own log (gpu-logs/ops-cuda/OP.log) and the test's timeout (capped by the
#                   budget): an op that runs out of time keeps the others' results.
#   --ops-args A    extra arguments of test-gpu-ops-cuda (e.g. "--quick", "--variant 3").
#   --ops REGEX     with --split-ops: only the ops whose names match REGEX (Python re.search), e.g.
#                   '_bwd$|^mtp' (the others are not run and the report says so).
#   --op-parts N    with --split-ops: each op as N processes (test-gpu-ops-cuda --part I/N: mode sets I
#                   mod N), for ops whose mode sets take longer than one call serially (compressor, attn).
# Report: ${OUT:-.}/gpu-report.md; one log per binary under ${OUT:-.}/gpu-logs/. Exit status: 0 when
# every selected test and benchmark passed, 1 otherwise, 2 when nothing could be run (no GPU, no build
# directory and no way to make one, no GPU tests in it).
# Examples (device tool; $OUT comes back):
#   tests/gpu/run-on-gpu.sh --budget 560 --split-ops                 everything, one call
#   tests/gpu/run-on-gpu.sh --budget 560 --only '^gpu-ops-cuda$' --split-ops --ops-args --quick
#   tests/gpu/run-on-gpu.sh --budget 300 --only '^gpu-(ops|matmul|matmul-lt|digest)$'   the benchmarks
#
# The build directory: .gpucarry/build-gpu.tar.gz (tests/gpu/pack-build.sh, for GPU machines without
# the -dev packages: the GPU machine has the runtime libraries of sqlite, zlib, jansson, xxhash, OpenSSL 3
# but not their headers) is unpacked into build-gpu when build-gpu is missing or older than the archive
# (a machine that keeps build outputs between calls gets the newest carry); else an existing build
# directory is used as it is; else it is built here with meson + nvcc when the headers are there (see
# "GPU build directory" below). GPU binaries link the CUDA runtime statically, so a directory built on a
# machine without a GPU runs here. cuBLAS: the binaries carry a runpath to the toolkit's lib64;
# /usr/local/cuda/lib64 and, failing that, the nvidia-cublas wheel of a torch install are added to
# LD_LIBRARY_PATH, and the nvidia-nccl wheel's lib (libnccl.so.2, opened by align run --ranks).
#
# The tests and benchmarks are read from the build directory's meson introspection files
# (meson-info/intro-tests.json, intro-benchmarks.json), filtered on the suite 'gpu', so tests added to
# tests/gpu/meson.build are picked up without editing this script. They are run by this script rather
# than by `meson test --no-rebuild` because meson refuses a build directory configured by another
# meson version and the recorded absolute paths change when the directory is carried: the paths are
# mapped from the recorded build and source directories to the actual ones. Tests run one at a time.
# Verdicts: exit 0 PASS; 77 SKIP, which counts as a failure here (a GPU machine must not skip);
# anything else FAIL; over the test's timeout TIMEOUT; not started for want of budget NOT RUN.
#
# GPU build directory (on a machine with nvcc and the -dev packages; no GPU needed):
#   meson setup build-gpu -Dcuda=enabled && meson compile -C build-gpu
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
only="" budget=0 split=0 ops_args="" ops_re="" parts=1
while [ $# -gt 0 ]; do
	case $1 in
	--only) only=${2:?--only needs a regular expression}; shift 2 ;;
	--budget) budget=${2:?--budget needs seconds}; shift 2 ;;
	--split-ops) split=1; shift ;;
	--ops-args) ops_args=${2?--ops-args needs arguments}; shift 2 ;;
	--ops) ops_re=${2:?--ops needs a regular expression}; shift 2 ;;
	--op-parts) parts=${2:?--op-parts needs a count}; shift 2 ;;
	-*) echo "error: unknown option '$1'" >&2; exit 2 ;;
	*) break ;;
	esac
done
build=${1:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
carry=$root/.gpucarry/build-gpu.tar.gz
if [ -f "$carry" ] && [ "$build" = "$root/build-gpu" ] &&
	{ [ ! -f "$build/.carried" ] || [ "$carry" -nt "$build/.carried" ]; }; then
	echo "run-on-gpu: unpacking the carried build (.gpucarry/build-gpu.tar.gz)"
	(cd "$root" && rm -rf build-gslim build-gpu && tar -xzf .gpucarry/build-gpu.tar.gz &&
		mv build-gslim build-gpu && touch build-gpu/.carried) || exit 2
elif [ ! -f "$build/meson-info/intro-tests.json" ] && command -v nvcc >/dev/null 2>&1 &&
	command -v meson >/dev/null 2>&1 && pkg-config --exists sqlite3 jansson libxxhash zlib 2>/dev/null; then
	echo "run-on-gpu: building $build (meson setup -Dcuda=enabled, then compile)"
	meson setup "$build" "$root" -Dcuda=enabled >"${OUT:-.}/gpu-build.log" 2>&1 &&
		meson compile -C "$build" >>"${OUT:-.}/gpu-build.log" 2>&1 ||
		{ echo "error: the build failed; see ${OUT:-.}/gpu-build.log" >&2; exit 2; }
fi
tl=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
# libnccl.so.2 for align run --ranks and bench-coll (opened with dlopen): the nvidia-nccl wheel of a torch
# install when there is one, else the toolkit's lib (align itself also tries /usr/local/cuda/lib and lib64)
nl=$(python3 -c 'import os, nvidia.nccl as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${tl:+:$tl}${nl:+:$nl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
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

exec python3 - "$root" "$build" "$out" "$only" "$budget" "$split" "$ops_args" "$ops_re" "$parts" <<'PY'
import concurrent.futures, datetime, json, os, re, shlex, socket, subprocess, sys, time

root, build, out, only = sys.argv[1:5]
budget, split, ops_args = float(sys.argv[5]), sys.argv[6] == "1", shlex.split(sys.argv[7])
ops_re, parts = sys.argv[8], max(1, int(sys.argv[9]))
start = time.monotonic()
logs = os.path.join(out, "gpu-logs")

def read_json(name):
    with open(os.path.join(build, "meson-info", name)) as f:
        return json.load(f)

info = read_json("meson-info.json")
old_build = info["directories"]["build"]
old_source = info["directories"]["source"]

def remap(s):
    """Recorded paths -> the actual build and source directories. Meson names a source file from a build
    directory outside the tree as BUILD/../../SRC/file (or ../../SRC/file): normalised first."""
    n = s
    if "/" in s and not s.startswith("/"):
        n = os.path.join(old_build, s)
    if n.startswith("/"):
        n = os.path.normpath(n)
        if n == old_build or n.startswith(old_build + "/"):
            return build + n[len(old_build):]
        if n == old_source or n.startswith(old_source + "/"):
            return root + n[len(old_source):]
    return s

def gpu_entries(name):
    try:
        entries = read_json(name)
    except FileNotFoundError:
        return []
    def in_suite(e, name):
        return any(s == name or s.endswith(":" + name) for s in e.get("suite", []))
    # suite gpu-long (gpu-sanitize: an hour of compute-sanitizer) runs only when --only names it
    return [e for e in entries if in_suite(e, "gpu") and (not only or re.search(only, e["name"]))
            and (only or not in_suite(e, "gpu-long"))]

def time_left(timeout):
    """The timeout of the next run, capped by what is left of --budget (None: no time left)."""
    if budget <= 0:
        return timeout
    left = budget - (time.monotonic() - start)
    return None if left < 5 else min(timeout, int(left))

def execute(cmd, cwd, env, timeout):
    """(output, exit status or None, verdict) of one process."""
    if not os.access(cmd[0], os.X_OK):
        return f"not built: {cmd[0]}\n", None, "FAIL (not built)"
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        verdict = {0: "PASS", 77: "SKIP (counts as a failure on a GPU machine)"}.get(p.returncode, "FAIL")
        return p.stdout.decode("utf-8", "replace"), p.returncode, verdict
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode("utf-8", "replace") + f"\n[timed out after {timeout} s]\n"
        return text, None, f"TIMEOUT ({timeout} s)"

def op_names():
    """The ops of the registry, from `align run --list` (lines "name: ..."; block lines skipped)."""
    align = os.path.join(build, "harness", "align")
    listing = subprocess.run([align, "run", "--list"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return [m.group(1) for ln in listing.stdout.decode().splitlines() if "block of" not in ln
            for m in [re.match(r"^([a-z_0-9]+):", ln)] if m and (not ops_re or re.search(ops_re, m.group(1)))]

def execute_split(cmd, cwd, env, timeout):
    """--split-ops: one process per op in parallel; outputs joined in op order."""
    os.makedirs(os.path.join(logs, "ops-cuda"), exist_ok=True)
    ops = op_names()
    if not ops:
        return "error: `align run --list` named no op\n", None, "FAIL (no ops)"
    jobs = [(op, i) for op in ops for i in range(parts)]
    part = lambda i: ["--part", f"{i}/{parts}"] if parts > 1 else []
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        runs = list(pool.map(lambda j: execute(cmd + ["--op", j[0]] + part(j[1]), cwd, env, timeout), jobs))
    text, worst = "", "PASS"
    for (op, i), (t, rc, verdict) in zip(jobs, runs):
        name = f"{op}.part{i}" if parts > 1 else op
        with open(os.path.join(logs, "ops-cuda", f"{name}.log"), "w") as f:
            f.write(t)
        text += f"== --op {op}{' --part %d/%d' % (i, parts) if parts > 1 else ''}: {verdict} (exit status {rc})\n{t}"
        if verdict != "PASS" and worst == "PASS":
            worst = verdict
    return text, (0 if worst == "PASS" else None), worst

def run(entry, kind):
    cmd = [remap(c) for c in entry["cmd"]]
    if not os.access(cmd[0], os.X_OK) and os.path.basename(cmd[0]) in ("python3", "python", "bash", "sh"):
        import shutil  # an interpreter recorded at another path on the build machine (pyenv shims, ...)
        cmd[0] = shutil.which(os.path.basename(cmd[0])) or cmd[0]
    is_ops = entry["name"] == "gpu-ops-cuda"
    if is_ops:
        cmd += ops_args
    env = dict(os.environ)
    env.update({k: remap(v) for k, v in (entry.get("env") or {}).items()})
    cwd = remap(entry["workdir"]) if entry.get("workdir") else build
    timeout = time_left(entry.get("timeout") or 600)
    log = os.path.join(logs, f"{kind}-{entry['name']}.log")
    t0 = time.monotonic()
    if timeout is None:
        text, rc, verdict = "not started: the --budget was spent\n", None, "NOT RUN (budget)"
    elif is_ops and split:
        text, rc, verdict = execute_split(cmd, cwd, env, timeout)
    else:
        text, rc, verdict = execute(cmd, cwd, env, timeout)
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

def report(results, bresults, pending):
    """Write gpu-report.md for the runs so far; returns (passed, failed)."""
    lines = ["# GPU report", "",
             f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}",
             f"- host: {socket.gethostname()}",
             "- device (nvidia-smi: index, name, driver, memory): " + "; ".join(device.splitlines()),
             f"- commit: {commit()}",
             f"- build directory: {build} (configured by meson {info['meson_version']['full']} at {old_build})",
             f"- selection: names matching /{only}/" if only else "- selection: every test and benchmark of suite gpu",
             f"- options: budget {budget:.0f} s, split ops {'yes' if split else 'no'}, ops args {ops_args or 'none'}"
             + (f", ops matching '{ops_re}' only" if ops_re else "") + (f", {parts} parts per op" if parts > 1 else ""),
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
    todo = len(tests) + len(benches) - len(results) - len(bresults)
    lines += ["", f"{passed} passed, {failed} failed" + (f" (in progress: {todo} still to run)" if pending else "")]
    with open(os.path.join(out, "gpu-report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return passed, failed

results, bresults = [], []
for t in tests:
    results.append(run(t, "test"))
    report(results, bresults, True)
for b in benches:
    bresults.append(run(b, "benchmark"))
    report(results, bresults, True)
passed, failed = report(results, bresults, False)
print(f"{passed} passed, {failed} failed; report: {os.path.join(out, 'gpu-report.md')}")
sys.exit(1 if failed else 0)
PY
