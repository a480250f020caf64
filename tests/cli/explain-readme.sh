#!/usr/bin/env bash
# explain-readme: the README's explain example (between <!-- explain:begin --> and <!-- explain:end -->)
# is the real output of the commands it shows, run in a fresh directory.
. "$SRCROOT/tests/cli/lib.sh"
block=$(awk '/<!-- explain:begin -->/{f=1;next}/<!-- explain:end -->/{f=0}f' "$SRCROOT/README.md" |
	awk '/^```console/{f=1;next}/^```/{f=0}f')
[ -n "$block" ] || fail "no console block between the explain markers"
grep -q '^\$ align explain ' <<<"$block" || fail "the block runs no align explain"
actual=$(while IFS= read -r line; do
	case "$line" in
	'$ align '*)
		echo "$line"
		cmd=${line#\$ align }
		# shellcheck disable=SC2086
		"$ALIGN" $cmd 2>&1
		;;
	esac
done <<<"$block")
if [ "$actual" != "$block" ]; then
	fail "README explain block differs from the programs' output:"
	diff <(echo "$block") <(echo "$actual") | head -30
fi
finish
