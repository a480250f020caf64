#!/usr/bin/env bash
# ingest-crash.sh: align ingest killed with SIGKILL at any point leaves the database as it was (issue 11):
# PRAGMA integrity_check says ok, the run is absent, the rest is unchanged, and ingesting again (over
# the hot journal the kill left) succeeds. The trace is hundreds of MB (1.5M records, ~210 MB; 300k
# records under ASan/UBSan, ~5x slower); the kill points are fractions of one full ingest's time, the
# late ones inside the commit.
source "$SRCROOT/tests/cli/lib.sh"
records=1500000
grep -q __asan_init "$ALIGN" && records=300000
python3 "$SRCROOT/tests/bench/gen-trace.py" "$records" big.atf
run_align 0 ingest --db pristine.db --quiet "$SRCROOT/tests/samples/atf/demo.atf"
want=$(sqlite3 pristine.db .dump | sha256sum)

# one full ingest (into a copy) gives the time the kill points are fractions of
cp pristine.db full.db
t0=$(date +%s%N)
run_align 0 ingest --db full.db --quiet --as big big.atf
full_ms=$((($(date +%s%N) - t0) / 1000000))
expect_eq "full ingest" "$(sql full.db "SELECT count(*) FROM record JOIN run ON run.id = record.run_id WHERE run.name = 'big'")" "$records"
rm -f full.db
echo "full ingest of $records records: ${full_ms} ms"

cp pristine.db c.db
killed=0 hot=0
for permille in 20 100 250 500 750 900 970 990; do
	"$ALIGN" ingest --db c.db --quiet --as big big.atf >/dev/null 2>kill.err &
	pid=$!
	sleep "$(awk -v ms="$full_ms" -v p="$permille" 'BEGIN { printf "%.3f", ms * p / 1000 / 1000 }')"
	if kill -KILL "$pid" 2>/dev/null; then
		wait "$pid" 2>/dev/null
		killed=$((killed + 1))
		[ -f c.db-journal ] && hot=$((hot + 1))
	else
		# finished before the kill (a slower point this time): the run is there; start again from pristine
		wait "$pid" || fail "ingest (not killed, ${permille}/1000) failed: $(cat kill.err)"
		cp pristine.db c.db
		rm -f c.db-journal
		continue
	fi
	# any reader rolls the hot journal back first; then the database is exactly as before
	expect_eq "integrity after a kill at ${permille}/1000" "$(sql c.db "PRAGMA integrity_check")" "ok"
	expect_eq "run absent after a kill at ${permille}/1000" "$(sql c.db "SELECT count(*) FROM run WHERE name = 'big'")" "0"
	expect_eq "database unchanged after a kill at ${permille}/1000" "$(sqlite3 c.db .dump | sha256sum)" "$want"
done
echo "killed $killed times, $hot of them with a hot journal left"
[ "$killed" -ge 5 ] || fail "only $killed of 8 ingests were killed before they finished"
# the last kill left the database as before: ingest again, with a fresh kill first to leave a hot journal
"$ALIGN" ingest --db c.db --quiet --as big big.atf >/dev/null 2>&1 &
pid=$!
sleep "$(awk -v ms="$full_ms" 'BEGIN { printf "%.3f", ms * 0.6 / 1000 }')"
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
run_align 0 ingest --db c.db --quiet --as big big.atf
expect_eq "re-ingest: every record" "$(sql c.db "SELECT count(*) FROM record JOIN run ON run.id = record.run_id WHERE run.name = 'big'")" "$records"
expect_eq "re-ingest: integrity" "$(sql c.db "PRAGMA integrity_check")" "ok"
finish
