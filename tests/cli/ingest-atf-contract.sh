#!/usr/bin/env bash
# ingest-atf-contract: every rule of README's "The align trace (ATF v1)": the header names the run and
# its framework, seq is unique per rank across the run, the phase vocabulary, bits agree with value and
# text, digest algorithms and lengths (payloads checked under each), framework dtype spellings, step 0,
# text/digits, missing, a record must say something, the call/io link. Refusals: message, exit 2 and
# the database byte for byte unchanged; accepted forms: what lands in the database.
. "$SRCROOT/tests/cli/lib.sh"

H='{"align_trace":1}'
dump() { sqlite3 "$1" .dump | sha256sum; }
bad() { # bad FILE PATTERN [ARGS...]: ingest FILE into c.db fails with exit 2, PATTERN on stderr, c.db unchanged
	local f=$1 pat=$2 before
	shift 2
	before=$(dump c.db)
	run_align 2 ingest --db c.db --quiet "$@" "$f" && expect_err "$pat"
	expect_eq "c.db unchanged after $f" "$(dump c.db)" "$before"
}
rec() { # rec FILE RECORD...: a trace with the plain header and these record lines
	local f=$1
	shift
	{ echo "$H"; printf '%s\n' "$@"; } >"$f"
}
col() { sql c.db "SELECT $2 FROM (SELECT record.* FROM record JOIN run ON run.id=run_id WHERE run.name='$1' ORDER BY seq)"; }

# README's example trace is a valid trace: each record lands, under the header's run and framework
awk '/<!-- atf:begin -->/{f=1;next}/<!-- atf:end -->/{f=0}f' "$SRCROOT/README.md" | grep -v '^```' >readme.atf
run_align 0 ingest --db r.db readme.atf && expect_out "readme.atf: atf, 6 records into run 'torch-ref'"
expect_eq "README example" "$(sql r.db "SELECT group_concat(step||':'||name||':'||coalesce(dtype, '-')||':'||coalesce(call||'/'||io, '-')||':'||coalesce(CASE WHEN bits IS NOT NULL THEN printf('%x', bits) END, digest, text, missing), ' ') FROM (SELECT * FROM record ORDER BY step, seq)")" \
	"0:layers.0.mlp.w1:bf16:-:$(sql r.db "SELECT digest FROM record WHERE step=0") 1:layers.0.mlp.in:bf16:layers.0.mlp#0/in:0b6e2a8c3f3f0d5c 1:layers.0.mlp.out:bf16:layers.0.mlp#0/out:5d41402abc4b2a76b9719d911017c592 1:loss:fp32:-:412de666 1:grad_norm:-:-:1.234E+00 2:loss:-:-:skipped iteration (nan)"
expect_eq "README example run" "$(sql r.db "SELECT name||':'||framework||':'||format FROM run")" "torch-ref:torch:atf"

rec base.atf '{"step":1,"name":"loss","value":1}'
run_align 0 ingest --db c.db --quiet base.atf

# --- the header names the run and its framework --------------------------------------------------------
printf '{"align_trace":1,"run":"torch-ref","framework":"torch","rank":0}\n{"step":1,"name":"loss","value":1}\n' >t0.atf
printf '{"align_trace":1,"run":"torch-ref","framework":"torch","rank":1}\n{"step":1,"name":"loss","value":1}\n' >t1.atf
printf '{"align_trace":1,"run":"paddle-ref","framework":"paddle","rank":0}\n{"step":1,"name":"loss","value":2}\n' >p0.atf
run_align 0 ingest --db h.db t0.atf p0.atf t1.atf
expect_out "t0.atf: atf, 1 records into run 'torch-ref'"
expect_out "p0.atf: atf, 1 records into run 'paddle-ref'"
expect_out "t1.atf: atf, 1 records into run 'torch-ref'"
expect_eq "one run per header name, framework from the header" \
	"$(sql h.db "SELECT group_concat(name||':'||framework||':'||(SELECT count(*) FROM record WHERE run_id=run.id), ' ') FROM (SELECT * FROM run ORDER BY name) run")" \
	"paddle-ref:paddle:1 torch-ref:torch:2"
