#!/usr/bin/env bash
# ingest-msprobe: msprobe dump directories (tests/samples/msprobe/, made by the real mindstudio-probe with
# tests/msprobe/make-dumps.py: md5 task at mix level in fp32 and bf16, statistics task at L1): records per
# tensor and number in call order with call/io, dtype, shape, Max/Min/Mean/Norm stats, the CRC-32 digest;
# step{N} -> step N + 1, rank{R} / proc{PID}; fp32 twice bitwise-equal, bf16 vs fp32 root cause; statistics
# compared as summaries; bad input (message, exit 2, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/msprobe/compare-dumps.sh"
S="$SRCROOT/tests/samples/msprobe"

run_align 0 ingest --list-formats && expect_out "^msprobe +msprobe +msprobe \(mindstudio-probe\) dump.json"

# a dump directory without --as: one run named after it; construct.json beside dump.json is not read
run_align 0 ingest --db a.db "$S/md5-mix-fp32" && expect_out "md5-mix-fp32/step0/proc1/dump.json: msprobe, 45 records into run 'md5-mix-fp32'"
expect_eq "run" "$(sql a.db "SELECT name||'|'||framework||'|'||format||'|'||header FROM run")" \
	'md5-mix-fp32|pytorch|msprobe|{"msprobe_framework":"pytorch","msprobe_level":"mix","msprobe_task":"statistics"}'
rec() { sql a.db "SELECT step||'|'||rank||'|'||micro||'|'||seq||'|'||phase||'|'||coalesce(dtype,'-')||'|'||coalesce(shape,'-')||'|'||coalesce(digest_alg||':'||digest,'-')||'|'||coalesce(call,'-')||'|'||coalesce(io,'-')||'|'||coalesce(text,'-')||'|'||line FROM record WHERE name='$1'"; }
expect_eq "first input" "$(rec Tensor.__mul__.0.forward.input.0)" "1|0|-1|0|fwd|fp32|[2,8]|crc32:86bc2d65|Tensor.__mul__.0.forward|in|-|7"
expect_eq "its stats" "$(sql a.db "SELECT stats FROM record WHERE name='Tensor.__mul__.0.forward.input.0'")" \
	'{"Max":1.7001014947891235,"Min":-1.2830430269241333,"Mean":0.0015620235353708267,"Norm":3.363698959350586}'
expect_eq "a float argument" "$(rec Tensor.__mul__.0.forward.input.1)" "1|0|-1|1|fwd|fp64|-|-|Tensor.__mul__.0.forward|in|0.5|7"
expect_eq "an output" "$(rec Tensor.__mul__.0.forward.output.0)" "1|0|-1|2|fwd|fp32|[2,8]|crc32:92ee1809|Tensor.__mul__.0.forward|out|-|7"
expect_eq "module parameters" "$(rec Module.fc1.Linear.forward.0.parameters.weight)" "1|0|-1|11|param|fp32|[16,8]|crc32:1c546a42|Module.fc1.Linear.forward.0|in|-|147"
expect_eq "backward input" "$(rec Functional.linear.1.backward.input.0 | cut -d'|' -f5,9,10)" "bwd|Functional.linear.1.backward|in"
expect_eq "backward output" "$(rec Functional.linear.1.backward.output.2 | cut -d'|' -f5,9,10)" "bwd|Functional.linear.1.backward|out"
expect_eq "parameter gradient" "$(rec Module.fc2.Linear.parameters_grad.0.weight.0 | cut -d'|' -f5,6,7,9,10)" "grad|fp32|[4,16]|Module.fc2.Linear.parameters_grad.0|out"
expect_eq "None (backward output of a weightless input) is no record" "$(sql a.db "SELECT count(*) FROM record WHERE name='Functional.mse_loss.0.backward.output.1'")" "0"
expect_eq "execution order = key order of data" "$(sql a.db "SELECT group_concat(call, ' ') FROM (SELECT DISTINCT call FROM record ORDER BY seq LIMIT 5)")" \
	"Tensor.__mul__.0.forward Tensor.__add__.0.forward Functional.linear.0.forward Module.fc1.Linear.forward.0 Torch.relu.0.forward"

# rank{R} and step{N} from the path; a single dump.json file
mkdir -p d/step4/rank3
sed 's/^ //' "$S/md5-mix-fp32/step0/proc1/dump.json" > d/step4/rank3/dump.json # other bytes: not skipped
run_align 0 ingest --db a.db --as r3 d/step4/rank3/dump.json
expect_eq "step N+1, rank R" "$(sql a.db "SELECT DISTINCT r.step||'|'||r.rank FROM record r JOIN run ON run.id=r.run_id WHERE run.name='r3'")" "5|3"

# the real dumps compared (tests/msprobe/compare-dumps.sh)
msprobe_compare "$S/md5-mix-fp32" "$S/md5-mix-bf16"

