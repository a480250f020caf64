#!/usr/bin/env bash
# ingest-crash.sh: align ingest killed with SIGKILL at any point leaves the database as it was (issue 11):
# PRAGMA integrity_check says ok, the run is absent, the rest is unchanged, and ingesting again (over
# the hot journal the kill left) succeeds. The trace is hundreds of MB (1.5M records, ~210 MB; 300k
# records under ASan/UBSan, ~5x slower); the kill points are how far the ingest has read the file (its
# file position, /proc/PID/fdinfo), and seconds after it read the whole file (inside the commit).
source "$SRCROOT/tests/cli/lib.sh"
records=1500000
grep -q __asan_init "$ALIGN" && records=300000
python3 "$SRCROOT/tests/bench/gen-trace.py" "$records" big.atf
run_align 0 ingest --db pristine.db --quiet "$SRCROOT/tests/samples/atf/demo.atf"
want_dump=$(sqlite3 pristine.db .dump | sha256sum)

size=$(stat -c %s big.atf)
target=$(realpath big.atf)
# pos_of PID: how far the ingest has read big.atf (its file position), or nothing once it has exited
pos_of() {
	local fd
	for fd in /proc/"$1"/fd/*; do
		if [ "$(readlink "$fd" 2>/dev/null)" = "$target" ]; then
			awk '/^pos:/ { print $2 }' /proc/"$1"/fdinfo/"${fd##*/}" 2>/dev/null
			return
		fi
	done
}
cp pristine.db c.db
killed=0 in_commit=0 hot=0
# kill points: a fraction (per mille) of the file read, or "eof+S": S seconds after the whole file was
# read (the stepsums and the commit: hundreds of MB written)
for point in 20 250 500 900 eof+0 eof+0.3 eof+1 eof+3; do
	"$ALIGN" ingest --db c.db --quiet --as big big.atf >/dev/null 2>kill.err &
	pid=$!
	case $point in
	eof+*) want=$size delay=${point#eof+} ;;
	*) want=$((size / 1000 * point)) delay=0 ;;
	esac
	while kill -0 "$pid" 2>/dev/null; do
		pos=$(pos_of "$pid")
		[ -n "$pos" ] && [ "$pos" -ge "$want" ] && break
		sleep 0.02
	done
	sleep "$delay"
	if ! kill -KILL "$pid" 2>/dev/null; then
		# finished before the kill (a late point on a fast machine): the run is there; start again from pristine
		wait "$pid" || fail "ingest (not killed, at $point) failed: $(cat kill.err)"
		echo "kill point $point: the ingest had finished"
		cp pristine.db c.db
		continue
	fi
	wait "$pid" 2>/dev/null
	killed=$((killed + 1))
	journal=0
	[ -f c.db-journal ] && journal=1 hot=$((hot + 1))
	# any reader rolls the hot journal back first; then the database is exactly as before, or (a kill
	# after COMMIT returned, while the process was ending) holds the whole run
	expect_eq "integrity after a kill at $point" "$(sql c.db "PRAGMA integrity_check")" "ok"
	if [ "$(sql c.db "SELECT count(*) FROM run WHERE name = 'big'")" = 1 ]; then
		echo "kill point $point: after the commit"
		expect_eq "the whole run after a kill at $point" "$(sql c.db "SELECT count(*) FROM record JOIN run ON run.id = record.run_id WHERE run.name = 'big'")" "$records"
		cp pristine.db c.db
		continue
	fi
	expect_eq "database unchanged after a kill at $point" "$(sqlite3 c.db .dump | sha256sum)" "$want_dump"
	case $point in eof+*) [ "$journal" = 1 ] && in_commit=$((in_commit + 1)) ;; esac
done
echo "killed $killed of 8 times, $hot with a hot journal left ($in_commit of them after the whole file was read: in the commit)"
[ "$killed" -ge 6 ] || fail "only $killed of 8 ingests were killed before they finished"
[ "$in_commit" -ge 1 ] || fail "no kill inside the commit (after the whole file was read, a hot journal left)"
# the last kill left the database as before: kill once more mid-way (a hot journal), then ingest again
"$ALIGN" ingest --db c.db --quiet --as big big.atf >/dev/null 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
	pos=$(pos_of "$pid")
	[ -n "$pos" ] && [ "$pos" -ge $((size / 2)) ] && break
	sleep 0.02
done
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
t0=$(date +%s)
run_align 0 ingest --db c.db --quiet --as big big.atf
echo "ingest of $records records ($size bytes) after the kills: $(($(date +%s) - t0)) s"
expect_eq "re-ingest: every record" "$(sql c.db "SELECT count(*) FROM record JOIN run ON run.id = record.run_id WHERE run.name = 'big'")" "$records"
expect_eq "re-ingest: integrity" "$(sql c.db "PRAGMA integrity_check")" "ok"
finish
