#!/usr/bin/env bash
# trace.sh: a stand-in for a training run in the bisect tests. Switches are environment variables whose
# bad value is "1". It writes a two-step ATF trace to $ALIGN_TRACE whose step-2 loss changes by one ulp
# only when every switch of --culprit is bad, and misbehaves on purpose when asked to:
#   --culprit K1,K2      the loss of step 2 is 0x40000001 instead of 0x40000000 when all are bad
#   --crash-when K,...   exit 3 (with a message on stderr) when all are bad
#   --signal-when K,...  die of SIGSEGV when all are bad
#   --sleep-when K,...   sleep 30 s first when all are bad (for --timeout)
#   --notrace-when K,... exit 0 without writing a trace when all are bad
#   --log FILE           append one line per invocation (the tests count processes with it)
set -u
culprit="" crash="" signal="" sleepw="" notrace="" log=""
while [ $# -gt 0 ]; do
	case $1 in
	--culprit) culprit=$2 ;;
	--crash-when) crash=$2 ;;
	--signal-when) signal=$2 ;;
	--sleep-when) sleepw=$2 ;;
	--notrace-when) notrace=$2 ;;
	--log) log=$2 ;;
	*) echo "trace.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift 2
done
all_bad() { # all_bad K1,K2,...: every named switch is at its bad value (an empty list is never)
	[ -n "$1" ] || return 1
	local k
	IFS=, read -ra ks <<<"$1"
	for k in "${ks[@]}"; do [ "${!k:-}" = 1 ] || return 1; done
	return 0
}
[ -n "$log" ] && echo "pid $$ in ${ALIGN_TRIAL_DIR:-?}" >>"$log"
[ "$PWD" = "${ALIGN_TRIAL_DIR:-}" ] || { echo "trace.sh: not run in \$ALIGN_TRIAL_DIR" >&2; exit 4; }
if all_bad "$crash"; then echo "trace.sh: planted crash" >&2; exit 3; fi
if all_bad "$signal"; then kill -SEGV $$; fi
if all_bad "$sleepw"; then sleep 30; fi
if all_bad "$notrace"; then exit 0; fi
loss2=0x40000000
if all_bad "$culprit"; then loss2=0x40000001; fi
cat >"$ALIGN_TRACE" <<T
{"align_trace":1,"run":"fixture","framework":"align","rank":0,"world_size":1}
{"step":1,"micro":0,"seq":0,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x3f800000"}
{"step":2,"micro":0,"seq":1,"name":"loss","phase":"loss","dtype":"fp32","bits":"$loss2"}
T
