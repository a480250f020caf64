#!/usr/bin/env bash
# bisect-timeout: the command hangs (sleeps 3 s) whenever S03 is bad and S05 good. Under --timeout 1
# those trials are killed with their process group and reported unusable; the culprit S05 is still
# found. The cache keeps timeouts for the same --timeout and retries them under a longer one.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

log=$PWD/procs.log
cmd=("$TRACE" --culprit S05 --sleep-when 'S03,!S05' --sleep 3 --log "$log")
start=$(date +%s%N)
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" --timeout 1 --format json --out r.json -- "${cmd[@]}"
echo "first bisect: $((($(date +%s%N) - start) / 1000000)) ms"
expect_eq "culprit" "$(culprit_of r.json)" "S05"
check_trials r.json --culprit S05 --unusable 'S03,!S05'
timeouts=$(jget r.json "len([t for t in r['trials'] if t['verdict'] == 'unusable'])")
[ "$timeouts" -gt 0 ] || fail "no trial timed out: the plant did not bite"
expect_eq "timeout reasons" "$(jget r.json "sorted({t['reason'] for t in r['trials'] if t['verdict'] == 'unusable'})")" \
	'["timed out after 1s (process group killed)"]'
expect_eq "killed promptly" "$(jget r.json "[t['index'] for t in r['trials'] if t['verdict'] == 'unusable' and not 1 <= t['duration_s'] < 2.9]")" "[]"
# the sleeping processes were killed, not left to finish: none ever wakes up to leave its mark
sleep 3.5
expect_eq "no trial woke up" "$(find .align-bisect -name woke | wc -l)" "0"

# the same --timeout: timeouts come from the cache, no process
n=$(wc -l <"$log")
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" --timeout 1 -- "${cmd[@]}" &&
	expect_out "why: timed out after 1s"
expect_eq "no new process" "$(wc -l <"$log")" "$n"

# a longer --timeout: exactly the timed-out trials run again, and now finish (same culprit)
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" --timeout 10 --format json --out r2.json -- "${cmd[@]}"
expect_eq "retried" "$(jget r2.json "r['counts']['run']")" "$timeouts"
expect_eq "culprit after retry" "$(culprit_of r2.json)" "S05"
expect_eq "none unusable now" "$(jget r2.json "r['counts']['unusable']")" "0"
check_trials r2.json --culprit S05

# one bisect at a time per command and good environment: a second one is refused, the first unharmed
"$ALIGN" bisect --db l.db --good S01=0 --bad S01=1 --format json --out first.json -- "$TRACE" --culprit S01 --sleep-when '!S01' --sleep 2 >/dev/null 2>first.err &
first=$!
sleep 0.5
run_align 2 bisect --db l.db --good S01=0 --bad S01=1 -- "$TRACE" --culprit S01 --sleep-when '!S01' --sleep 2 &&
	expect_err "another 'align bisect' of this command and good environment is running \(it holds '.*/lock'\)"
wait "$first" || fail "the first bisect failed: $(cat first.err)"
expect_eq "first bisect's culprit" "$(culprit_of first.json)" "S01"
finish