# --as wins over the header's name (the header's framework still fills the column)
run_align 0 ingest --db as.db --as mine t0.atf && expect_out "into run 'mine'"
expect_eq "--as wins" "$(sql as.db "SELECT name||':'||framework FROM run")" "mine:torch"
# no run in the header: the file name; no framework: the format's (align)
run_align 0 ingest --db as.db base.atf && expect_out "into run 'base'"
expect_eq "defaults" "$(sql as.db "SELECT framework FROM run WHERE name='base'")" "align"
# a later invocation does not extend a run a header names unless --append says so
printf '{"align_trace":1,"run":"torch-ref","framework":"torch","rank":2}\n{"step":1,"name":"loss","value":1}\n' >t2.atf
before=$(dump h.db)
run_align 2 ingest --db h.db t2.atf &&
	expect_err "run 'torch-ref' \\(the name its header gives\\) already exists \\(pass --as 'torch-ref' --append to add 't2.atf' to it"
expect_eq "h.db unchanged" "$(dump h.db)" "$before"
run_align 0 ingest --db h.db --as torch-ref --append t2.atf && expect_out "into run 'torch-ref'"
printf '{"align_trace":1,"run":7}\n{"step":1,"name":"loss","value":1}\n' >runint.atf
bad runint.atf "runint.atf:1: field 'run': expected the run's name \\(a non-empty string\\)"
printf '{"align_trace":1,"framework":""}\n{"step":1,"name":"loss","value":1}\n' >fwempty.atf
bad fwempty.atf "fwempty.atf:1: field 'framework': expected a non-empty string"
# a header of another version names no run: the version is what is refused (not "run 'base' exists")
printf '{"align_trace":2,"run":"base"}\n{"step":1,"name":"loss","value":1}\n' >v2.atf
bad v2.atf "v2.atf:1: unsupported ATF version 2"
python3 -c 'import json; print(json.dumps({"align_trace": 1, "run": "big", "env": {"X": "y" * 70000}})); print("{\"step\":1,\"name\":\"a\",\"value\":1}")' >bighead.atf
bad bighead.atf "bighead.atf:1: header line longer than 65536 bytes"

# --- seq is unique per rank across the whole run ----------------------------------------------------
rec dup.atf '{"step":1,"name":"a","seq":0,"value":1}' '{"step":2,"name":"b","seq":0,"value":2}'
bad dup.atf "dup.atf:3: duplicate record: rank 0 seq 0 \\('b'\\) was already given to 'a' at dup.atf:2 \\(seq is unique per rank across the whole run\\)"
rec s1.atf '{"step":1,"name":"a","seq":5,"value":1}'
rec s2.atf '{"step":2,"name":"b","seq":5,"value":2}'
run_align 0 ingest --db c.db --quiet --as seqrun s1.atf
bad s2.atf "s2.atf:2: duplicate record: rank 0 seq 5 \\('b'\\) was already given to 'a' at s1.atf:2 \\(seq is unique" --as seqrun --append
# the same seq on another rank is another record
rec s3.atf '{"step":2,"rank":1,"name":"b","seq":5,"value":2}'
run_align 0 ingest --db s.db --as seqrun s1.atf s3.atf && expect_out "s3.atf: atf, 1 records"

# --- the phase vocabulary ------------------------------------------------------------------------------
lines=()
for p in fwd bwd grad param optim loss metric eval input meta; do lines+=("{\"step\":1,\"name\":\"v_$p\",\"phase\":\"$p\",\"value\":1}"); done
rec phases.atf "${lines[@]}"
run_align 0 ingest --db c.db --quiet phases.atf
expect_eq "every phase" "$(col phases "group_concat(phase, ' ')")" "fwd bwd grad param optim loss metric eval input meta"
expect_eq "default phase" "$(col base phase)" "fwd"
rec phase.atf '{"step":1,"name":"a","phase":"forward","value":1}'
bad phase.atf "phase.atf:2: field 'phase': unknown phase 'forward' \\(expected one of fwd, bwd, grad, param, optim, loss, metric, eval, input, meta\\)"

