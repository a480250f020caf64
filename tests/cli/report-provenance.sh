#!/usr/bin/env bash
# report-provenance: two traces whose ATF headers record different provenance (align commit, device,
# driver and CUDA library versions, as 'align run' writes them) make 'align report' say so in one line
# under the runs header (text), a "provenance" object (JSON) and a note (md); equal provenance, or none,
# says nothing. A field recorded by one run only is not compared.
. "$SRCROOT/tests/cli/lib.sh"

# trace NAME HEADER_EXTRA: an ATF trace with two exact-bit records and the given header fields
trace() {
	cat > "$1.atf" <<T
{"align_trace":1,"run":"$1","framework":"align","rank":0,"world_size":1$2}
{"rank":0,"step":1,"micro":0,"seq":0,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x412de666"}
{"rank":0,"step":2,"micro":0,"seq":1,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x412de000"}
T
}
h100=',"align_commit":"abc123","device":"NVIDIA H100","driver_version":"570.86","cuda_runtime_version":12090,"cublas_version":130000,"cublaslt_version":130000'
h200=',"align_commit":"abc123","device":"NVIDIA H200","driver_version":"570.86","cuda_runtime_version":12090,"cublas_version":120900,"cublaslt_version":130000'
trace a "$h100"
trace b "$h200"
trace c "$h100"
trace d ""
trace e ',"device":"NVIDIA H200"'
run_align 0 ingest --db p.db a.atf b.atf c.atf d.atf e.atf

# different provenance: one line, right under the runs header, the differing fields in name order
run_align 0 report --db p.db --runs a,b
expect_eq "provenance line" "$(sed -n 2p out.txt)" \
	"provenance differs: cublas_version 130000 vs 120900; device 'NVIDIA H100' vs 'NVIDIA H200'"
expect_eq "runs header first" "$(sed -n 1p out.txt | cut -c1-6)" "runs: "
expect_eq "one provenance line" "$(grep -c '^provenance' out.txt)" "1"

run_align 0 report --db p.db --runs a,b --format json
expect_eq "json differs" "$(python3 -c 'import json,sys; print(",".join(json.load(open("out.txt"))["provenance"]["differs"]))')" \
	"cublas_version,device"
expect_eq "json values" "$(python3 -c 'import json,sys; p=json.load(open("out.txt"))["provenance"]; print(p["a"]["device"], "|", p["b"]["cublas_version"])')" \
	"NVIDIA H100 | 120900"

run_align 0 report --db p.db --runs a,b --format md && expect_out "^\*\*Provenance differs:\*\* cublas_version 130000 vs 120900; device 'NVIDIA H100' vs 'NVIDIA H200'$"

# equal provenance, no provenance, or a field in one run only: nothing said
for pair in a,c a,d d,e; do
	run_align 0 report --db p.db --runs "$pair"
	grep -q provenance out.txt && fail "$pair: a provenance line although nothing recorded by both differs: $(grep provenance out.txt)"
	run_align 0 report --db p.db --runs "$pair" --format json
	expect_eq "$pair json differs" "$(python3 -c 'import json; print(json.load(open("out.txt"))["provenance"]["differs"])')" "[]"
done
# a field recorded by both differs, others by one run only: only that field
run_align 0 report --db p.db --runs a,e
expect_eq "one field" "$(grep '^provenance' out.txt)" "provenance differs: device 'NVIDIA H100' vs 'NVIDIA H200'"
finish
