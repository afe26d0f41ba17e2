#!/usr/bin/env bash
# memunet against PyTorch on the same machine with a 3D UNet (issue 48):
# base 16, depth 4, batch 2, 3 channels, 2 classes, 64^3 synthetic volumes,
# fp32, Adam, unless BASE, DEPTH, BATCH, SIZE, IN_CHANNELS, CLASSES say
# otherwise. Each of ROUNDS rounds (default 3) runs `memunet bench --json`
# and then PyTorch's same step (tools/pytorch/pytorch_unet.py --dims 3,
# memunet_torch.py's twin: Conv3d, BatchNorm3d, MaxPool3d, trilinear
# Upsample), so a noisy, shared machine disturbs both alike. Never run two
# benchmarks at once on the same cores.
#
# Memory, side by side: memunet's whole peak (params, grads, Adam,
# activations, workspace) from `memunet plan --json` and, unless
# MEASURE=0, measured by a 2-step `memunet train` (summary.json's
# peak_allocated_bytes), against what PyTorch's forward saves for
# backward (saved_tensors_hooks, each storage once) and its params, grads
# and Adam state. Speed: the median step of each side per round, their
# ratio per round, the ratio of medians and best against best; memunet's
# whole step and its convolutions alone as a share of the FMA peak the
# bench sampled (the convolutions' FLOPs over the conv forward and
# backward columns' time: bench's conv % peak). The FLOPs are the PyTorch
# twin's count, in memunet's convention; where bench's own count differs
# (at 087b1f0 it counted a volume as one of its slices) it says so.
#
#   tools/bench/bench3d-vs-pytorch.sh
#   RAW=docs/perf/raw/x ROUNDS=5 tools/bench/bench3d-vs-pytorch.sh
#
# RAW=DIR keeps every raw output there (each round's bench and PyTorch
# JSON, the plan, the train summary, the printed tables); VARIANTS (default
# baseline) as in bench-vs-pytorch.sh (checkpoint, bf16, accum4 have a
# PyTorch twin); MEMUNET_SET adds --set flags to memunet's runs only,
# TORCH_FLAGS flags to PyTorch's only (e.g. "--max-channels 320
# --pool-kernels '[[1,2,2],2,2,2]'" beside MEMUNET_SET's keys for them);
# MEMUNET_BIN times a prebuilt binary, PYTHON is the python3 with torch
# (default /usr/bin/python3); CONFIG the memunet config the --set flags
# apply to (default configs/quickstart.yaml).
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${STEPS:-5}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
variants=${VARIANTS:-baseline}
base=${BASE:-16}
depth=${DEPTH:-4}
size=${SIZE:-64}
batch=${BATCH:-2}
cin=${IN_CHANNELS:-3}
classes=${CLASSES:-2}
count=${COUNT:-8}
config=${CONFIG:-configs/quickstart.yaml}
python=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
raw=${RAW:-$tmp/raw}
mkdir -p "$raw"
if [ -n "${MEMUNET_BIN:-}" ]; then
	cp "$MEMUNET_BIN" "$tmp/memunet"
else
	go build -o "$tmp/memunet" ./cmd/memunet
fi
sets=(--set model.dims=3 --set data.source=synthetic --set data.size="$size" --set data.count="$count"
	--set model.in_channels="$cin" --set model.classes="$classes" --set model.base="$base"
	--set model.depth="$depth" --set train.batch_size="$batch" --set train.precision=fp32)
for kv in ${MEMUNET_SET:-}; do
	sets+=(--set "$kv")
