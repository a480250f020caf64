#!/usr/bin/env bash
# tests/probe/venv.sh: the cached virtual environment of the probe tests (torch, paddlepaddle, numpy,
# safetensors, mindstudio-probe; tests/probe/requirements.txt). Prints the environment's directory on
# stdout (its last line); progress goes to stderr. The environment lives outside the build, in
# ${XDG_CACHE_HOME:-~/.cache}/align/venv-probe-HASH (HASH of the requirements and the Python version),
# so it is installed once per machine; a lock serialises concurrent callers; an environment whose
# install did not finish is rebuilt. Exit 1 when a required package cannot be installed.
# tests/cli/msprobe-real.sh uses it too (one ~6 GB environment per machine, not two).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
req="$here/requirements.txt"
py=${PYTHON:-python3}
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || { echo "venv.sh: no $py" >&2; exit 1; }
hash=$( (cat "$req"; echo "$pyver") | sha256sum | cut -c1-12)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/align
dir="$cache/venv-probe-$hash"
mkdir -p "$cache"
exec 9>"$dir.lock"
flock 9
if [ -f "$dir/.complete" ]; then
	echo "$dir"
	exit 0
fi
rm -rf "$dir"
echo "venv.sh: creating $dir (python $pyver)" >&2
"$py" -m venv "$dir" || { echo "venv.sh: python3 -m venv failed" >&2; exit 1; }
"$dir/bin/pip" install -q --upgrade pip >&2 || true
start=$(date +%s)
while IFS= read -r line; do
	line=${line%%#*}
	pkg=$(echo $line)
	[ -n "$pkg" ] || continue
	optional=0
	grep -Eq "^$pkg[[:space:]]+# optional" "$req" && optional=1
	echo "venv.sh: installing $pkg ($(($(date +%s) - start)) s so far)" >&2
	# pip's own lines (Collecting, Downloading NAME (SIZE)) are the progress while large wheels come in
	if ! "$dir/bin/pip" install --progress-bar off "$pkg" 2>&1 | grep -E --line-buffered '^(Collecting|Downloading|Successfully|ERROR)' >&2; then
		:
	fi
	if ! "$dir/bin/pip" show -q "${pkg%%[=<>!~]*}" >/dev/null 2>&1; then # show takes a name, not a pin
		if [ $optional = 1 ]; then
			echo "venv.sh: optional $pkg did not install; going on without it" >&2
		else
			echo "venv.sh: $pkg did not install" >&2
			exit 1
		fi
	fi
done <"$req"
touch "$dir/.complete"
echo "venv.sh: ready in $(($(date +%s) - start)) s" >&2
echo "$dir"
