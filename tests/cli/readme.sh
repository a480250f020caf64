#!/usr/bin/env bash
# readme: the README's workflow blocks are the real output of the commands they show (the model's
# workflow in a scratch directory, the bundled logs' from the repository root), and its bisect demo
# finds the culprits it names.
. "$SRCROOT/tests/cli/lib.sh"
# check_block MARKER DIR: the console block between <!-- MARKER:begin/end --> is the output of its
# '$ align' lines run in DIR (demo.db -> a temporary database)
check_block() {
	local block actual
	block=$(awk -v m="$1" '$0 == "<!-- " m ":begin -->" {f=1;next} $0 == "<!-- " m ":end -->" {f=0} f' "$SRCROOT/README.md" |
		awk '/^```console/{f=1;next}/^```/{f=0}f')
	[ -n "$block" ] || fail "no console block between the $1 markers"
	cd "$2" || exit 99
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
		fail "README $1 block differs from the programs' output:"
		diff <(echo "$block") <(echo "$actual") | head -30
	fi
}
# the model workflow (it writes its logs: run in a scratch directory), then the bundled logs
db="$TMP/model.db"
mkdir -p "$TMP/model" && check_block demo "$TMP/model"
db="$TMP/demo.db"
check_block logs "$SRCROOT"
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
