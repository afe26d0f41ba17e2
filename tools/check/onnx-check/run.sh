#!/usr/bin/env bash
# Checks `memunet export --format onnx` where users run the result: ONNX
# Runtime (the npm package onnxruntime-node, with this machine's Node.js).
# For each norm (batch, group, none) and upsampling (bilinear, transpose) it
# trains a small run on the synthetic shapes, exports it in fp32, fp16 and
# fp32 --with-normalize --with-softmax, checks each file with
# onnx.checker.check_model (Debian's python3-onnx, where installed), and
# compares ONNX Runtime's output with memunet's fp32 logits on synthetic
# images at two sizes (32, 64) and two batch sizes (1, 3):
#   fp32: max |difference| <= 1e-4 and argmax agreement >= 99.9%, or it fails;
#   fp16: the figures are printed (and gross errors fail: agreement < 95%).
#
#   tools/check/onnx-check/run.sh [WORKDIR]   (default: a temporary directory)
#   tools/check/onnx-check/run.sh --install   (only install onnxruntime-node)
#
# Exit 0: every check passed; 1: a check failed; 3: ONNX Runtime could not be
# installed (no npm registry): nothing was compared.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
install_only=0
if [ "${1:-}" = --install ]; then
	install_only=1
	shift
fi
if [ $# -gt 0 ]; then
	work="$1"
	mkdir -p "$work"
else
	work="$(mktemp -d)"
	trap 'rm -rf "$work"' EXIT
fi
cd "$root"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "onnx-check: SKIPPED: Node.js and npm are needed for onnxruntime-node" >&2
	exit 3
fi
if [ ! -d "$here/node_modules/onnxruntime-node" ]; then
	# The CPU runtime ships in the package; its install script would only
	# fetch the CUDA provider, from outside the npm registry.
	if ! (cd "$here" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --ignore-scripts --no-audit --no-fund >&2); then
		echo "onnx-check: SKIPPED: npm could not install onnxruntime-node (is the npm registry reachable?)" >&2
		exit 3
	fi
fi
if [ $install_only -eq 1 ]; then
	exit 0
fi
checker=""
if /usr/bin/python3 -c "import onnx" 2>/dev/null; then
	checker=/usr/bin/python3
else
	echo "onnx-check: onnx.checker not run: no python3 with onnx (Debian: apt-get install python3-onnx)" >&2
fi

go build -o "$work/memunet" ./cmd/memunet
go build -o "$work/reference" ./tools/check/onnx-check/reference
failed=0
for norm in batch group none; do
	for up in bilinear transpose; do
		name="$norm-$up"
		run="$work/run-$name"
		rm -rf "$run"
		# A per-channel normalisation for one variant, so that
		# --with-normalize's per-channel constants are checked too.
		norm_args=()
		if [ "$name" = group-transpose ]; then
			norm_args=(--set 'data.mean=[0.45,0.5,0.55]' --set 'data.std=[0.2,0.25,0.3]')
		fi
		"$work/memunet" train --config configs/quickstart.yaml --out "$run" \
			--set model.norm=$norm --set model.up=$up --set model.groups=4 \
			--set train.steps=60 --set data.count=128 --set train.val_every=0 \
			--set output.progress=none "${norm_args[@]}" >"$run.log" 2>&1 ||
			{ cat "$run.log" >&2; exit 1; }
		"$work/reference" --checkpoint "$run" --out "$run/onnx-cases" --sizes 32,64 --batches 1,3
		for variant in fp32 fp16 normalize-softmax; do
			model="$run/$variant.onnx"
			args=() input=normalized output=logits limits=(--max-diff 1e-4 --min-agree 0.999)
			case $variant in
			fp16) args=(--dtype fp16) limits=(--max-diff Infinity --min-agree 0.95) ;;
			normalize-softmax) args=(--with-normalize --with-softmax) input=raw output=probabilities ;;
			esac
			"$work/memunet" export --checkpoint "$run" --format onnx --out "$model" "${args[@]}" >/dev/null
			if [ -n "$checker" ]; then
				"$checker" -c 'import sys, onnx; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' "$model" ||
					{ echo "onnx-check: $name $variant: onnx.checker.check_model FAILED" >&2; failed=1; }
			fi
			echo "$name $variant (--input $input, --output $output):"
			node "$here/check.mjs" --cases "$run/onnx-cases" --model "$model" --input $input --output $output \
				"${limits[@]}" --json "$run/$variant.json" | tee "$run/$variant.check" || failed=1
		done
	done
done
echo
echo "onnx-check summary (ONNX Runtime vs memunet fp32 logits; 2 sizes x 2 batch sizes each):"
for f in "$work"/run-*/*.check; do
	printf '%-18s %-18s %s\n' "$(basename "$(dirname "$f")" | sed 's/^run-//')" "$(basename "$f" .check)" "$(tail -n 1 "$f" | sed 's/^all: //')"
done
if [ $failed -ne 0 ]; then
	echo "onnx-check: FAILED" >&2
	exit 1
fi
echo "onnx-check: all passed${checker:+ (onnx.checker.check_model too)}"
