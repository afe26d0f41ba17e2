#!/usr/bin/env bash
# memunet against PyTorch on the same machine, the same UNet and the same
# step (base 16, depth 4, batch 4, 3x128x128, 2 classes, Adam), in one run.
# Needs Debian's python3-torch (apt-get install python3-torch); not part of CI.
#
# With BEFORE=<git revision>, that revision of memunet is built too and the
# two binaries are timed in alternation, ROUNDS times each (default 3), so a
# change's effect on step time is measured side by side on the same machine:
#   BEFORE=HEAD~3 VARIANTS=baseline,fp16 tools/bench-vs-pytorch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${STEPS:-5}
threads=${THREADS:-2}
variants=${VARIANTS:-baseline}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/after" ./cmd/memunet
bins=(after)
if [ -n "${BEFORE:-}" ]; then
	git worktree add -q --detach "$tmp/src" "$BEFORE"
	(cd "$tmp/src" && go build -o "$tmp/before" ./cmd/memunet)
	git worktree remove --force "$tmp/src"
	bins=(before after)
else
	rounds=1
fi
bench() {
	GOMAXPROCS=$threads "$tmp/$1" bench --config configs/quickstart.yaml --steps "$steps" \
		--variants "$variants" --set model.base=16 --set model.depth=4 --set model.classes=2 \
		--set data.size=128 --set data.count=32 --set train.batch_size=4
}
for round in $(seq "$rounds"); do
	for b in "${bins[@]}"; do
		echo "== memunet $b, round $round (GOMAXPROCS=$threads)"
		bench "$b" | tee -a "$tmp/$b.txt"
	done
done
echo "== PyTorch ($threads threads)"
/usr/bin/python3 tools/pytorch_unet.py --threads "$threads" --steps "$steps" | tee "$tmp/pytorch.json"
python3 - "$tmp" "${bins[@]}" <<'PY'
import json, statistics, sys
tmp, bins = sys.argv[1], sys.argv[2:]
ms = {}
for b in bins:
    for line in open(f"{tmp}/{b}.txt"):
        parts = line.split()
        # "variant M x A step_ms GFLOP/s ...": the step ms follows "M x A"
        if len(parts) > 4 and parts[2] == "x" and parts[0] != "variant":
            try:
                ms.setdefault(parts[0], {}).setdefault(b, []).append(float(parts[4]))
            except ValueError:
                pass
torch = json.load(open(f"{tmp}/pytorch.json"))["step_ms_median"]
for v, by in ms.items():
    cells = [f"{b} {statistics.median(t):.1f} ms ({', '.join(f'{x:.1f}' for x in t)})" for b, t in by.items()]
    line = f"{v}: " + "; ".join(cells)
    if "before" in by and "after" in by:
        line += f"; after/before {statistics.median(by['after']) / statistics.median(by['before']):.3f}"
    if v == "baseline":
        line += f"; PyTorch {torch:.1f} ms, memunet/PyTorch {statistics.median(by['after']) / torch:.2f}x"
    print(line)
PY