# the statistics task: Max/Min/Mean/Norm compared as summaries against the md5 dump's
run_align 0 ingest --db a.db "$S/statistics-L1-fp32" "$S/md5-mix-bf16"
expect_eq "no digest" "$(sql a.db "SELECT count(*) FROM record WHERE digest IS NOT NULL AND run_id=(SELECT id FROM run WHERE name='statistics-L1-fp32')")" "0"
run_align 1 report --db a.db --runs statistics-L1-fp32,md5-mix-fp32
expect_out "functional\.linear\.0\.forward\.output\.0 +0/1 bitwise-equal, 1 equal as printed$"
expect_out "^bits unknown from step 1 \(tensor\.__mul__\.0\.forward\.input\.0: equal in the summaries shown \(Max, Min, Mean, Norm\); not bitwise\)"
run_align 1 report --db a.db --runs statistics-L1-fp32,md5-mix-bf16
expect_out "^first difference: functional\.linear\.0\.forward\.output\.0 at step 1, micro -, rank 0: differ: summaries differ: Max: 0\.9069113731384277 vs 0\.91015625, 1 ulp of bf16"

# NaN and Infinity tokens (json.dump writes them) in statistics
mkdir -p n/step0/rank0
cat > n/step0/rank0/dump.json <<'J'
{"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": {
 "Torch.log.0.forward": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [2], "Max": 1.0, "Min": -1.0, "Mean": 0.0, "Norm": 1.4140625, "requires_grad": false}],
  "input_kwargs": {"alpha": {"type": "float", "value": -0.1}, "n": {"type": "int", "value": 3}, "keep": {"type": "bool", "value": true}, "dim": {"type": "torch.Size", "value": [2]}},
  "output": [{"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [2], "Max": NaN, "Min": -Infinity, "Mean": NaN, "Norm": NaN, "requires_grad": false}]}}}
J
run_align 0 ingest --db a.db --as nan n
expect_eq "kwargs: float, int, bool; torch.Size is no value" "$(sql a.db "SELECT group_concat(name||'|'||dtype||'|'||coalesce(text,'-')||'|'||coalesce(bits,'-')||'|'||io, ' ') FROM (SELECT * FROM record WHERE name LIKE 'Torch.log.0.forward.input.%' ORDER BY seq)")" \
	"Torch.log.0.forward.input.0|bf16|-|-|in Torch.log.0.forward.input.alpha|fp64|-0.1|-4631501856787818086|in Torch.log.0.forward.input.n|int64|3|3|in Torch.log.0.forward.input.keep|bool|-|1|in"
expect_eq "NaN stats" "$(sql a.db "SELECT dtype||' '||stats FROM record WHERE name='Torch.log.0.forward.output.0'")" 'bf16 {"Max":"nan","Min":"-inf","Mean":"nan","Norm":"nan"}'

bad() { # bad PATH PATTERN [OPTIONS...]: exit 2, PATTERN on stderr, database unchanged
	local f=$1 pat=$2 before
	shift 2
	before=$(sqlite3 a.db .dump | sha256sum)
	run_align 2 ingest --db a.db --as "bad-$f" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(sqlite3 a.db .dump | sha256sum)" "$before"
}
H='{"task": "md5", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": {'
T='{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0'
mk() { mkdir -p "$1/step0/rank0"; printf '%s\n' "$2" > "$1/step0/rank0/dump.json"; }
mk empty "$H"$'\n'"}}"
bad empty "empty/step0/rank0/dump.json:1: 'data' holds no tensor or number \(empty: nothing was dumped\)"
mk badmd5 "$H"$'\n'" \"Torch.exp.0.forward\": {\"input_args\": [$T, \"md5\": \"xyz\"}], \"output\": []}}}"
bad badmd5 "badmd5/step0/rank0/dump.json:2: Torch.exp.0.forward.input.0: field 'md5' is 'xyz', not 8 hex digits \(msprobe's CRC-32\)"
mk baddtype "$H"$'\n'$'\n'" \"Torch.exp.0.forward\": {\"output\": [{\"type\": \"torch.Tensor\", \"dtype\": 7, \"shape\": [2]}]}}}"
bad baddtype "baddtype/step0/rank0/dump.json:3: Torch.exp.0.forward.output.0: field 'dtype' is not a string"
mk badshape "$H \"Torch.exp.0.forward\": {\"output\": [{\"type\": \"torch.Tensor\", \"dtype\": \"torch.float32\", \"shape\": [2, -1], \"Max\": 1.0}]}}}"
bad badshape "Torch.exp.0.forward.output.0: field 'shape' element 1 is not an integer >= 0"
mk badkey "$H \"Torch.exp.0.sideways\": {\"output\": [$T}]}}}"
bad badkey "badkey/step0/rank0/dump.json:1: 'Torch.exp.0.sideways': not a forward, backward or parameters_grad key"
mk badstat "$H \"Torch.exp.0.forward\": {\"output\": [{\"type\": \"torch.Tensor\", \"dtype\": \"torch.float32\", \"shape\": [2], \"Max\": \"big\"}]}}}"
bad badstat "Torch.exp.0.forward.output.0: field 'Max' is not a number"
mk trunc "$H \"Torch.exp.0.forward\": {\"output\": [$T"
bad trunc "trunc/step0/rank0/dump.json:2: invalid JSON: .* expected near end of file" --format msprobe
printf '{"task": "x", "level": "L1", "dump_data_dir": null}\n' > nodata.json
bad nodata.json "nodata.json:1: no 'data' object: not an msprobe dump.json"
mkdir -p nodump/step0/rank0 && echo '{}' > nodump/step0/rank0/construct.json
bad nodump "nodump: a directory without dump.json \(a directory is read as an msprobe dump: DIR/step\{N\}/rank\{R\}/dump.json\)"
finish
