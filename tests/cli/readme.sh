#!/usr/bin/env bash
# readme: the README's workflow block is the real output of the commands it shows (run from the
# repository root on the bundled logs), and its bisect demo finds the culprits it names.
. "$SRCROOT/tests/cli/lib.sh"
block=$(awk '/<!-- demo:begin -->/{f=1;next}/<!-- demo:end -->/{f=0}f' "$SRCROOT/README.md" |
	awk '/^```console/{f=1;next}/^```/{f=0}f')
[ -n "$block" ] || fail "no console block between the demo markers"
cd "$SRCROOT" || exit 99
db="$TMP/demo.db"
actual=$(while IFS= read -r line; do
	case "$line" in
	'$ align '*)
		echo "$line"
		cmd=${line#\$ align }
		# shellcheck disable=SC2086
		"$ALIGN" ${cmd//demo.db/$db} 2>/dev/null
		;;
	esac
done <<<"$block")
cd "$TMP" || exit 99
if [ "$actual" != "$block" ]; then
	fail "README workflow block differs from the programs' output:"
	diff <(echo "$block") <(echo "$actual") | head -30
fi
# the bisect demo as README shows it
cmd=$(grep -o 'align bisect --good profile:megatron --bad profile:paddle -- align run mhc --steps 3' "$SRCROOT/README.md" | head -1)
[ -n "$cmd" ] || fail "README lacks the bisect demo command"
PATH=$(dirname "$ALIGN"):$PATH $cmd > bisect.txt 2>/dev/null
rc=$?
expect_eq "bisect demo exit" "$rc" "0"
for culprit in $(awk '/<!-- bisect:begin -->/{f=1;next}/<!-- bisect:end -->/{f=0}f' "$SRCROOT/README.md" | grep -o '^  ALIGN_[A-Z_]*=[a-z0-9]*'); do
	grep -q "^  $culprit " bisect.txt || fail "bisect demo did not find $culprit"
done
finish
