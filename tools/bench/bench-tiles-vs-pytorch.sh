#!/usr/bin/env bash
# Tiled prediction, memunet against PyTorch on the same tiles: one
# SIZExSIZE RGB image (default 1024) predicted by tiles of TILE (256) with
# OVERLAP (0.5), BATCH (4) tiles a pass, Gaussian blend, THREADS (2)
# threads, by `memunet predict --tile` and by tools/pytorch/tiles_torch.py (the
# same tiles, padding, weights and blend with torch.nn in eval mode) on
# the same weights: a seed UNet (base 16, depth 4, 3 classes) trained for
# a few steps on toy shapes, exported to safetensors. Alternating ROUNDS
# (3) rounds; reported per side: tiles/s and images/s (memunet: the whole
# command, decode and write included; PyTorch: its tiled pass alone) and
# the share of pixels where the two masks agree. Needs Debian's
# python3-torch (apt-get install python3-torch); not part of CI.
#
#   tools/bench/bench-tiles-vs-pytorch.sh
#   SIZE=2048 TILE=512 BATCH=2 tools/bench/bench-tiles-vs-pytorch.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
size=${SIZE:-1024}
tile=${TILE:-256}
overlap=${OVERLAP:-0.5}
batch=${BATCH:-4}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/memunet" ./cmd/memunet
python3 tools/bench/make_large_sets.py png "$tmp/set" 6 128
GOMAXPROCS=$threads "$tmp/memunet" train --config configs/quickstart.yaml --out "$tmp/run" \
	--set data.source=folder --set data.path="$tmp/set" --set model.classes=3 --set model.base=16 \
	--set model.depth=4 --set train.steps=20 --set train.batch_size=2 --set train.val_every=20 \
	--set data.val_fraction=0.34 --set output.progress=none >/dev/null 2>&1
"$tmp/memunet" export --checkpoint "$tmp/run" --out "$tmp/model.safetensors" >/dev/null
python3 tools/bench/make_large_sets.py png "$tmp/big" 1 "$size"
img="$tmp/big/images/s00.png"
for r in $(seq "$rounds"); do
	start=$(date +%s.%N)
	GOMAXPROCS=$threads "$tmp/memunet" predict --checkpoint "$tmp/run" --input "$img" --out "$tmp/pred$r" \
		--tile "$tile" --overlap "$overlap" --batch "$batch" >"$tmp/note$r" 2>&1
	end=$(date +%s.%N)
	tiles=$(sed -n 's/.* by \([0-9]*\) tiles of .*/\1/p' "$tmp/note$r")
	echo "round $r memunet: $tiles tiles in $(echo "$end - $start" | bc) s: $(echo "scale=2; $tiles / ($end - $start)" | bc) tiles/s, $(echo "scale=4; 1 / ($end - $start)" | bc) images/s"
	echo "round $r pytorch: $("$py" tools/pytorch/tiles_torch.py "$tmp/model.safetensors" "$img" --tile "$tile" --overlap "$overlap" \
		--batch "$batch" --threads "$threads" --mask "$tmp/pred$r/s00.png")"
done
