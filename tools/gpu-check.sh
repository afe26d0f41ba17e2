#!/usr/bin/env bash
# memunet's device check: the CUDA backend on a real GPU, every variant
# measured, in one JSON.
#
#   tools/gpu-check.sh build          here (Go 1.26, the CUDA headers: README, GPU):
#                                     bin/memunet-gpu and bin/cuda-backend.test
#   tools/gpu-check.sh run [OUT]      on the GPU machine (no Go needed), from the
#                                     repository root: writes OUT/gpu-check.json
#                                     (default OUT: gpu-check) and the logs beside it
#
# run does, each step under a time limit, going on after a failure:
#   1. nvidia-smi's view of the GPU;
#   2. the backend conformance suite on cuda:0 (every kernel against float64
#      references: bin/cuda-backend.test);
#   3. memunet compare on the seed UNet (base 16, depth 4, batch 4) at 128x128
#      and 256x256, variants baseline, checkpoint, fp16, bf16, accum4, all and
#      offload: step time, pool peaks, the device's own peak and context
#      overhead, the bytes offloaded to pinned host memory; and at the
#      first size with memory.allocator: caching (its pool maps 2 MiB pages
#      where the GPU has virtual memory management: pages moved, step time);
#   4. the quickstart config trained for TRAIN_STEPS on cuda and on the CPU:
#      the final loss and val mIoU of each (does the loss fall as on the CPU?);
#   5. where python3 has torch with CUDA: tools/pytorch_unet.py for the same
#      sizes and variants (torch.cuda.max_memory_allocated and step time).
#
# Settings (environment): DEVICE (cuda; "cpu" with SMOKE=1 checks this script
# on any machine), SIZES ("128 256"), STEPS (5), TRAIN_STEPS (200), BIN (bin).
set -uo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
mode=${1:-}
case "$mode" in
build)
	mkdir -p "$BIN"
	go build -tags gpu -o "$BIN/memunet-gpu" ./cmd/memunet &&
		go test -c -tags gpu -o "$BIN/cuda-backend.test" ./backend/cuda/driverapi &&
		echo "built $BIN/memunet-gpu and $BIN/cuda-backend.test; carry them with the tree to the GPU machine and run: tools/gpu-check.sh run"
	exit $?
	;;
run) ;;
*)
	echo "usage: tools/gpu-check.sh build | run [OUT]" >&2
	exit 2
	;;
esac

OUT=${2:-gpu-check}
DEVICE=${DEVICE:-cuda}
SIZES=${SIZES:-128 256}
STEPS=${STEPS:-5}
TRAIN_STEPS=${TRAIN_STEPS:-200}
VARIANTS=baseline,checkpoint,fp16,bf16,accum4,all,offload
mkdir -p "$OUT"
memunet=$BIN/memunet-gpu
if [ "${SMOKE:-}" = 1 ]; then
	memunet=${MEMUNET:-$BIN/memunet}
fi

# json_string prints its argument as a JSON string.
json_string() {
	local s=${1//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\t'/ }
	s=${s//$'\n'/\\n}
	printf '"%s"' "$s"
}
# json_file prints a JSON file's contents, or null.
json_file() { if [ -s "$1" ]; then cat "$1"; else printf null; fi; }

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# 1. The GPU.
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)
echo "gpu: $gpu"

# 2. Conformance.
conformance=skipped
if [ "$DEVICE" = cuda ]; then
	if timeout 300 "$BIN/cuda-backend.test" -test.run TestConformance -test.v >"$OUT/conformance.log" 2>&1; then
		conformance=passed
	else
		conformance=failed
	fi
	echo "conformance: $conformance ($(grep -c -- '--- FAIL' "$OUT/conformance.log") failures; $OUT/conformance.log)"
fi

# 3. compare per size.
for size in $SIZES; do
	echo "compare ${size}x${size} ..."
	timeout 420 "$memunet" compare --config configs/baseline.yaml --device "$DEVICE" --steps "$STEPS" --variants "$VARIANTS" \
		--set model.base=16 --set model.depth=4 --set train.batch_size=4 --set data.size="$size" --set data.count=64 \
		--out "$OUT/compare-$size" >"$OUT/compare-$size.log" 2>&1
	echo "  exit $? ($OUT/compare-$size.log)"
done
size=${SIZES%% *}
echo "compare ${size}x${size}, caching allocator ..."
timeout 300 "$memunet" compare --config configs/baseline.yaml --device "$DEVICE" --steps "$STEPS" --variants baseline,checkpoint,all \
	--set model.base=16 --set model.depth=4 --set train.batch_size=4 --set data.size="$size" --set data.count=64 \
	--set memory.allocator=caching --out "$OUT/compare-caching" >"$OUT/compare-caching.log" 2>&1
echo "  exit $? ($OUT/compare-caching.log)"

# 4. Training: the loss on the GPU and on the CPU.
for dev in "$DEVICE" cpu; do
	echo "train quickstart on $dev ..."
	timeout 300 "$memunet" train --config configs/quickstart.yaml --device "$dev" --force --out "$OUT/train-$dev" \
		--set train.steps="$TRAIN_STEPS" --set train.val_every="$TRAIN_STEPS" --set output.progress=plain \
		>"$OUT/train-$dev.log" 2>&1
	echo "  exit $? ($OUT/train-$dev.log)"
done

# 5. PyTorch on the same GPU.
pytorch=false
if [ "$DEVICE" = cuda ] && python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
	pytorch=true
	: >"$OUT/pytorch.jsonl"
	for size in $SIZES; do
		for v in baseline:"" checkpoint:"--checkpoint" fp16:"--precision fp16" bf16:"--precision bf16" \
			accum4:"--accumulate 4" all:"--checkpoint --precision fp16 --accumulate 4" offload:"--checkpoint --offload"; do
			name=${v%%:*}
			# shellcheck disable=SC2086
			line=$(timeout 120 python3 tools/pytorch_unet.py --device cuda --base 16 --depth 4 --batch 4 --size "$size" \
				--classes 4 --steps "$STEPS" ${v#*:} 2>>"$OUT/pytorch.log" | tail -1)
			[ -n "$line" ] && echo "{\"variant\": \"$name\", \"size\": $size, \"result\": $line}" >>"$OUT/pytorch.jsonl"
		done
	done
fi

# One JSON.
{
	echo "{"
	echo "  \"started\": \"$started\", \"device\": \"$DEVICE\", \"gpu\": $(json_string "$gpu"),"
	echo "  \"conformance\": \"$conformance\","
	echo "  \"compare\": {"
	sep=""
	for size in $SIZES; do
		printf '%s    "%s": ' "$sep" "$size"
		json_file "$OUT/compare-$size/compare.json"
		sep=$',\n'
	done
	echo
	echo "  },"
	printf '  "compare_caching": '
	json_file "$OUT/compare-caching/compare.json"
	echo ","
	echo "  \"train\": {"
	printf '    "%s": ' "$DEVICE"
	json_file "$OUT/train-$DEVICE/summary.json"
	printf ',\n    "cpu": '
	json_file "$OUT/train-cpu/summary.json"
	echo
	echo "  },"
	printf '  "pytorch": '
	if [ "$pytorch" = true ] && [ -s "$OUT/pytorch.jsonl" ]; then
		echo "["
		sed '$!s/$/,/' "$OUT/pytorch.jsonl"
		echo "  ]"
	else
		echo "null"
	fi
	echo "}"
} >"$OUT/gpu-check.json"
echo "wrote $OUT/gpu-check.json"
