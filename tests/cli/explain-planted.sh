#!/usr/bin/env bash
# explain-planted: `align explain` finds planted mode assignments, on every op. For each op (every row of
# `align run --list`), DRAWS assignments of the op's switches are drawn at random (fixed seed; CPU values:
# the GPU-only ones are left out, as explain leaves them out on the CPU), the output is produced by
# `align run OP --mode ...` on inputs it saves (--save-inputs, a new --seed per draw, small dims), and
# `align explain` must (a) exit 0 with an exhaustive search, (b) report a description that contains the
# planted assignment, and (c) report only assignments that reproduce the output: up to VERIFY of the
# assignments its descriptions stand for are re-run with `align run --inputs` and their bytes compared
# with the planted output (cmp). Once per op the same question is asked with --no-screen (every
# assignment replayed whole) and with -j 2, and the matches must be the same (the screening on the first
# rows refutes only what the whole replay refutes; threads change nothing).
# EXPLAIN_SHARD=I/N: only the ops whose index in `align run --list` is I-1 modulo N, less the slow ops
# of `solo` below; EXPLAIN_SHARD=OP: that op alone (meson runs explain-planted-1..N and one test per solo
# op, so each has its own time limit and they run in parallel); each op draws from its own seeded
# generator, so an op's draws do not depend on the shard it falls in.
. "$SRCROOT/tests/cli/lib.sh"
DRAWS=${EXPLAIN_DRAWS:-6}
SLOW=0 # the sanitizer build (ASan + UBSan, several times slower): fewer draws, the compressor's once
grep -q __asan_init "$ALIGN" && DRAWS=${EXPLAIN_DRAWS:-2} SLOW=1
VERIFY=${EXPLAIN_VERIFY:-12}
"$ALIGN" run --list >list.txt || fail "align run --list"
"$ALIGN" modes >modes.txt || fail "align modes"
SHARD=${EXPLAIN_SHARD:-1/1}
if [[ $SHARD =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]]; then
	[ "${SHARD%/*}" -le "${SHARD#*/}" ] || fail "EXPLAIN_SHARD=$SHARD: want I/N with 1 <= I <= N"
else
	grep -q "^$SHARD:" list.txt || fail "EXPLAIN_SHARD=$SHARD: neither I/N nor an op of align run --list"
