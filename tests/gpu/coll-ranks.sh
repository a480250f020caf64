#!/usr/bin/env bash
# coll-ranks.sh ALIGN: `align run OP --ranks N` on the GPUs of this machine (harness/run/run-ranks.c).
#  1. --ranks 1 (NCCL allows a one-rank communicator), for allreduce / reduce_scatter / all_gather x
#     fp32 / bf16 / fp16 x ALIGN_COLL_IMPL fixed / nccl, two steps, two sizes (one ragged, 3 MiB-ish):
#     the rank's outputs file is byte-identical to the C twin's (`align run OP --shape N=1,...`), its
#     trace's digests equal the C twin's, its header says rank 0 of 1, cuda-ranks, the NCCL version and
#     library, NCCL_NVLS_ENABLE=0 in nccl_env and set by align, and `align ingest` accepts it.
#  1b. --inputs from files: `x.{rank}.safetensors` (rank r's own x[1,cols]) and one x[N,cols] file, each
#     byte-identical to the C twin on the same file.
#  2. the mpirun form on GPU 0 (RANK=0 WORLD_SIZE=1 --nccl-id FILE): rank 0 removes the id file after
#     the communicator is up; an existing id file is refused (exit 2).
#  3. a failing rank: on a one-GPU machine --ranks 2 makes rank 1 fail (no device 1) while rank 0 waits
#     in ncclCommInitRank: the launcher stops rank 0 and exits 2 with rank 1's message, in time, leaving
#     no trace. With 2 or more GPUs instead: --ranks 2 fixed and nccl against the C twin's rows (N = 2:
#     any order of two addends gives the fixed bits).
# Prints one line per check; exit 1 on any failure, 77 without a GPU (suite gpu).
set -uo pipefail
align=${1:?usage: coll-ranks.sh ALIGN}
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: no NVIDIA GPU (nvidia-smi -L fails)"
	exit 77
fi
ngpu=$(nvidia-smi -L | grep -c '^GPU')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
good() { echo "ok: $*"; }
digests() { grep -o '"digest":"[0-9a-f]*"' "$1"; }
header_ok() { # header_ok TRACE RANK WORLD: the rank's header fields
	python3 - "$@" <<'PY'
import json, sys
h = json.loads(open(sys.argv[1]).readline())
want = {"rank": int(sys.argv[2]), "world_size": int(sys.argv[3]), "implementation": "cuda-ranks"}
bad = [f"{k}={h.get(k)!r} (want {v!r})" for k, v in want.items() if h.get(k) != v]
if not isinstance(h.get("nccl_version"), int) or h["nccl_version"] < 20700: bad.append(f"nccl_version={h.get('nccl_version')!r}")
if not h.get("nccl_library"): bad.append("no nccl_library")
env = h.get("nccl_env", {})
if env.get("NCCL_NVLS_ENABLE") != "0": bad.append(f"nccl_env.NCCL_NVLS_ENABLE={env.get('NCCL_NVLS_ENABLE')!r}")
if h.get("nccl_set_by_align") != "NCCL_NVLS_ENABLE": bad.append(f"nccl_set_by_align={h.get('nccl_set_by_align')!r}")
if bad: print("; ".join(bad)); sys.exit(1)
print(f"NCCL {h['nccl_version']} from {h['nccl_library']}")
PY
}

# 1. one rank against the C twin
echo "## --ranks 1 against the C twin (GPUs here: $ngpu)"
for D in 786433 5; do
	for op in allreduce reduce_scatter all_gather; do
		for dt in fp32 bf16 fp16; do
			for impl in fixed nccl; do
				what="$op D=$D $dt $impl"
				modes=(--mode "ALIGN_COLL_DTYPE=$dt" --mode "ALIGN_COLL_IMPL=$impl")
				rm -f r.* c.*
				if ! "$align" run "$op" --ranks 1 --shape "D=$D" "${modes[@]}" --seed 7 --steps 2 \
					--trace r.atf --outputs r.safetensors >out.txt 2>err.txt; then
					bad "$what: --ranks 1 failed: $(tail -3 err.txt)"
					continue
				fi
				"$align" run "$op" --shape "N=1,D=$D" --mode "ALIGN_COLL_DTYPE=$dt" --seed 7 --steps 2 \
					--trace c.atf --outputs c.safetensors >/dev/null 2>err.txt ||
					{ bad "$what: C twin failed: $(cat err.txt)"; continue; }
				cmp -s r.rank0.safetensors c.safetensors || { bad "$what: outputs differ from the C twin"; continue; }
				[ "$(digests r.rank0.atf)" = "$(digests c.atf)" ] || { bad "$what: trace digests differ"; continue; }
				h=$(header_ok r.rank0.atf 0 1) || { bad "$what: header: $h"; continue; }
				"$align" ingest --quiet --db "i-$op-$dt-$impl-$D.db" r.rank0.atf >/dev/null 2>err.txt ||
					{ bad "$what: ingest refused the rank trace: $(cat err.txt)"; continue; }
				good "$what: bytes = C twin (2 steps), header ok, ingested ($h)"
			done
		done
	done
