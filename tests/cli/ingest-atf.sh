#!/usr/bin/env bash
# ingest-atf: the align trace v1: header, scalars with exact bits, tensors with payload and digest,
# unknown fields kept, and every kind of bad input (message, exit 2, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"

cat > good.atf <<'T'
{"align_trace":1,"run":"demo","framework":"align","rank":0,"world_size":1,"env":{"ALIGN_SWIGLU_ROUNDING":"one"}}
{"rank":0,"step":1,"micro":0,"seq":0,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x412de666"}
{"rank":0,"step":1,"micro":0,"seq":1,"name":"x","phase":"fwd","dtype":"fp32","shape":[2],"payload":"AACAPwAAAEA=","custom":{"k":1}}
{"rank":0,"step":2,"micro":0,"seq":2,"name":"loss","phase":"loss","value":"nan"}
T
# the header's run names the run (no --as), its framework fills the run's framework column
run_align 0 ingest --db a.db good.atf && expect_out "3 records into run 'demo'"
expect_eq "records" "$(db_count a.db)" "1 1 3"
# the payload [1.0, 2.0] as fp32 little-endian hashes to the xxh3t64 tree digest
expect_eq "digest" "$(sql a.db "SELECT digest_alg||':'||length(digest) FROM record WHERE name='x'")" "xxh3t64:16"
expect_eq "extra kept" "$(sql a.db "SELECT extra FROM record WHERE name='x'")" '{"custom":{"k":1}}'
expect_eq "bits" "$(sql a.db "SELECT printf('%x', bits) FROM record WHERE name='loss' AND step=1")" "412de666"
expect_eq "header" "$(sql a.db "SELECT json_extract(header,'$.env.ALIGN_SWIGLU_ROUNDING') FROM run")" "one"

# re-ingesting identical content (even gzip-compressed) into the same run is a no-op that says so
gzip -k good.atf
run_align 0 ingest --db a.db good.atf.gz && expect_out "already ingested into run 'demo' \(sha256 [0-9a-f]{16}, as 'good.atf'\): nothing to do"
expect_eq "no-op" "$(db_count a.db)" "1 1 3"

bad() { # bad NAME PATTERN: ingest NAME must fail with exit 2, PATTERN on stderr, database unchanged
	local before
	before=$(db_count a.db)
	run_align 2 ingest --db a.db --as "bad-$1" "$1" && expect_err "$2"
	expect_eq "unchanged after $1" "$(db_count a.db)" "$before"
}
printf '{"align_trace":2,"run":"x"}\n' > v2.atf
bad v2.atf "v2.atf:1: unsupported ATF version 2"
printf '{"align_trace":1}\n{"step":1,"name":"a","dtype":"fp33","bits":"0x0"}\n' > dtype.atf
bad dtype.atf "dtype.atf:2: field 'dtype': unknown dtype 'fp33'"
printf '{"align_trace":1}\n{"step":1,"name":"a","dtype":"fp32","shape":[3],"payload":"AACAPwAAAEA="}\n' > shape.atf
bad shape.atf "shape.atf:2: field 'payload': 8 bytes, but dtype and shape give 12"
printf '{"align_trace":1}\n{"step":1,"name":"a","dtype":"fp32","shape":[2],"payload":"AACAPwAAAEA=","digest":"0000000000000000"}\n' > dig.atf
bad dig.atf "dig.atf:2: field 'digest': xxh3t64 0000000000000000 does not match the payload \\(whose xxh3t64 is 7a93986416134615\\)"
printf '{"align_trace":1}\n{"step":1,"name":"a","seq":0,"value":1}\n{"step":1,"name":"b","seq":0,"value":2}\n' > dup.atf
bad dup.atf "dup.atf:3: duplicate record: rank 0 seq 0"
printf '{"align_trace":1}\n{"step":1,"name":"a","value":1}\n{"step":1,"name":' > trunc.atf
run_align 0 ingest --db a.db trunc.atf && expect_err "trunc.atf:3: last line is not terminated"
expect_eq "truncated keeps the rest" "$(sql a.db "SELECT count(*) FROM record JOIN run ON run.id=run_id WHERE run.name='trunc'")" "1"
printf '{"align_trace":1}\n{"step":1,"name":"a","value":1}\ngarbage here\n' > garbage.atf
bad garbage.atf "garbage.atf:3: not a JSON object"
head -c 3000 /dev/urandom > random.bin
bad random.bin "random.bin"
# a record carries its payload on its line: lines up to 256 MiB (a 1.5 MiB payload of 393216 fp32 zeros
# is a 2 MiB line, accepted with its digest checked); a longer line is refused
python3 - <<'PY'
import base64, json
raw = bytes(4 * 393216)
with open("bigpay.atf", "w") as f:
    f.write('{"align_trace":1,"run":"bigpay"}\n')
    f.write(json.dumps({"step": 1, "name": "w", "dtype": "fp32", "shape": [393216],
                        "payload": base64.b64encode(raw).decode()}) + "\n")
PY
run_align 0 ingest --db big.db bigpay.atf && expect_out "bigpay.atf: atf, 1 records into run 'bigpay'"
expect_eq "payload kept, shape" "$(sqlite3 big.db "SELECT length(payload) > 0, shape, digest_alg FROM record")" "1|[393216]|xxh3t64"
{ printf '{"align_trace":1}\n{"step":1,"name":"'; head -c 270000000 /dev/zero | tr '\0' a; printf '"}\n'; } | gzip -1 > huge.atf.gz
bad huge.atf.gz "huge.atf.gz:2: line longer than 256 MiB"
gzip -c good.atf | head -c 60 > cut.atf.gz
bad cut.atf.gz "cut.atf.gz: truncated gzip file"
{ gzip -c good.atf | head -c 30; head -c 200 /dev/urandom; } > corrupt.atf.gz
bad corrupt.atf.gz "corrupt.atf.gz: (corrupt gzip data|truncated gzip)"
printf '{"align_trace":1}\n{"step":1,"name":"a","value":"zzz"}\n' > nan.atf
bad nan.atf "nan.atf:2: field 'value': not a number: 'zzz'"
# a second run under an existing name is refused, not merged
printf '{"align_trace":1}\n{"step":1,"name":"a","value":1}\n' > other.atf
run_align 2 ingest --db a.db --as demo other.atf && expect_err "run 'demo' already exists"
# a database that is not align's is refused and not modified
sqlite3 foreign.db "CREATE TABLE t(x); INSERT INTO t VALUES (1)"
sum_before=$(sha256sum foreign.db)
run_align 2 ingest --db foreign.db good.atf && expect_err "'foreign.db' is not an align database"
expect_eq "foreign db untouched" "$(sha256sum foreign.db)" "$sum_before"
echo "not a database at all, just text that is long enough to not be a header of sqlite" > text.db
run_align 2 ingest --db text.db good.atf && expect_err "not (an align )?a? ?database"
# a database locked by another writer (longer than the 5 s ingest once gave up after): ingest waits,
# says so, and lands when the writer is done (issue 11; tests/cli/ingest-concurrent.sh has more)
( sqlite3 a.db "BEGIN IMMEDIATE; SELECT 1;" ".shell sleep 8" "COMMIT;" >/dev/null 2>&1 & )
sleep 1
run_align 0 ingest --db a.db --as locked other.atf && expect_err "^waiting for 'a.db': another process is writing it"
expect_eq "landed after the lock" "$(sqlite3 -cmd '.timeout 20000' a.db "SELECT count(*) FROM run")" "3"
finish
