#!/usr/bin/env bash
# ingest-precision: what a printed number proves at ingest (README "Printed precision").
#  1. torchtitan: one run's losses rounded to 5 decimals (the writer before 2026-03-06) vs the same run's
#     float32 reprs: every step equal as printed, nothing differs, exit 0 (the rounded print was stored
#     as an exact fp64 and "differed by 1339170803 ulp of fp64").
#  2. torchtitan: a file mixing short and long decimals is read per line (interval vs exact fp32 bits).
#  3. Megatron: a loss is an fp32 only at log interval 1 (arguments print, or three lines in a row one
#     iteration apart, or iteration 1); an interval > 1 prints a Python float mean: dtype fp64, no fp32
#     bits inferred even where the digits would single one out; unknown: an interval without bits.
#  4. A print the parser calls a repr but whose value is no value of its dtype is an interval (warned).
. "$SRCROOT/tests/cli/lib.sh"

q() { sql "$1" "$2"; }
# rec DB RUN STEP NAME COLUMNS
rec() { q "$1" "SELECT $5 FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$2' AND step=$3 AND r.name='$4'"; }

# --- 1. rounded (5 decimals) vs full repr of one run ---------------------------------------------------
printf '1 8.048102378845215\n2 7.751435279846191\n3 7.032356262207031\n4 6.1526994705200195\n5 5.191473960876465\n6 4.5\n' > full.txt
# round(x, 5) of each, as the old writer printed it (4.5 is a repr with 1 decimal: read as rounded too)
printf '1 8.0481\n2 7.75144\n3 7.03236\n4 6.1527\n5 5.19147\n6 4.5\n' > rounded.txt
run_align 0 ingest --db t.db rounded.txt full.txt
expect_eq "rounded: interval, no bits" "$(rec t.db rounded 1 loss "dtype||' '||(bits IS NULL)||' '||digits||' '||printf('%.6f %.6f', lo, hi)")" "fp32 1 5 8.048095 8.048105"
expect_eq "full: exact fp32 bits" "$(rec t.db full 1 loss "dtype||' '||printf('%x', bits)||' '||(lo IS NULL)")" "fp32 4100c507 1"
expect_eq "short repr read as rounded" "$(rec t.db full 6 loss "(bits IS NULL)||' '||printf('%.6f', lo)")" "1 4.499995"
run_align 0 report --db t.db --runs rounded,full
expect_out "^totals: 0/6 bitwise-equal, 6 equal as printed$"
if grep -Eq '\bdiffer\b|first difference' out.txt; then fail "rounded vs full: something differs: $OUT_TXT"; fi
run_align 0 report --db t.db --runs rounded,full --format json --out t.json
expect_eq "json: every step equal as printed" "$(python3 -c "import json; t=json.load(open('t.json'))['totals']; print(t['compared'], t['equal_as_printed'], t['differ'], t['incomparable'])")" "6 6 0 0"

# --- 2. one file mixing short and long decimals: per line ----------------------------------------------
printf '1 8.0481\n2 7.75144\n3 7.032356262207031\n4 6.1526994705200195\n5 5.19147\n6 4.5\n' > mixed.txt
run_align 0 ingest --db t.db mixed.txt
expect_eq "mixed per line" "$(q t.db "SELECT group_concat(step||':'||(bits IS NOT NULL)||(lo IS NOT NULL), ' ') FROM (SELECT r.* FROM record r JOIN run ON run.id=r.run_id WHERE run.name='mixed' ORDER BY step)")" "1:01 2:01 3:10 4:10 5:01 6:01"
run_align 0 report --db t.db --runs mixed,full && expect_out "^totals: 2/6 bitwise-equal, 4 equal as printed$"

# --- 3. Megatron log interval ----------------------------------------------------------------------------
# the 16-decimal fork prints enough digits for exactly one float32 in each interval
args() { printf '%s\n' '------------------------ arguments ------------------------' "  log_interval .................................... $1" '  lr .............................................. 0.00015' '-------------------- end of arguments ---------------------'; }
line() { echo " iteration $(printf '%8d' "$1")/     100 | consumed samples: $(printf '%12d' $(($1 * 32))) | elapsed time per iteration (ms): 1203.4 | learning rate: 1.499212E-04 | global batch size:    32 | lm loss: $2 | loss scale: 1.0 | grad norm: 2.417 | number of skipped iterations:   0 | number of nan iterations:   0 |"; }
{ args 1; line 1 11.5952320098876953; line 2 11.3843441009521484; line 3 11.1733484268188477; } > int1.log
{ args 10; line 1 11.5952320098876953; line 10 11.3843441009521484; line 20 11.1733484268188477; } > int10.log
{ line 10 11.5952320098876953; line 20 11.3843441009521484; line 30 11.1733484268188477; } > spacing10.log
{ line 5 11.5952320098876953; line 6 11.3843441009521484; line 7 11.1733484268188477; } > spacing1.log
for f in int1 int10 spacing10 spacing1; do run_align 0 ingest --db m.db --format megatron-log "$f.log"; done
dt() { q m.db "SELECT group_concat(step||':'||coalesce(dtype,'?')||':'||(bits IS NOT NULL), ' ') FROM (SELECT r.* FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND r.name='lm loss' ORDER BY step)"; }
expect_eq "interval 1 (arguments): fp32 bits" "$(dt int1)" "1:fp32:1 2:fp32:1 3:fp32:1"
expect_eq "interval 1: the bits" "$(rec m.db int1 1 'lm loss' "printf('%x', bits)")" "41398612"
# iteration 1 under interval 10 is the first-iteration print (one iteration); 10 and 20 are means
expect_eq "interval 10 (arguments): means are fp64, no bits" "$(dt int10)" "1:fp32:1 10:fp64:0 20:fp64:0"
expect_eq "interval 10: still an interval" "$(rec m.db int10 10 'lm loss' "digits||' '||(lo IS NOT NULL)")" "18 1"
expect_eq "spacing 10: unknown, then means" "$(dt spacing10)" "10:?:0 20:fp64:0 30:fp64:0"
expect_eq "spacing 1: fp32 from the third line in a row" "$(dt spacing1)" "5:?:0 6:?:0 7:fp32:1"

# --- 4. a "repr" that is no value of its dtype ----------------------------------------------------------
# paddle mtp_K_loss is the full repr of an fp32; a short print of it is not one: an interval, warned once
P='[2026-08-20 10:15:44,512] [    INFO] - '
{ echo "${P}loss: 10.86875057, learning_rate: 0.0001499, global_step: 1, mtp_1_loss: 10.8752"
  echo "${P}loss: 10.86863899, learning_rate: 0.0001499, global_step: 2, mtp_1_loss: 10.8751"; } > workerlog.0
run_align 0 ingest --db p.db workerlog.0
expect_err "warning: workerlog.0:1: field 'mtp_1_loss': '10.8752' is not the round-trip print of an fp32 value: read as rounded at its last digit"
expect_eq "warned once" "$(grep -c 'round-trip' err.txt)" "1"
expect_eq "not a repr: interval, no bits" "$(q p.db "SELECT group_concat(dtype||':'||(bits IS NULL)||':'||printf('%.5f', lo), ' ') FROM record WHERE name='mtp_1_loss'")" "fp32:1:10.87515 fp32:1:10.87505"

finish