done

# 1b. inputs from files: rank r's own file (`--inputs x.{rank}.safetensors`, x[1,cols]) and one file of
# every rank's rows (x[N,cols]), against the C twin on the same file
echo "## --ranks 1 --inputs from files"
for op in allreduce reduce_scatter all_gather; do
	for impl in fixed nccl; do
		what="$op $impl --inputs"
		rm -f x.* r.* c.*
		"$align" run "$op" --shape N=1,D=4099 --mode ALIGN_COLL_DTYPE=bf16 --seed 11 --save-inputs x.0.safetensors \
			--outputs c.safetensors >/dev/null 2>err.txt || { bad "$what: C twin failed: $(cat err.txt)"; continue; }
		for form in 'x.{rank}.safetensors' x.0.safetensors; do
			rm -f r.*
			if "$align" run "$op" --ranks 1 --shape D=4099 --mode ALIGN_COLL_DTYPE=bf16 --mode "ALIGN_COLL_IMPL=$impl" \
				--inputs "$form" --outputs r.safetensors >out.txt 2>err.txt && cmp -s r.rank0.safetensors c.safetensors; then
				good "$what $form: bytes = C twin on the same file"
			else
				bad "$what $form: $(tail -2 err.txt) (outputs: $(ls r.* 2>&1))"
			fi
		done
	done
done

# 2. the mpirun form
echo "## RANK=0 WORLD_SIZE=1 --nccl-id FILE"
if RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 "$align" run allreduce --nccl-id "$work/id" --shape D=4096 --trace m.atf \
	>out.txt 2>err.txt && [ -f m.rank0.atf ] && [ ! -e "$work/id" ]; then
	good "one rank under mpirun's variables: $(cat out.txt)"
else
	bad "mpirun form: $(cat err.txt) (id file left: $(ls "$work/id" 2>&1))"
fi
printf 'stale' >"$work/id"
RANK=0 WORLD_SIZE=1 "$align" run allreduce --nccl-id "$work/id" --shape D=16 >out.txt 2>err.txt
rc=$?
if [ $rc = 2 ] && grep -q "exists (an id of another run)" err.txt; then good "an existing id file is refused"; else bad "stale id: rc $rc $(cat err.txt)"; fi
rm -f "$work/id"

# 3. two ranks
if [ "$ngpu" -lt 2 ]; then
	echo "## --ranks 2 on one GPU: rank 1 fails, rank 0 is stopped"
	start=$(date +%s)
	timeout 300 "$align" run allreduce --ranks 2 --shape D=64 --trace two.atf >out.txt 2>err.txt
	rc=$? secs=$(($(date +%s) - start))
	if [ $rc = 2 ] && grep -q "^error: rank 1 of 2 failed (exit 2): rank 1: needs CUDA device 1" err.txt &&
		grep -q "the other ranks were stopped" err.txt && ! ls two.* >/dev/null 2>&1; then
		good "launcher: rank 1's message, exit 2, rank 0 stopped, no trace, ${secs} s"
	else
		bad "launcher failure path: rc $rc after ${secs} s: $(cat err.txt)"
	fi
else
	echo "## --ranks 2 against the C twin's rows"
	for op in allreduce reduce_scatter all_gather; do
		for impl in fixed nccl; do
			rm -f r.* c.*
			"$align" run "$op" --ranks 2 --shape D=100003 --mode ALIGN_COLL_DTYPE=bf16 --mode "ALIGN_COLL_IMPL=$impl" \
				--outputs r.safetensors >out.txt 2>err.txt || { bad "$op $impl: $(tail -3 err.txt)"; continue; }
			"$align" run "$op" --shape N=2,D=100003 --mode ALIGN_COLL_DTYPE=bf16 --outputs c.safetensors >/dev/null
			if python3 - <<'PY'; then good "$op $impl: rank r's y = row r of the C twin's y"; else bad "$op $impl: rows differ"; fi
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
c = tensors("c.safetensors")["y"]; rows = [tensors(f"r.rank{r}.safetensors")["y"] for r in range(2)]
sys.exit(0 if rows[0] + rows[1] == c else 1)
PY
		done
	done
fi
echo "checks failed: $fails"
[ "$fails" = 0 ]
