#!/usr/bin/env bash
# memunet against PyTorch on the same machine, the same UNet and the same
# step (base 16, depth 4, batch 4, 3x128x128, 2 classes, Adam), in one run.
# Needs Debian's python3-torch (apt-get install python3-torch); not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${STEPS:-5}
threads=${THREADS:-2}
go build -o /tmp/memunet-bench ./cmd/memunet
echo "== memunet (GOMAXPROCS=$threads)"
GOMAXPROCS=$threads /tmp/memunet-bench bench --config configs/quickstart.yaml --steps "$steps" \
	--variants "${VARIANTS:-baseline}" --set model.base=16 --set model.depth=4 --set model.classes=2 \
	--set data.size=128 --set data.count=32 --set train.batch_size=4 | tee /tmp/memunet-bench.txt
echo "== PyTorch ($threads threads)"
/usr/bin/python3 tools/pytorch_unet.py --threads "$threads" --steps "$steps" | tee /tmp/pytorch-bench.json
python3 - <<'PY'
import json, re
m = None
for line in open("/tmp/memunet-bench.txt"):
    parts = line.split()
    if parts and parts[0] == "baseline":
        m = float(parts[4])  # step ms after "baseline", "4", "x", "1"
t = json.load(open("/tmp/pytorch-bench.json"))
if m:
    print(f"memunet baseline {m:.1f} ms/step, PyTorch {t['step_ms_median']:.1f} ms/step: ratio {m / t['step_ms_median']:.2f}x")
PY
