#!/usr/bin/env bash
# refs-manifest: every file under refs/ is pinned in refs/MANIFEST and matches its sha256.
. "$SRCROOT/tests/cli/lib.sh"
cd "$SRCROOT" || exit 99
grep -v '^#' refs/MANIFEST | awk -F'\t' 'NF {print $1 "  " $2}' > "$TMP/sums"
sha256sum --quiet -c "$TMP/sums" || fail "refs/MANIFEST does not match the files"
for f in $(find refs -type f ! -name MANIFEST | sort); do
	grep -q "	$f	" refs/MANIFEST || fail "'$f' is not pinned in refs/MANIFEST"
done
cd "$TMP" || exit 99
finish
