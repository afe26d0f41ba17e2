#!/usr/bin/env bash
# memunet against PyTorch on one GPU, after tools/check/gpu-check.sh has passed
# there: the same UNet (depth 4, 4 classes, batch 4, Adam), the same seven
# variants, step time and device memory, at the seed UNet's width (base 64,
# the blog's 64..1024 channels) and at base 16, memunet with cuda.conv CONV
# and PyTorch with cudnn.benchmark and cudnn.deterministic on (TF32 as its
# default); then cuDNN's time for each convolution of the seed UNet in
# PyTorch. Needs the gpu build (tools/check/gpu-check.sh build) and python3
# with CUDA torch there; no Go.
#
#   tools/bench/gpu-vs-pytorch.sh OUT [DIR]
#
# Writes OUT/gpu-vs-pytorch.json (rewritten after every part, so a part
# killed midway loses only itself) and OUT/gpu-vs-pytorch.log, and prints
# one line per variant: memunet's and PyTorch's median step and peak
# device bytes, and their ratios. Settings (environment): CONFIGS
# ("64x256 16x256": BASExSIZE), CONV (cudnn: cuda.conv), STEPS (10), LAYER_SHAPES
# ("64x512,64x128,16x512"), LAYER_SECONDS (90); DEVICE (cuda) and MEMUNET
# (DIR/memunet-gpu) to try it on the CPU build.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || {
	echo "usage: tools/bench/gpu-vs-pytorch.sh OUT [DIR]" >&2
	exit 2
}
OUT=$1
DIR=${2:-bin/gpu-check}
memunet=${MEMUNET:-$DIR/memunet-gpu}
DEVICE=${DEVICE:-cuda}
CONFIGS=${CONFIGS:-64x256 16x256}
STEPS=${STEPS:-10}
CONV=${CONV:-cudnn}
LAYER_SHAPES=${LAYER_SHAPES:-64x512,64x128,16x512}
LAYER_SECONDS=${LAYER_SECONDS:-90}
mkdir -p "$OUT" || exit 1
LOG=$OUT/gpu-vs-pytorch.log
: >"$LOG"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-vs-pytorch.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
[ -x "$memunet" ] || {
	echo "no $memunet: run tools/check/gpu-check.sh build here first and carry $DIR" >&2
	exit 1
}

# The seven variants: memunet's name and PyTorch's flags.
VARIANTS=(baseline:"" checkpoint:"--checkpoint" fp16:"--precision fp16" bf16:"--precision bf16"
	accum4:"--accumulate 4" all:"--checkpoint --precision fp16 --accumulate 4" offload:"--checkpoint --offload")
names=$(printf '%s\n' "${VARIANTS[@]}" | cut -d: -f1 | paste -sd, -)

# collect writes OUT/gpu-vs-pytorch.json from what WORK holds so far.
collect() {
	python3 - "$WORK" "$OUT/gpu-vs-pytorch.json" <<'EOF'
import glob, json, os, sys
work, out = sys.argv[1], sys.argv[2]
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
res = {"configs": {}, "layers_pytorch": load(os.path.join(work, "torch-layers.json"))}
for d in sorted(glob.glob(os.path.join(work, "cfg-*"))):
    cfg = os.path.basename(d)[4:]
    torch_rows = {}
    for p in glob.glob(os.path.join(d, "torch-*.json")):
        torch_rows[os.path.basename(p)[6:-5]] = load(p)
    res["configs"][cfg] = {"memunet": load(os.path.join(d, "memunet", "compare.json")), "pytorch": torch_rows}
with open(out + ".tmp", "w") as f:
    json.dump(res, f, indent=1)
os.replace(out + ".tmp", out)
EOF
}

for cfg in $CONFIGS; do
	base=${cfg%x*} size=${cfg#*x}
	d=$WORK/cfg-$cfg
	mkdir -p "$d"
	echo "== $cfg: memunet compare ($names)" | tee -a "$LOG"
	timeout --kill-after=5 120 "$memunet" compare --config configs/baseline.yaml --device "$DEVICE" --steps "$STEPS" \
		--variants "$names" --set model.base="$base" --set model.depth=4 --set train.batch_size=4 \
		--set data.size="$size" --set data.count=64 --set cuda.conv="$CONV" --out "$d/memunet" >>"$LOG" 2>&1
	echo "   exit $?" >>"$LOG"
	collect
	for v in "${VARIANTS[@]}"; do
		echo "== $cfg: pytorch ${v%%:*}" >>"$LOG"
		# shellcheck disable=SC2086
		timeout --kill-after=5 40 python3 tools/pytorch/pytorch_unet.py --device cuda --base "$base" --depth 4 --batch 4 \
			--size "$size" --classes 4 --steps "$STEPS" --cudnn-benchmark --deterministic ${v#*:} >"$d/torch.log" 2>&1
		cat "$d/torch.log" >>"$LOG"
		grep '^{' "$d/torch.log" | tail -1 >"$d/torch-${v%%:*}.json"
	done
	collect
done

echo "== cuDNN per convolution: $LAYER_SHAPES" | tee -a "$LOG"
timeout --kill-after=5 $((LAYER_SECONDS + 30)) python3 tools/pytorch/pytorch_layers.py --out "$WORK/torch-layers.json" \
	--seconds "$LAYER_SECONDS" --shapes "$LAYER_SHAPES" --precisions tf32,fp16,bf16 >>"$LOG" 2>&1
collect

# The table.
python3 - "$OUT/gpu-vs-pytorch.json" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
for cfg, r in res["configs"].items():
    rows = {m["variant"]: m for m in (r["memunet"] or [])}
    conv = ", ".join(sorted({m.get("conv") or "?" for m in rows.values()}))
    print("base x size %s (memunet's convolutions: %s): variant  memunet ms / MiB  pytorch ms / MiB (allocated)  ratio time, memory" % (cfg, conv))
    for v in list(rows) + [v for v in r["pytorch"] if v not in rows]:
        m, t = rows.get(v), r["pytorch"].get(v)
        if not m or not t:
            print("  %-10s memunet %s, pytorch %s" % (v, "ok" if m else "missing", "ok" if t else "missing"))
            continue
        mm, tm = m["peak_allocated_bytes"] / 2**20, t["max_memory_allocated"] / 2**20
        print("  %-10s %8.2f / %7.1f   %8.2f / %7.1f   %.2f, %.2f" % (
            v, m["step_ms_median"], mm, t["step_ms_median"], tm, m["step_ms_median"] / t["step_ms_median"], mm / tm))
print("cuDNN layer rows: %d" % len(res["layers_pytorch"] or []))
EOF
