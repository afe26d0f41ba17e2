#!/usr/bin/env bash
# bench-dp.sh [STEPS]: data-parallel scaling on this machine. For base 16
# (batch 4, 128x128) and base 64 (batch 2, 128x128), one rank per core: the
# median step time of one process, of 2 ranks over shared memory and of 2
# ranks over TCP loopback (--mca btl tcp,self), with 16 MiB buckets and with
# one all-reduce for all gradients (dist.bucket_mb=0); the scaling
# efficiency (each rank has the same micro-batch, so it is t1/t2) and the
# all-reduce's share of a step (summary.json's comm_ms_median).
# Needs Open MPI and builds memunet with -tags mpi. From the repository root.
set -euo pipefail
steps=${1:-40}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -tags mpi -o "$work/memunet" ./cmd/memunet
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], 0))" "$1" "$2"; }
run() { # run NAME RANKS MCA BUCKET SETS...
	local name=$1 ranks=$2 mca=$3 bucket=$4
	shift 4
	local out="$work/$name"
	if [ "$ranks" = 1 ]; then
		GOMAXPROCS=1 "$work/memunet" train --config configs/quickstart.yaml --out "$out" "$@" \
			--set train.steps="$steps" --set train.val_every=0 --set train.checkpoint_every=0 \
			--set output.progress=none --set dist.bucket_mb="$bucket" >/dev/null
	else
		# shellcheck disable=SC2086
		mpirun --allow-run-as-root --oversubscribe -np "$ranks" $mca "$work/memunet" train --config configs/quickstart.yaml \
			--out "$out" "$@" --set train.steps="$steps" --set train.val_every=0 --set train.checkpoint_every=0 \
			--set output.progress=none --set dist.bucket_mb="$bucket" >/dev/null
	fi
	echo "$(field "$out/summary.json" step_ms_median) $(field "$out/summary.json" comm_ms_median)"
}
printf '%-8s %-22s %10s %10s %11s %10s\n' model setup "step ms" "comm ms" "comm share" efficiency
for model in "16 4" "64 2"; do
	set -- $model
	base=$1 batch=$2
	sets=(--set model.base="$base" --set model.depth=4 --set data.size=128 --set train.batch_size="$batch" --set data.count=64)
	read -r t1 _ <<<"$(run "b$base-1" 1 "" 16 "${sets[@]}")"
	printf '%-8s %-22s %10.1f %10s %11s %10s\n' "base $base" "1 process" "$t1" - - -
	for setup in "shm:16" "shm:0" "tcp:16" "tcp:0"; do
		kind=${setup%%:*} bucket=${setup##*:}
		mca=""
		[ "$kind" = tcp ] && mca="--mca btl tcp,self"
		read -r t2 c2 <<<"$(run "b$base-$kind-$bucket" 2 "$mca" "$bucket" "${sets[@]}")"
		label="2 ranks $kind, "
		if [ "$bucket" = 0 ]; then label+="1 call"; else label+="${bucket} MiB"; fi
		printf '%-8s %-22s %10.1f %10.2f %10.1f%% %9.2f\n' "base $base" "$label" "$t2" "$c2" \
			"$(python3 -c "print(100*$c2/$t2)")" "$(python3 -c "print($t1/$t2)")"
	done
done