fi
python3 - "$ALIGN" "$DRAWS" "$VERIFY" "$SLOW" "$SHARD" <<'PY' || fail "planted assignments (see above)"
import itertools, json, random, subprocess, sys
align, draws, verify, slow = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
solo_op = None if "/" in sys.argv[5] else sys.argv[5]
shard, nshards = (1, 1) if solo_op else (int(x) for x in sys.argv[5].split("/"))
# fast dims per op (every op of `align run --list` must have a row: a new op fails here until it has one)
dims = {
    "matmul": "T=4,D=64,F=8", "rmsnorm": "T=4,D=256", "qnorm": "T=3,H=2,D=128", "swiglu": "T=4,F=256",
    "router": "T=4,D=128", "mhc_pre": "T=3,N=4,D=64", "mhc_post": "T=3,N=4,D=64", "mhc_head": "T=3,N=4,D=64",
    "moe_combine": "T=4,K=6,D=64", "allreduce": "N=4,D=512", "reduce_scatter": "N=4,D=128",
    "all_gather": "N=4,D=64", "sparse_attn": "T=4,H=2", "rope": "T=4,H=2", "indexer": "T=16,H=4,D=32,S=8,K=4",
    "embedding": "T=4,V=16,D=32", "lm_head": "T=4,D=64,V=32", "xent": "T=8,V=64,S=4",
    "dsa_indexer": "T=8,H=2,D=16,S=8,K=4", "sparse_mla": "T=4,H=2", "compressor": "T=4,K=4,N=2,D=32,F=128",
    "matmul_bwd": "T=8,D=16,F=8,S=4", "rmsnorm_bwd": "T=8,D=64", "qnorm_bwd": "T=3,H=2,D=64",
    "swiglu_bwd": "T=4,F=256", "moe_combine_bwd": "T=4,K=6,D=64",
    "router_bwd": "T=4,D=16,E=32",
    "mhc_post_bwd": "T=3,N=4,D=64", "mhc_pre_bwd": "T=3,N=2,D=16", "mhc_head_bwd": "T=3,N=4,D=32",
    "sparse_attn_bwd": "T=4,H=1,D=16,S=16,N=8", "rope_bwd": "T=4,H=2", "xent_bwd": "T=8,V=64",
    "embedding_bwd": "T=40,V=4,D=8", "lm_head_bwd": "T=8,D=16,V=8,S=4", "indexer_bwd": "T=16,H=2,D=8,S=4",
    "dsa_indexer_bwd": "T=8,H=2,D=16,S=8", "sparse_mla_bwd": "T=4,H=2",
}
dims["mtp"] = "T=4,S=2,V=16,N=2,D=32"  # 20,736 assignments (12 switches), replayed whole: ~7 s an explanation
dims["mtp_loss"] = "T=8,K=3"
dims["mtp_loss_bwd"] = "T=8,K=3"
dims["compressor_bwd"] = "T=2,K=2,N=2,D=16,F=64"  # F >= rope_dim (64)
# attn composes rmsnorm, qnorm, rope, compressor, indexer and sparse_attn: 29 switches, a space no search
# covers; its planted draws are explained op by op (each sub-op is planted above), not as a layer
composed = {"attn"}
# the compressor's 73,728 assignments (15 switches, ROPE_ARITH fixed: op_fix below) are replayed
# whole (no row screening: a group reads K or 2K rows of x): ~35 s an explanation in the optimised
# build, ~4 min in a debug one: fewer draws
op_draws = {"compressor": 1 if slow else 2}
# router_bwd: 11 switches, 10,368 assignments, each replay a whole forward and backward (no row screening)
op_draws["router_bwd"] = 1 if slow else 3
# no --no-screen / -j 2 repeat for these: the compressor has no row screening (--no-screen is its normal
# path) and each whole replay costs minutes in a debug build; the other ops check the threads
op_draws["mtp"] = 1 if slow else 2
single = {"compressor"}
# ops too slow to share a shard (the compressor: ~5 min on a loaded 2-core machine): one test each
# (explain-planted-OP in tests/cli/meson.build), never in an I/N shard
solo = {"compressor"}
# switches fixed at their planted value (explain --mode): the compressor's 15 switches make 294,912
# assignments since ROPE_YARN_FREQ and ROPE_ARITH grew to 3 and 4 values, over explain's exhaustive
# limit (200,000); fixing ROPE_ARITH (explained exhaustively on the rope op) leaves 73,728
op_fix = {"compressor": ["ALIGN_ROPE_ARITH"]}
# compressor_bwd: 15 switches (the forward's less CSA_QAT, not read, plus RMSNORM_BWD_FORM), 442,368
# assignments; each replay is a forward and a backward: the RoPE frequency and arith forms and the norm's
# dx form are fixed (explained exhaustively on rope_bwd and rmsnorm_bwd), leaving 12,288, two draws, whole
# replays only (as the compressor)
op_fix["compressor_bwd"] = ["ALIGN_ROPE_ARITH", "ALIGN_ROPE_YARN_FREQ", "ALIGN_RMSNORM_BWD_FORM"]
op_draws["compressor_bwd"] = 1 if slow else 2
single.add("compressor_bwd")
# mtp_bwd composes mtp's steps 1-3, matmul_bwd, rmsnorm_bwd and embedding_bwd: 17 switches, one more than
# explain takes (EX_MAX_SW); its own step (the stream sum) has none, MTP_COMBINE is planted on mtp: explained
# op by op, as attn
composed.add("mtp_bwd")
dims["mtp_bwd"] = "T=4,S=2,V=16,N=2,D=16"
# attn_bwd composes attn and matmul_bwd, rope_bwd, sparse_attn_bwd, qnorm_bwd, rmsnorm_bwd, compressor_bwd:
# 41 switches; its own steps (the dx sum, casts) have none: explained op by op, as attn
composed.add("attn_bwd")
ops, switches, refused, cur = [], {}, {}, None
for line in open("list.txt"):  # a block's lines (mhc, model: their own switches line) belong to no op
    if line[0].isalpha():
        cur = None if ": block of" in line else line.split(":")[0]
        ops += [cur] if cur else []
    elif line.strip().startswith("switches:") and cur:
        switches[cur] = line.split()[1:]
    elif line.strip().startswith("refuses:") and cur:  # values the op refuses by design: never planted
        refused[cur] = set(line.split()[1:])
