#!/usr/bin/env bash
# Is this machine's speed steady? Runs tools/bench/steadiness.go (a
# dependent multiply chain, timed in 2 ms windows) on each core in turn,
# ROUNDS times (default 5), SECS seconds each (default 0.5). On a quiet
# machine every line reads a most/least near 1; on a virtual machine whose
# host gives its cores to other guests at times, windows run several times
# slower, and memunet's steps vary with them (issue 50: a 2-core KVM guest
# whose steps varied 1.45x from process to process). Needs taskset
# (util-linux) and Go.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/steadiness" tools/bench/steadiness.go
for round in $(seq "${ROUNDS:-5}"); do
	for cpu in $(seq 0 $(($(nproc) - 1))); do
		echo "round $round, core $cpu: $(taskset -c "$cpu" "$tmp/steadiness" "${SECS:-0.5}")"
	done
done
