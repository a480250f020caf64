#!/usr/bin/env bash
# ingest-readonly.sh: a database align cannot write (read-only file, read-only directory, full disk) is
# an input error (exit 2) naming the database file, and the database stays as it was (issue 11).
# Root writes read-only files anyway: as root the ingests run without CAP_DAC_OVERRIDE (setpriv). The
# full disk is a 256 KiB tmpfs in a private mount namespace (unshare -m as root, -rm otherwise), or
# where there is none, a file size limit (ulimit -f).
source "$SRCROOT/tests/cli/lib.sh"
demo=$SRCROOT/tests/samples/atf/demo.atf
as_user=()
if [ "$(id -u)" = 0 ]; then
	as_user=(setpriv --bounding-set=-dac_override,-dac_read_search,-fowner)
fi
python3 "$SRCROOT/tests/bench/gen-trace.py" 20000 big.atf
mkdir d
run_align 0 ingest --db d/a.db --quiet "$demo"
want=$(sqlite3 d/a.db .dump | sha256sum)
ingest_as_user() { # EXPECTED_RC ARGS...: run_align without the capability to write read-only files
	local want_rc=$1
	shift
	"${as_user[@]}" "$ALIGN" "$@" >out.txt 2>err.txt
	local got=$?
	ERR_TXT=$(cat err.txt)
	[ "$got" = "$want_rc" ] || { fail "align $* exited $got, expected $want_rc; stderr: $ERR_TXT"; return 1; }
}

# --- read-only file ---------------------------------------------------------------------------------
chmod 444 d/a.db
ingest_as_user 2 ingest --db d/a.db big.atf && expect_err "^error: cannot write database 'd/a.db': the file is read-only$"
chmod 644 d/a.db
expect_eq "read-only file: unchanged" "$(sqlite3 d/a.db .dump | sha256sum)" "$want"

# --- read-only directory (the journal cannot be created) -------------------------------------------
chmod 555 d
ingest_as_user 2 ingest --db d/a.db big.atf &&
	expect_err "^error: cannot write database '.*d/a.db' to create run 'bench': .*\(the file or its directory is read-only\)$"
ingest_as_user 2 ingest --db d/new.db big.atf && expect_err "^error: cannot open database 'd/new.db': unable to open database file$"
chmod 755 d
expect_eq "read-only directory: unchanged" "$(sqlite3 d/a.db .dump | sha256sum)" "$want"
[ ! -e d/new.db ] || fail "d/new.db was created"

# --- full disk ----------------------------------------------------------------------------------------
ns=(unshare -m)
[ "$(id -u)" = 0 ] || ns=(unshare -rm)
mkdir full
if "${ns[@]}" true 2>/dev/null; then
	"${ns[@]}" bash -c 'mount -t tmpfs -o size=256k tmpfs full || exit 99
		"$1" ingest --db full/a.db --quiet "$2" || exit 98
		sqlite3 full/a.db .dump | sha256sum > before.sum
		"$1" ingest --db full/a.db big.atf 2>full.err; echo $? > full.rc
		sqlite3 full/a.db .dump | sha256sum > after.sum
		sqlite3 full/a.db "PRAGMA integrity_check" > full.check' _ "$ALIGN" "$demo"
	expect_eq "full disk: exit" "$(cat full.rc)" "2"
	grep -Eq "^error: cannot write database 'full/a.db' to (commit|create run 'bench'|.*): database or disk is full$" full.err ||
		fail "full disk: message: $(cat full.err)"
	expect_eq "full disk: unchanged" "$(cat after.sum)" "$(cat before.sum)"
	expect_eq "full disk: integrity" "$(cat full.check)" "ok"
else
	# no mount namespace here: a file size limit instead (SIGXFSZ ignored, the write fails with EFBIG,
	# which SQLite reports as an I/O error)
	echo "no private mount namespace: the full disk is 'ulimit -f' here"
	cp d/a.db f.db
	(trap '' XFSZ; ulimit -f 1024; "$ALIGN" ingest --db f.db big.atf >/dev/null 2>full.err; echo $? > full.rc)
	expect_eq "file size limit: exit" "$(cat full.rc)" "2"
	grep -Eq "^error: cannot write database '.*f.db' to .*: (disk I/O error|database or disk is full)$" full.err ||
		fail "file size limit: message: $(cat full.err)"
	expect_eq "file size limit: unchanged" "$(sqlite3 f.db .dump | sha256sum)" "$want"
fi
finish