values = {}
for line in open("modes.txt").readlines()[1:]:
    f = line.split()
    values[f[0]] = [v for v in f[3].rstrip(":").split("|") if not v.endswith("*")]
bad = 0
def run(args):
    return subprocess.run([align] + args, capture_output=True, text=True)
def explain(op, fix, extra=()):
    fixed = [a for e, v in fix.items() for a in ("--mode", f"{e}={v}")]
    p = run(["explain", "--op", op, "--inputs", "in.st", "--output", "out.st", "--shape", dims[op],
             "--format", "json"] + fixed + list(extra))
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr
def points(d, sw):
    """the assignments a description stands for (dicts)"""
    axes = [[(e, v) for v in (d["switches"][e] if e in d["switches"] else sw[e])] for e in sw]
    return [dict(p) for p in itertools.product(*axes)]
for i, op in enumerate(ops):
    if (op != solo_op) if solo_op else (op in solo or i % nshards != shard - 1):
        continue
    rng = random.Random("19-" + op)
    if op in composed:
        print(f"op {op}: composed layer, explained through its sub-ops"); continue
    if op not in dims:
        print(f"op {op}: no fast dims in explain-planted.sh"); bad += 1; continue
    sw_all = {e: [v for v in values[e] if f"{e}={v}" not in refused.get(op, ())] for e in switches[op]}
    for k in range(op_draws.get(op, draws)):
        plant = {e: rng.choice(v) for e, v in sw_all.items()}
        fix = {e: plant[e] for e in op_fix.get(op, [])}
        sw = {e: [fix[e]] if e in fix else v for e, v in sw_all.items()}  # what the search covers
        modes = [a for e, v in plant.items() for a in ("--mode", f"{e}={v}")]
        p = run(["run", op, "--shape", dims[op], "--seed", str(1000 + k), "--save-inputs", "in.st",
                 "--outputs", "out.st"] + modes)
        if p.returncode:
            print(f"{op}: align run {plant} failed: {p.stderr}"); bad += 1; continue
        rc, j, err = explain(op, fix)
        tag = f"{op} draw {k} {plant}"
        if rc != 0 or not j or not j["found"] or not j["search"]["exhaustive"]:
            print(f"{tag}: explain exit {rc}, {err} {j and j['search']}"); bad += 1; continue
        if not any(all(plant[e] in d["switches"].get(e, sw[e]) for e in sw) for d in j["descriptions"]):
            print(f"{tag}: the planted assignment is in no description: {j['descriptions']}"); bad += 1
        pts = [q for d in j["descriptions"] for q in points(d, sw)]
        if sum(d["assignments"] for d in j["descriptions"]) < j["matches"] or len(pts) < j["matches"]:
            print(f"{tag}: descriptions stand for {len(pts)} assignments, matches {j['matches']}"); bad += 1
        for q in rng.sample(pts, min(verify, len(pts))):
            qm = [a for e, v in q.items() for a in ("--mode", f"{e}={v}")]
            r = run(["run", op, "--shape", dims[op], "--inputs", "in.st", "--outputs", "re.st"] + qm)
            if r.returncode or open("re.st", "rb").read() != open("out.st", "rb").read():
                print(f"{tag}: reported {q} does not reproduce the output ({r.returncode} {r.stderr})"); bad += 1
        if k == 0 and op not in single:  # the screening and the threads change no answer
            for extra in (["--no-screen"], ["-j", "2"]):
                rc2, j2, err2 = explain(op, fix, extra)
                if rc2 != 0 or j2["descriptions"] != j["descriptions"] or j2["matches"] != j["matches"]:
                    print(f"{tag}: {extra} gives other matches: {j2 and j2['descriptions']} vs {j['descriptions']}")
                    bad += 1
        print(f"ok {tag}: {j['matches']} matches in {len(j['descriptions'])} descriptions, "
              f"{j['search']['replays']}")
sys.exit(1 if bad else 0)
PY
finish