done
torch_flags() {
	case $1 in
	baseline) echo "--precision fp32" ;;
	checkpoint) echo "--checkpoint" ;;
	bf16) echo "--precision bf16" ;;
	accum4) echo "--accumulate 4" ;;
	all) echo "--checkpoint --accumulate 4 --precision bf16" ;;
	esac
}
echo "== memunet plan"
"$tmp/memunet" plan --config "$config" --variants "$variants" --json "${sets[@]}" >"$raw/memunet-plan.json"
cat "$raw/memunet-plan.json"
if [ "${MEASURE:-1}" != 0 ]; then
	echo "== memunet train, 2 steps (the measured peak)"
	GOMAXPROCS=$threads "$tmp/memunet" train --config "$config" "${sets[@]}" --set train.steps=2 \
		--set train.val_every=0 --set train.checkpoint_every=0 --set output.tensorboard=false \
		--set output.progress=none --out "$tmp/run" >"$raw/memunet-train.txt" 2>&1 ||
		{ cat "$raw/memunet-train.txt"; exit 1; }
	cp "$tmp/run/summary.json" "$raw/memunet-train-summary.json"
fi
for round in $(seq "$rounds"); do
	echo "== memunet, round $round/$rounds (GOMAXPROCS=$threads)"
	GOMAXPROCS=$threads "$tmp/memunet" bench --config "$config" --steps "$steps" --variants "$variants" \
		--json "${sets[@]}" | tee "$raw/memunet-bench-r$round.json"
	for v in ${variants//,/ }; do
		flags=$(torch_flags "$v")
		[ -n "$flags" ] || continue
		echo "== PyTorch $v, round $round/$rounds ($threads threads)"
		# shellcheck disable=SC2086
		eval "\"$python\" tools/pytorch/pytorch_unet.py --dims 3 --threads $threads --steps $steps --base $base \
			--depth $depth --size $size --batch $batch --in-channels $cin --classes $classes $flags ${TORCH_FLAGS:-}" |
			tee "$raw/torch-$v-r$round.json"
	done
done
python3 - "$raw" "$rounds" "$variants" "base $base, depth $depth, ${size}^3, batch $batch, $cin channels, $classes classes, $steps timed steps, $threads threads" <<'PY' | tee "$raw/summary.txt"
import json, os, statistics, sys
raw, rounds, variants, setup = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
med = statistics.median
MiB = lambda b: f"{b / 2**20:.1f} MiB"
def load(name):
    p = os.path.join(raw, name)
    return json.load(open(p)) if os.path.exists(p) else None
plan = {r["variant"]: r for r in load("memunet-plan.json")["variants"]}
summary = load("memunet-train-summary.json")
bench = [load(f"memunet-bench-r{r}.json") for r in range(1, rounds + 1)]
for v in variants:
    torch = [load(f"torch-{v}-r{r}.json") for r in range(1, rounds + 1)]
    print(f"\n{v}: 3D UNet, {setup}; memunet on {bench[0]['cores']} cores ({bench[0].get('peak_kernel', '')} kernel)"
          + (f", PyTorch {torch[0]['torch']}" if torch[0] else ""))
    print("memory:")
    p = plan.get(v)
    if p:
        c = p["peak_by_category"]
        print(f"  memunet plan peak {p['peak_allocated_bytes']} B ({MiB(p['peak_allocated_bytes'])}): "
              + ", ".join(f"{k} {MiB(c[k])}" for k in sorted(c)))
    if summary and v == variants[0]:
        c = summary["peak_allocated_by_category"]
        print(f"  memunet measured peak (2-step train) {summary['peak_allocated_bytes']} B ({MiB(summary['peak_allocated_bytes'])}): "
              + ", ".join(f"{k} {MiB(c[k])}" for k in sorted(c)) + f"; peak RSS {MiB(summary['peak_rss_bytes'])}")
    if torch[0]:
        t = torch[0]
        state = t["param_bytes"] + t["buffer_bytes"] + t["grad_bytes"] + t["optimizer_bytes"]
        print(f"  PyTorch saved for backward {t['saved_bytes']} B ({MiB(t['saved_bytes'])}; "
              f"{MiB(t['saved_activation_bytes'])} activations, {MiB(t['saved_param_bytes'])} weights; "
              f"{t['saved_storages']} storages of {t['saved_tensors']} tensors)")
        print(f"  PyTorch params {MiB(t['param_bytes'])} + buffers {MiB(t['buffer_bytes'])} + grads {MiB(t['grad_bytes'])} "
              f"+ Adam {MiB(t['optimizer_bytes'])} = {MiB(state)}; with the saved activations {MiB(state + t['saved_activation_bytes'])}; "
              f"peak RSS {MiB(t['peak_rss_bytes'])}")
        if p:
            print(f"  memunet whole peak / PyTorch saved bytes: {p['peak_allocated_bytes'] / t['saved_bytes']:.3f} "
                  f"(/ saved activations {p['peak_allocated_bytes'] / t['saved_activation_bytes']:.3f}; "
                  f"memunet activations+workspace / PyTorch saved activations "
                  f"{(p['peak_by_category'].get('activations', 0) + p['peak_by_category'].get('workspace', 0)) / t['saved_activation_bytes']:.3f})")
    print("speed (median step of each run, ms):")
    mu, pt = [], []
    for r in range(rounds):
        row = next((x for x in bench[r]["rows"] if x["name"] == v), None) if bench[r] else None
        if not row or row.get("error"):
            print(f"  round {r + 1}: memunet {row and row.get('error')}")
            continue
        s = sorted(bench[r].get("peak_gflops_samples") or [0])
        peak = s[len(s) // 2] or float("nan")
        conv_ms = row["kind_ms"][0] + row["kind_ms"][1]
        # The step's convolution FLOPs (memunet's convention, x3 for a
        # training step): the PyTorch twin's count of the same network;
        # bench's own where no PyTorch run is at hand.
        own = row["gflops"] * row["step_ms"] / 1000
        gflop = torch[r]["gflop_per_step"] if torch[r] else own
        rate, conv_rate = gflop / row["step_ms"] * 1000, gflop / conv_ms * 1000 if conv_ms else 0
        line = (f"  round {r + 1}: memunet {row['step_ms']:.1f} [{row['step_ms_min']:.1f}..{row['step_ms_max']:.1f}], "
                f"{rate:.1f} GFLOP/s ({100 * rate / peak:.0f}% of the FMA peak {peak:.1f}); "
                f"convolutions {row['kind_ms'][0]:.1f} + {row['kind_ms'][1]:.1f} ms, {conv_rate:.1f} GFLOP/s "
                f"({100 * conv_rate / peak:.0f}% of the peak")
        if row.get("conv_gflops"):
            line += f"; bench's conv % peak {100 * row['conv_gflops'] / peak:.0f}"
        line += ")"
        if abs(own - gflop) > 0.01 * gflop:
            line += f" [bench counts {own:.2f} GFLOP a step, PyTorch {gflop:.2f}: bench's {row['gflops']:.1f} GFLOP/s is off]"
        mu.append(row["step_ms"])
        if torch[r]:
            pt.append(torch[r]["step_ms_median"])
            line += (f"; PyTorch {torch[r]['step_ms_median']:.1f} [{torch[r]['step_ms_min']:.1f}..{torch[r]['step_ms_max']:.1f}], "
                     f"{torch[r]['gflops']:.1f} GFLOP/s; memunet/PyTorch {row['step_ms'] / torch[r]['step_ms_median']:.3f}")
        print(line)
    if mu and pt and len(mu) == len(pt):
        per = [a / b for a, b in zip(mu, pt)]
        print(f"  memunet {med(mu):.1f} ms (best {min(mu):.1f}), PyTorch {med(pt):.1f} ms (best {min(pt):.1f}); "
              f"memunet/PyTorch: medians {med(mu) / med(pt):.3f}, per round median {med(per):.3f} "
              f"({min(per):.3f}-{max(per):.3f}), best/best {min(mu) / min(pt):.3f}")
PY