# --- bits and value, bits and text: the same number or exit 2 ---------------------------------------
# fp32 0x412de666 is 10.868749618530273; 10.86875 (its shortest print) rounds to it; 10.86875057220459
# is the next fp32 up; bf16 1.00390625 lies half way between 0x3f80 and 0x3f81 (a tie: the even one)
rec agree.atf '{"step":1,"name":"exact","dtype":"fp32","bits":"0x412de666","value":10.868749618530273}' \
	'{"step":1,"name":"short","dtype":"float32","bits":"0x412de666","value":10.86875}' \
	'{"step":1,"name":"tie","dtype":"bf16","bits":"0x3f80","value":1.00390625}' \
	'{"step":1,"name":"nan","dtype":"fp32","bits":"0x7fc00000","value":"nan"}' \
	'{"step":1,"name":"neg","dtype":"int64","bits":"0xffffffffffffffff","value":-1}' \
	'{"step":1,"name":"e4m3","dtype":"float8_e4m3fn","bits":"0x7e","value":448}' \
	'{"step":1,"name":"printed","dtype":"fp32","bits":"0x412de666","text":"10.87"}'
run_align 0 ingest --db c.db --quiet agree.atf
expect_eq "agreeing bits kept" "$(col agree "group_concat(name||'='||printf('%x', bits), ' ')")" \
	"exact=412de666 short=412de666 tie=3f80 nan=7fc00000 neg=ffffffffffffffff e4m3=7e printed=412de666"
rec bv.atf '{"step":1,"name":"loss","dtype":"fp32","bits":"0x412de666","value":10.86875057220459}'
bad bv.atf "bv.atf:2: fields 'bits' and 'value' disagree: bits 0x412de666 are 10.868749618530273 in fp32, 'value' is 10.86875057220459"
rec tie.atf '{"step":1,"name":"t","dtype":"bf16","bits":"0x3f81","value":1.00390625}'
bad tie.atf "tie.atf:2: fields 'bits' and 'value' disagree: bits 0x3f81 are 1.0078125 in bf16"
rec nanv.atf '{"step":1,"name":"t","dtype":"fp32","bits":"0x7fc00000","value":"inf"}'
bad nanv.atf "nanv.atf:2: fields 'bits' and 'value' disagree: bits 0x7fc00000 are nan in fp32, 'value' is inf"
rec intv.atf '{"step":1,"name":"t","dtype":"int64","bits":"0xffffffffffffffff","value":1}'
bad intv.atf "intv.atf:2: fields 'bits' and 'value' disagree: bits 0xffffffffffffffff are -1 in int64, 'value' is 1"
rec bt.atf '{"step":1,"name":"t","dtype":"fp32","bits":"0x412de666","text":"10.8"}'
bad bt.atf "bt.atf:2: fields 'bits' and 'text' disagree: bits 0x412de666 are 10.868749618530273 in fp32, outside what '10.8' stands for \\[10.75"
rec tensorbits.atf '{"step":1,"name":"t","dtype":"fp32","shape":[2],"bits":"0x0"}'
bad tensorbits.atf "tensorbits.atf:2: field 'bits': for a scalar, but shape \\[2\\] has 2 elements"
rec pb.atf '{"step":1,"name":"t","dtype":"fp32","bits":"0x3f800001","payload":"AACAPw=="}'
bad pb.atf "pb.atf:2: fields 'bits' and 'payload' disagree: bits 0x3f800001, payload bytes 0x3f800000"

# --- digest_alg: known algorithms, their lengths, payloads checked under each ------------------------
# the payload [1.0, 2.0] as fp32: md5, crc32 and sha256 of its 8 bytes
P='"dtype":"fp32","shape":[2],"payload":"AACAPwAAAEA="'
md5=$(printf '\x00\x00\x80\x3f\x00\x00\x00\x40' | md5sum | cut -c1-32)
sha=$(printf '\x00\x00\x80\x3f\x00\x00\x00\x40' | sha256sum | cut -c1-64)
crc=$(python3 -c 'import zlib,struct; print("%08x" % zlib.crc32(struct.pack("<2f", 1, 2)))')
up=$(echo "$md5" | tr a-f A-F)
rec algs.atf "{\"step\":1,\"name\":\"m\",$P,\"digest\":\"$up\",\"digest_alg\":\"md5\"}" \
	"{\"step\":1,\"name\":\"s\",$P,\"digest\":\"$sha\",\"digest_alg\":\"sha256\"}" \
	"{\"step\":1,\"name\":\"c\",$P,\"digest\":\"$crc\",\"digest_alg\":\"crc32\"}" \
	"{\"step\":1,\"name\":\"x\",$P}" \
	'{"step":1,"name":"alone","digest":"0123456789abcdef0123456789abcdef","digest_alg":"md5"}'
