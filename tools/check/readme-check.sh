#!/usr/bin/env bash
# readme-check.sh: the commands of README.md and of docs/ work as written on
# a fresh clone.
#
# It clones this repository into a temporary folder and runs there, each
# command as written and in order:
#   1. every sh block of README.md: first "Set up" (all but "go test ./...",
#      which CI runs on its own; README_CHECK_TESTS=1 runs it too), then the
#      tour and the rest;
#   2. every sh block of each page under docs/ (in path order), each page
#      from the state Set up leaves: the clone with ./memunet built, nothing
#      else (git clean between pages), since a page is read on its own.
# A block is skipped where the line before its opening fence is
#   <!-- readme-check: not run: REASON -->
# and a skip must give its reason (a GPU, MPI, a minute-long fuzzer, a file
# of the reader's own). A command is one line, or lines joined by a
# trailing backslash; comment and blank lines are dropped. Any command that
# fails stops the check, naming the page and the command; so does a page
# whose commands leave a file git does not ignore (git status --porcelain
# not empty: what the docs' commands write belongs under runs/).
#
# usage: tools/check/readme-check.sh [REPO]   (default: this checkout's repository)
set -euo pipefail
repo="$(cd "${1:-$(dirname "$0")/../..}" && git rev-parse --show-toplevel)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone --quiet "$repo" "$work/clone"
cd "$work/clone"

# commands FILE: the commands of FILE's sh blocks that are not skipped, one
# a line (continuations joined). A skip without a reason is an error.
commands() {
	awk -v file="$1" '
		/^ *```sh$/ {
			if (prev ~ /^ *<!-- readme-check: not run/) {
				if (prev !~ /^ *<!-- readme-check: not run: [^ ].*-->$/) {
					print "readme-check: " file ": a skipped block without a reason: " prev > "/dev/stderr"
					exit 2
				}
				skip = 1
			}
			in_block = 1; next
		}
		in_block && /^ *```$/ { in_block = 0; skip = 0; next }
		in_block && !skip {
			line = $0
			sub(/^ +/, "", line)
			if (cont != "") { line = cont " " line; cont = "" }
			if (line ~ /\\$/) { cont = substr(line, 1, length(line) - 1); next }
			if (line !~ /^#/ && line ~ /[^ ]/) print line
		}
		NF { prev = $0 }
	' "$1"
}

# run_each PAGE: runs the commands on stdin, one a line, in the clone.
run_each() {
	local page=$1 n=0
	while IFS= read -r line; do
		n=$((n + 1))
		echo "readme-check: $page: \$ $line"
		if ! bash -c "set -o pipefail; $line" </dev/null >"$work/out" 2>&1; then
			tail -n 20 "$work/out" >&2
			echo "readme-check: FAILED: $page: $line" >&2
			exit 1
		fi
		tail -n 2 "$work/out"
	done
	echo "$n" >"$work/count"
}

# clean PAGE: fails unless the clone is as git left it but for ignored
# files, naming what PAGE's commands left.
clean() {
	local left
	left="$(git status --porcelain)"
	if [ -n "$left" ]; then
		echo "$left" >&2
		echo "readme-check: FAILED: $1: its commands left the files above, which git does not ignore; write them under runs/" >&2
		exit 1
	fi
}

start=$SECONDS
readme="$(commands README.md)"
if [ "${README_CHECK_TESTS:-0}" != 1 ]; then
	readme="$(grep -v '^go test ./\.\.\.$' <<<"$readme")"
fi
grep -q '^go build -o memunet ./cmd/memunet$' <<<"$readme" || {
	echo "readme-check: README.md's Set up does not build ./memunet" >&2
	exit 1
}
run_each README.md <<<"$readme"
clean README.md
[ "$(cat "$work/count")" -gt 0 ] || { echo "readme-check: README.md: no commands found" >&2; exit 1; }
pages=0
while IFS= read -r page; do
	cmds="$(commands "$page")"
	[ -n "$cmds" ] || continue
	# The state Set up leaves: the clone and ./memunet, nothing a page made.
	git clean -ffdxq -e /memunet
	run_each "$page" <<<"$cmds"
	clean "$page"
	pages=$((pages + 1))
done < <(git ls-files 'docs/*.md' 'docs/**/*.md' | sort -u)
[ "$pages" -gt 0 ] || { echo "readme-check: no docs/ page has commands" >&2; exit 1; }
echo "readme-check: every command ran as written (README.md and $pages docs/ pages, $((SECONDS - start)) s)"
