#!/usr/bin/env bash
# mpi-kill-check.sh MEMUNET: a 2-rank run (memunet built with -tags mpi)
# whose rank 1 is killed after rank 0 wrote a checkpoint: mpirun ends the
# job with a non-zero status and a message naming the rank, and the
# checkpoint rank 0 had written still verifies (memunet eval loads it).
# Used by .ci/run; run from the repository root.
set -u
bin=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "mpi-kill-check: $*" >&2; cat "$work/log" >&2; exit 1; }

mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" train --config configs/quickstart.yaml \
	--set train.steps=100000 --set train.checkpoint_every=10 --set train.val_every=0 \
	--set output.progress=plain --out "$work/run" >"$work/log" 2>&1 &
job=$!
for _ in $(seq 1 600); do
	ls "$work"/run/checkpoints/step-* >/dev/null 2>&1 && break
	sleep 0.1
done
ls "$work"/run/checkpoints/step-* >/dev/null 2>&1 || fail "no checkpoint after 60 s"
sleep 0.5 # a few more steps, maybe a checkpoint being written
rank1=""
for pid in $(pgrep -f "$bin train"); do
	if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
		rank1=$pid
	fi
done
[ -n "$rank1" ] || fail "rank 1 not found"
kill -9 "$rank1"
wait "$job"
status=$?
[ "$status" -ne 0 ] || fail "mpirun exited 0 after rank 1 was killed"
grep -q "rank 1" "$work/log" || fail "mpirun's message does not name rank 1"
newest=$(ls -d "$work"/run/checkpoints/step-* | sort | tail -1)
"$bin" eval --checkpoint "$newest" --out "$work/eval.json" >"$work/eval.log" 2>&1 ||
	{ cat "$work/eval.log" >&2; fail "the checkpoint $newest does not load after the kill"; }
echo "mpi-kill-check: rank 1 killed: mpirun exited $status naming it; $(basename "$newest") still loads"