run_align 0 ingest --db c.db --quiet algs.atf
expect_eq "digests kept (lower case)" "$(col algs "group_concat(name||':'||digest_alg||':'||digest, ' ')")" \
	"m:md5:$md5 s:sha256:$sha c:crc32:$crc x:xxh3t64:7a93986416134615 alone:md5:0123456789abcdef0123456789abcdef"
rec alg.atf '{"step":1,"name":"t","digest":"0123456789abcdef","digest_alg":"sha1"}'
bad alg.atf "alg.atf:2: field 'digest_alg': unknown algorithm 'sha1' \\(align knows xxh3t64, md5, crc32, sha256\\)"
rec len.atf '{"step":1,"name":"t","digest":"0123456789abcdef","digest_alg":"md5"}'
bad len.atf "len.atf:2: field 'digest': '0123456789abcdef' is not a md5 digest \\(32 hex digits\\)"
rec hex.atf '{"step":1,"name":"t","digest":"0123456789abcdeg"}'
bad hex.atf "hex.atf:2: field 'digest': '0123456789abcdeg' is not a xxh3t64 digest \\(16 hex digits\\)"
rec algonly.atf '{"step":1,"name":"t","value":1,"digest_alg":"md5"}'
bad algonly.atf "algonly.atf:2: field 'digest_alg': given without 'digest'"
rec pmd5.atf "{\"step\":1,\"name\":\"t\",$P,\"digest\":\"00000000000000000000000000000000\",\"digest_alg\":\"md5\"}"
bad pmd5.atf "pmd5.atf:2: field 'digest': md5 00000000000000000000000000000000 does not match the payload \\(whose md5 is $md5\\)"
rec psha.atf "{\"step\":1,\"name\":\"t\",$P,\"digest\":\"$(printf '%064d' 0)\",\"digest_alg\":\"sha256\"}"
bad psha.atf "psha.atf:2: field 'digest': sha256 $(printf '%064d' 0) does not match the payload \\(whose sha256 is $sha\\)"
rec pcrc.atf "{\"step\":1,\"name\":\"t\",$P,\"digest\":\"00000000\",\"digest_alg\":\"crc32\"}"
bad pcrc.atf "pcrc.atf:2: field 'digest': crc32 00000000 does not match the payload \\(whose crc32 is $crc\\)"

# --- framework dtype spellings: stored under align's names ------------------------------------------
sp="float32 torch.float32 paddle.float32 VarType.FP32 bfloat16 torch.bfloat16 paddle.bfloat16 float16 half float64 double float8_e4m3fn torch.float8_e5m2 int64 torch.int64 paddle.int32 bool torch.bool"
lines=()
for d in $sp; do lines+=("{\"step\":1,\"name\":\"$d\",\"dtype\":\"$d\",\"bits\":\"0x0\"}"); done
rec dtypes.atf "${lines[@]}"
run_align 0 ingest --db c.db --quiet dtypes.atf
expect_eq "aliases" "$(col dtypes "group_concat(dtype, ' ')")" \
	"fp32 fp32 fp32 fp32 bf16 bf16 bf16 fp16 fp16 fp64 fp64 fp8_e4m3 fp8_e5m2 int64 int64 int32 bool bool"
rec fnuz.atf '{"step":1,"name":"t","dtype":"torch.float8_e4m3fnuz","bits":"0x0"}'
bad fnuz.atf "fnuz.atf:2: field 'dtype': unknown dtype 'torch.float8_e4m3fnuz' \\(expected one of fp64"

