#!/usr/bin/env bash
# run-provenance: every trace `align run` writes carries its provenance in the header: align_commit (the
# source tree's git describe at build time, "unknown" outside git) and the device ("cpu" here; with
# --device cuda the GPU's name plus driver_version, cuda_runtime_version and the cuBLAS versions of a
# vendor GEMM, which a CPU run must not claim). Ingest keeps these header fields unchanged.
. "$SRCROOT/tests/cli/lib.sh"

check_header() { # check_header TRACE: align_commit and device "cpu", no GPU versions
	python3 - "$1" <<'PY'
import json, sys
h = json.loads(open(sys.argv[1]).readline())
assert isinstance(h.get("align_commit"), str) and h["align_commit"], h
assert h["device"] == "cpu", h
gpu = {"driver_version", "cuda_runtime_version", "cublas_version", "cublaslt_version"} & set(h)
assert not gpu, "a CPU run claims GPU versions: %s" % sorted(gpu)
PY
}

run_align 0 run swiglu --shape T=4,F=16 --trace s.atf
check_header s.atf || fail "header of a single-op run lacks its provenance"
ALIGN_TRACE=$PWD/m.atf run_align 0 run mhc --shape T=4
check_header m.atf || fail "header of a block run (trace from \$ALIGN_TRACE) lacks its provenance"
run_align 0 run matmul --shape T=2,D=16,F=8 --trace mm.atf
check_header mm.atf || fail "header of a matmul run lacks its provenance"

# the commit is the build's: the same binary writes the same align_commit into every trace
commits=$(for f in s.atf m.atf mm.atf; do head -1 "$f" | python3 -c 'import json,sys; print(json.load(sys.stdin)["align_commit"])'; done | sort -u | wc -l)
expect_eq "one align_commit per build" "$commits" "1"

# ingest keeps the provenance fields of the header
run_align 0 ingest --db p.db s.atf
hdr=$(sql p.db "SELECT header FROM run LIMIT 1")
python3 - "$hdr" s.atf <<'PY' || fail "ingest dropped provenance fields of the header"
import json, sys
stored, h = json.loads(sys.argv[1]), json.loads(open(sys.argv[2]).readline())
assert stored.get("align_commit") == h["align_commit"] and stored.get("device") == "cpu", stored
PY
finish
