#!/usr/bin/env bash
# ingest-limits: a file too large for its format's reader (a whole-file format over READER_MAX_SLURP,
# 2 GiB) fails cleanly: exit 2, one message naming the file, the database unchanged, and nothing
# hashed or parsed first (the size is checked before the dedup hash and the transaction). The large
# file is sparse (truncate), so the test costs no disk and no reading.
. "$SRCROOT/tests/cli/lib.sh"

cat > small.json <<'J'
{"lm loss": {"start_step": 1, "end_step": 2, "step_interval": 1, "values": {"1": 10.5, "2": 10.25}}}
J
run_align 0 ingest --db a.db --as g small.json && expect_out "2 records into run 'g'"

# a golden-values JSON whose head is detectable, padded with zeros to 3 GiB
printf '{"lm loss": {"start_step": 1, "end_step": 1, "step_interval": 1, "values": {"1": 10.5}}}\n' > big.json
truncate -s 3G big.json 2>/dev/null || { echo "cannot make a sparse 3 GiB file here: skip"; exit 77; }

snapshot() { echo "$(sha256sum a.db | cut -d' ' -f1) $(sqlite3 a.db .dump | sha256sum | cut -d' ' -f1)"; }
before=$(snapshot)
msg="big.json: file too large to read whole \(over 2 GiB\)"

# a new run (detected format), an existing run with --append (the dedup hash would read it all), and
# the format named explicitly: each fails at once with the one message
for args in "big.json" "--as g --append big.json" "--format megatron-golden --as h big.json"; do
	# shellcheck disable=SC2086
	timeout 60 "$ALIGN" ingest --db a.db $args >out.txt 2>err.txt
	rc=$?
	expect_eq "ingest $args: exit code" "$rc" "2"
	expect_eq "ingest $args: error lines" "$(grep -c '^error: ' err.txt)" "1"
	grep -Eq "^error: $msg\$" err.txt || fail "ingest $args: stderr lacks /$msg/: $(cat err.txt)"
	[ -s out.txt ] && fail "ingest $args: printed on stdout: $(cat out.txt)"
	expect_eq "ingest $args: database unchanged" "$(snapshot)" "$before"
done

# the same file among others: the others are ingested, the exit code is still 2
cp small.json small2.json
sed -i 's/10.25/10.125/' small2.json
run_align 2 ingest --db a.db big.json small2.json && expect_err "$msg" && expect_out "small2.json: megatron-golden, 2 records"
expect_eq "runs after the mixed ingest" "$(sql a.db "SELECT group_concat(name, ',') FROM (SELECT name FROM run ORDER BY name)")" "g,small2"
finish
