#!/usr/bin/env bash
# readme-check.sh: README's commands work as written on a fresh clone.
#
# It clones this repository into a temporary folder, runs the commands of
# README's "Set up" block there (all but "go test ./...", which CI runs on
# its own; README_CHECK_TESTS=1 runs it too), then every command of the
# first sh block of "## Commands", in order, each as written. Any command
# that fails stops the check, naming it.
#
# usage: tools/check/readme-check.sh [REPO]   (default: this checkout's repository)
set -euo pipefail
repo="$(cd "${1:-$(dirname "$0")/../..}" && git rev-parse --show-toplevel)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone --quiet "$repo" "$work/clone"
cd "$work/clone"

# block HEADING: the commands of the first sh block after "## HEADING",
# one a line (comments and blank lines dropped).
block() {
	awk -v h="## $1" '
		$0 == h { in_section = 1; next }
		in_section && /^## / { exit }
		in_section && /^```sh$/ { in_block = 1; next }
		in_block && /^```$/ { exit }
		in_block && !/^#/ && NF { print }
	' README.md
}

run_each() {
	local n=0
	while IFS= read -r line; do
		n=$((n + 1))
		echo "readme-check: \$ $line"
		if ! bash -c "set -o pipefail; $line" </dev/null >"$work/out" 2>&1; then
			tail -n 20 "$work/out" >&2
			echo "readme-check: FAILED: $line" >&2
			exit 1
		fi
		tail -n 2 "$work/out"
	done
	[ "$n" -gt 0 ] || { echo "readme-check: no commands found" >&2; exit 1; }
}

setup="$(block 'Set up')"
if [ "${README_CHECK_TESTS:-0}" != 1 ]; then
	setup="$(grep -v '^go test ./\.\.\.$' <<<"$setup")"
fi
run_each <<<"$setup"
run_each <<<"$(block 'Commands')"
echo "readme-check: every command ran as written"
