#!/usr/bin/env bash
# test-lists.sh: the explicit test lists agree with the file system (git's t/ discipline). Fails when a
# file that looks like a test is not registered in its folder's meson.build, or when a meson.build names
# a test file that does not exist:
#   tests/cli      every *.sh except lib.sh (helper folders such as bisect-fixtures/ are not scanned)
#                  is a row of cli_tests (its name without .sh) or a sharded test's files('X.sh'), and
#                  every row has its .sh;
#   tests/kernels, tests/unit   every test-*.c is named in meson.build;
#   tests/gpu      every test-*.cu and bench-*.cu is named in meson.build;
# and in all four, every '*.c', '*.cu', '*.sh', '*.py' that meson.build names exists.
# Usage: SRCROOT=/path/to/align tests/cli/test-lists.sh   (meson test sets SRCROOT)
set -u
root=${SRCROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bad=0
fail() {
	echo "error: $*" >&2
	bad=1
}
# the quoted words of a meson.build, comments removed, one per line
words() {
	sed 's/#.*//' "$1" | grep -o "'[^']*'" | tr -d "'"
}
for d in cli kernels unit gpu; do
	mb="$root/tests/$d/meson.build"
	[ -f "$mb" ] || { fail "tests/$d/meson.build is missing"; continue; }
	listed=$(words "$mb")
	# files the meson.build names must exist
	for f in $(printf '%s\n' "$listed" | grep -E '^[^./][^/]*\.(c|cu|sh|py)$'); do
		[ -f "$root/tests/$d/$f" ] || fail "tests/$d/meson.build names '$f', which does not exist"
	done
	case $d in
	cli)
		rows=$(sed -n '/^cli_tests = \[/,/^\]/p' "$mb" | sed 's/#.*//' | grep -o "'[^']*'" | tr -d "'")
		for t in $rows; do
			[ -f "$root/tests/cli/$t.sh" ] || fail "tests/cli/meson.build lists '$t', but tests/cli/$t.sh does not exist"
		done
		for f in "$root"/tests/cli/*.sh; do
			t=$(basename "$f" .sh)
			[ "$t" = lib ] && continue
			# a sharded test (explain-planted-1..N) names its script through files('X.sh') instead
			printf '%s\n' "$rows" | grep -qx -- "$t" || grep -q "files('$t.sh')" "$mb" ||
				fail "tests/cli/$t.sh is not registered in tests/cli/meson.build (cli_tests)"
		done
		;;
	kernels | unit | gpu)
		pats='test-*.c'
		[ $d = gpu ] && pats='test-*.cu bench-*.cu'
		for p in $pats; do
			for f in "$root/tests/$d"/$p; do
				[ -e "$f" ] || continue
				b=$(basename "$f")
				printf '%s\n' "$listed" | grep -qx -- "$b" ||
					fail "tests/$d/$b is not registered in tests/$d/meson.build"
			done
		done
		;;
	esac
done
[ $bad = 0 ] && echo "test lists: tests/{cli,kernels,unit,gpu}/meson.build agree with the files"
exit $bad
