#!/usr/bin/env bash
# observer.sh FRAMEWORK: the probe has no observer effect in FRAMEWORK (torch or paddle), fp32 and bf16
# (observer.py: every output, loss, gradient and updated weight bitwise equal with and without the
# probe; the trace's digests are the unprobed run's bytes; with dedup=True the same trace, each digest its
# payload's). Skips (77) only when the frameworks cannot be installed.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
fw=${1:?usage: observer.sh torch|paddle}
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
for dt in fp32 bf16; do
	if "$PY" "$SRCROOT/tests/probe/observer.py" --framework "$fw" --dtype $dt --out tr >obs.txt 2>err.txt; then
		ok "$(grep -v '^trace' obs.txt | tail -1); $(grep '^trace' obs.txt)"
	else
		fail "$fw $dt: $(cat obs.txt) $(grep -v -i warn err.txt | tail -5)"
	fi
done
# the same comparison with msprobe's md5 statistics in place of the probe: printed, not judged (README
# quotes it); torch only (msprobe has no Paddle support), where mindstudio-probe installed
if [ "$fw" = torch ] && "$PY" -c "import msprobe" 2>/dev/null; then
	for lv in L0 L1; do
		"$PY" "$SRCROOT/tests/probe/observer.py" --framework torch --dtype fp32 --out ms-$lv --msprobe $lv 2>/dev/null |
			grep -E '^(msprobe|  )'
	done
fi
[ "$FAILS" = 0 ]