# --- step 0 is before the first optimizer step; keys are never negative ------------------------------
rec step0.atf '{"step":0,"name":"w","phase":"param","value":0.5}' '{"step":1,"name":"w","phase":"param","value":0.25}'
run_align 0 ingest --db c.db --quiet step0.atf
expect_eq "step 0 kept" "$(col step0 "group_concat(step, ' ')")" "0 1"
for k in step rank micro seq; do
	r="{\"name\":\"t\",\"value\":1,\"step\":1,\"$k\":-1}"
	[ "$k" = step ] && r='{"name":"t","value":1,"step":-1}'
	rec "neg$k.atf" "$r"
	bad "neg$k.atf" "neg$k.atf:2: field '$k': negative \\(-1\\)"
done
rec nostep.atf '{"name":"t","value":1}'
bad nostep.atf "nostep.atf:2: missing field 'step'"

# --- text (as printed) and digits (round(x, digits)) -------------------------------------------------
# the print's interval: its last digit ({:.6E}: 1e-5 wide), or the decimals of round(x, 5) (1e-5 wide too,
# where the text alone, 10.8, would stand for 0.1)
rec text.atf '{"step":1,"name":"p","text":"1.086875E+01"}' '{"step":1,"name":"q","text":"10.8"}' '{"step":1,"name":"r","text":"10.8","digits":5}'
run_align 0 ingest --db c.db --quiet text.atf
expect_eq "text kept with its digits and interval" "$(col text "group_concat(text||':'||digits||':'||printf('%.6f', hi-lo), ' ')")" \
	"1.086875E+01:7:0.000010 10.8:3:0.100000 10.8:3:0.000010"
rec tv.atf '{"step":1,"name":"t","text":"10.8","value":10.8}'
bad tv.atf "tv.atf:2: fields 'text' and 'value': give the value exactly \\('value'\\) or as printed \\('text'\\), not both"
rec dig.atf '{"step":1,"name":"t","value":10.8,"digits":5}'
bad dig.atf "dig.atf:2: field 'digits': needs 'text'"
rec tnan.atf '{"step":1,"name":"t","text":"ten"}'
bad tnan.atf "tnan.atf:2: field 'text': not a number: 'ten'"

# --- a record says something: a value field, or missing with the reason ------------------------------
rec miss.atf '{"step":1,"name":"loss","missing":"skipped iteration"}' '{"step":1,"name":"st","stats":{"max":1}}'
run_align 0 ingest --db c.db --quiet miss.atf
expect_eq "missing kept" "$(col miss "group_concat(coalesce(missing, stats), ' ')")" 'skipped iteration {"max":1}'
rec empty.atf '{"step":1,"name":"loss","dtype":"fp32"}'
bad empty.atf "empty.atf:2: record 'loss' has no value: give 'value', 'bits', 'text', 'digest', 'payload', 'stats' or 'head' \\(or 'missing' with the reason\\)"
rec missv.atf '{"step":1,"name":"loss","missing":"nan","value":1}'
bad missv.atf "missv.atf:2: field 'missing': the record also has 'value'"
rec stats.atf '{"step":1,"name":"t","stats":[1]}'
bad stats.atf "stats.atf:2: field 'stats': expected an object"

# --- the input/output link: call groups the records of one call, io says which side -------------------
rec link.atf '{"step":1,"name":"layers.0.mlp.in","call":"layers.0.mlp#0","io":"in","value":1}' \
	'{"step":1,"name":"layers.0.mlp.out","call":"layers.0.mlp#0","io":"out","value":2}' \
	'{"step":1,"name":"loss","value":3}'
run_align 0 ingest --db c.db --quiet link.atf
expect_eq "call/io stored" "$(col link "group_concat(coalesce(call, '-')||':'||coalesce(io, '-'), ' ')")" \
	"layers.0.mlp#0:in layers.0.mlp#0:out -:-"
expect_eq "call/io not in extra" "$(col link "count(extra)")" "0"
rec ionocall.atf '{"step":1,"name":"t","io":"in","value":1}'
bad ionocall.atf "ionocall.atf:2: field 'io': needs 'call'"
rec callnoio.atf '{"step":1,"name":"t","call":"mlp#0","value":1}'
bad callnoio.atf "callnoio.atf:2: field 'call': needs 'io'"
rec iobad.atf '{"step":1,"name":"t","call":"mlp#0","io":"input","value":1}'
bad iobad.atf "iobad.atf:2: field 'io': 'input' is not \"in\" or \"out\""
finish
