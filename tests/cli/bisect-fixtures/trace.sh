#!/usr/bin/env bash
# trace.sh: a stand-in for a training run in the bisect tests. Switches are environment variables whose
# bad value is "1". It writes an ATF trace (loss of steps 1 and 2, grad_norm of step 2) whose step-2
# loss changes by one ulp only when its --culprit condition holds, and misbehaves on purpose when asked.
# A condition is a comma list of switches that must all be bad; "!K" means K must not be bad, "K=V"
# that K has the value V (for switches whose values are names, such as the numeric-mode profiles).
#   --culprit COND        the step-2 loss is 0x40000001 instead of 0x40000000 (repeatable: when any holds)
#   --grad-culprit COND   the step-2 grad_norm is 0x3f000001 instead of 0x3f000000
#   --crash-when COND     exit 3 with a message on stderr
#   --signal-when COND    die of SIGSEGV
#   --sleep-when COND     sleep first (--sleep S seconds, default 30; for --timeout) in a child process,
#                         which then leaves a file "woke" in the trial directory (unless its group is killed)
#   --notrace-when COND   exit 0 without writing a trace
#   --garbage-when COND   write a trace that is not ATF (ingest must refuse it)
#   --ranks N --write-to DIR   write DIR/rankR.atf (relative: in the trial directory) instead of
#                         $ALIGN_TRACE, one per rank (for --trace-glob)
#   --log FILE            append one line per process (the tests count processes with it)
#   --overlap DIR         note how many trials run at once: a file per process in DIR for 0.2 s, the
#                         count seen appended to DIR.count
set -u
culprit="" grad="" crash="" signal="" sleepw="" sleeps=30 notrace="" garbage="" log="" overlap="" ranks=1 writeto=""
while [ $# -gt 0 ]; do
	case $1 in
	--culprit) culprit+="${culprit:+ }$2" ;;
	--grad-culprit) grad=$2 ;;
	--crash-when) crash=$2 ;;
	--signal-when) signal=$2 ;;
	--sleep-when) sleepw=$2 ;;
	--sleep) sleeps=$2 ;;
	--notrace-when) notrace=$2 ;;
	--garbage-when) garbage=$2 ;;
	--log) log=$2 ;;
	--overlap) overlap=$2 ;;
	--ranks) ranks=$2 ;;
	--write-to) writeto=$2 ;;
	*) echo "trace.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift 2
done
holds() { # holds COND: every switch named is bad, every !switch is not (an empty condition never holds)
	[ -n "$1" ] || return 1
	local k
	IFS=, read -ra ks <<<"$1"
	for k in "${ks[@]}"; do
		if [ "${k#*=}" != "$k" ]; then
			local name=${k%%=*}
			[ "${!name:-}" = "${k#*=}" ] || return 1
		elif [ "${k#!}" != "$k" ]; then
			k=${k#!}
			[ "${!k:-}" != 1 ] || return 1
		else
			[ "${!k:-}" = 1 ] || return 1
		fi
	done
	return 0
}
[ -n "$log" ] && echo "pid $$ in ${ALIGN_TRIAL_DIR:-?}" >>"$log"
[ "$PWD" = "${ALIGN_TRIAL_DIR:-}" ] || { echo "trace.sh: not run in \$ALIGN_TRIAL_DIR" >&2; exit 4; }
if [ -n "$overlap" ]; then
	mkdir -p "$overlap"
	touch "$overlap/run.$$"
	sleep 0.2
	ls "$overlap" | wc -l >>"$overlap.count"
	rm -f "$overlap/run.$$"
fi
if holds "$crash"; then echo "trace.sh: planted crash" >&2; exit 3; fi
if holds "$signal"; then kill -SEGV $$; fi
# the sleeper is a child: only killing the whole process group stops it from leaving "woke"
if holds "$sleepw"; then (sleep "$sleeps" && touch woke) & wait; fi
if holds "$notrace"; then exit 0; fi
if holds "$garbage"; then echo '{"align_trace":1}' >"$ALIGN_TRACE"; echo 'garbage here' >>"$ALIGN_TRACE"; exit 0; fi
loss2=0x40000000 gn=0x3f000000
for c in $culprit; do if holds "$c"; then loss2=0x40000001; fi; done
if holds "$grad"; then gn=0x3f000001; fi
write() { # write FILE RANK
	cat >"$1" <<T
{"align_trace":1,"run":"fixture","framework":"align","rank":$2,"world_size":$ranks}
{"step":1,"micro":0,"seq":0,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x3f800000"}
{"step":2,"micro":0,"seq":1,"name":"loss","phase":"loss","dtype":"fp32","bits":"$loss2"}
{"step":2,"micro":0,"seq":2,"name":"grad_norm","phase":"grad","dtype":"fp32","bits":"$gn"}
T
}
if [ -z "$writeto" ]; then
	write "$ALIGN_TRACE" 0
else
	mkdir -p "$writeto"
	for ((r = 0; r < ranks; r++)); do write "$writeto/rank$r.atf" "$r"; done
fi
