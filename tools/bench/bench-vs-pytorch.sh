#!/usr/bin/env bash
# memunet against PyTorch on the same machine, the same UNet and the same
# step (Adam, 2 classes; base 16, depth 4, batch 4, 3x128x128 unless BASE,
# SIZE, BATCH say otherwise), alternating: each of ROUNDS rounds (default
# 5) runs `memunet bench` over every variant, then PyTorch's equivalent of
# each, so a noisy, shared machine disturbs both alike. Reported per
# variant: the median and best step of each, memunet/PyTorch (medians, the
# median of each round's ratio, and best against best) and memunet's
# variant against its own fp32 step (as a ratio of medians, and the median
# of each round's ratio, its variants having run back to back);
# fp16 has no PyTorch CPU
# equivalent (its CPU autocast is bf16 only). Needs Debian's python3-torch
# (apt-get install python3-torch); not part of CI.
#
#   tools/bench/bench-vs-pytorch.sh                      # the seed UNet, 2 cores
#   THREADS=1 SIZE=64 BASE=32 tools/bench/bench-vs-pytorch.sh
#
# With BEFORE=<git revision>, that revision of memunet is built and timed
# too, in the same alternation (PyTorch then serves as a control):
#   BEFORE=HEAD~3 VARIANTS=baseline,fp16 tools/bench/bench-vs-pytorch.sh
# MEMUNET_BIN=<binary> times that CPU build instead of building one (no
# Go needed), PYTHON the python3 with torch (default /usr/bin/python3).
# ISA=avx2 times both as on a machine without AVX-512: memunet with
# GODEBUG=cpu.avx512f=off (golang.org/x/sys/cpu's switch; bench's FMA
# peak line names the kernels it chose), PyTorch's oneDNN with
# ONEDNN_MAX_CPU_ISA=AVX2. MEMUNET_SET adds --set flags to memunet's runs
# only (e.g. MEMUNET_SET="model.conv_algo=winograd").
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${ISA:-}" = avx2 ]; then
	export GODEBUG=cpu.avx512f=off ONEDNN_MAX_CPU_ISA=AVX2
fi
extra=()
for kv in ${MEMUNET_SET:-}; do
	extra+=(--set "$kv")
done
steps=${STEPS:-5}
threads=${THREADS:-2}
variants=${VARIANTS:-baseline,checkpoint,fp16,bf16,accum4}
rounds=${ROUNDS:-5}
base=${BASE:-16}
size=${SIZE:-128}
batch=${BATCH:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${MEMUNET_BIN:-}" ]; then
	cp "$MEMUNET_BIN" "$tmp/after" # a machine without Go (the GPU machine's cores)
else
	go build -o "$tmp/after" ./cmd/memunet
fi
bins=(after)
if [ -n "${BEFORE:-}" ]; then
	git worktree add -q --detach "$tmp/src" "$BEFORE"
	(cd "$tmp/src" && go build -o "$tmp/before" ./cmd/memunet)
	# Its own config: an older binary refuses keys added since.
	cp "$tmp/src/configs/quickstart.yaml" "$tmp/before.yaml"
	git worktree remove --force "$tmp/src"
	bins=(before after)
fi
cp configs/quickstart.yaml "$tmp/after.yaml"
bench() {
	GOMAXPROCS=$threads "$tmp/$1" bench --config "$tmp/$1.yaml" --steps "$steps" \
		--variants "$variants" --set model.base="$base" --set model.depth=4 --set model.classes=2 \
		--set data.size="$size" --set data.count=32 --set train.batch_size="$batch" "${extra[@]}"
}
# PyTorch's flags for a memunet variant; empty where it has none.
torch_flags() {
	case $1 in
	baseline) echo "--precision fp32" ;;
	checkpoint) echo "--checkpoint" ;;
	bf16) echo "--precision bf16" ;;
	accum4) echo "--accumulate 4" ;;
	all) echo "--checkpoint --accumulate 4 --precision bf16" ;;
	esac
}
for round in $(seq "$rounds"); do
	for b in "${bins[@]}"; do
		echo "== memunet $b, round $round/$rounds (GOMAXPROCS=$threads)"
		bench "$b" | tee -a "$tmp/$b.txt"
	done
	for v in ${variants//,/ }; do
		flags=$(torch_flags "$v")
		[ -n "$flags" ] || continue
		echo "== PyTorch $v, round $round/$rounds ($threads threads)"
		# shellcheck disable=SC2086
		"${PYTHON:-/usr/bin/python3}" tools/pytorch/pytorch_unet.py --threads "$threads" --steps "$steps" --base "$base" \
			--size "$size" --batch "$batch" $flags | tee -a /dev/stderr |
			python3 -c 'import json,sys; print(sys.argv[1], json.load(sys.stdin)["step_ms_median"])' "$v" >>"$tmp/torch.txt"
	done
done
python3 - "$tmp" "$threads" "$base" "$size" "$batch" "${bins[@]}" <<'PY'
import statistics, sys
tmp, threads, base, size, batch, bins = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
ms, peaks, rounds = {}, {}, {}
for b in bins:
    rnd = -1
    for line in open(f"{tmp}/{b}.txt"):
        parts = line.split()
        if line.startswith("memunet bench:"):  # one per memunet bench run: a new round
            rnd += 1
        # "% peak: of the FMA peak's best, 85.0 GFLOP/s, of 3 samples ..."
        if line.startswith("% peak: of the FMA peak's"):
            peaks.setdefault(b, []).append(float(parts[7]))
        # "variant M x A step_ms min..max GFLOP/s % ...": the step ms follows "M x A"
        if len(parts) > 6 and parts[2] == "x" and parts[0] != "variant":
            try:
                ms.setdefault(parts[0], {}).setdefault(b, []).append((float(parts[4]), float(parts[6])))
                rounds.setdefault(b, {}).setdefault(rnd, {})[parts[0]] = float(parts[4])
            except ValueError:
                pass
torch = {}
try:
    for line in open(f"{tmp}/torch.txt"):
        v, t = line.split()
        torch.setdefault(v, []).append(float(t))
except FileNotFoundError:
    pass
med = lambda xs: statistics.median(xs)
print(f"\nbase {base}, {size}x{size}, batch {batch}, {threads} threads; medians over rounds (best in brackets)")
for b, p in peaks.items():
    print(f"FMA peak ({b}): median of each run's best sample {med(p):.1f} GFLOP/s")
fp32 = {b: med([t for t, _ in ms["baseline"][b]]) for b in bins if "baseline" in ms and b in ms["baseline"]}
for v, by in ms.items():
    cells = []
    for b, runs in by.items():
        t = [x for x, _ in runs]
        g = med([x for _, x in runs])
        cell = f"memunet {b} {med(t):.1f} ms [{min(t):.1f}], {g:.1f} GFLOP/s"
        if b in peaks:
            cell += f" ({100 * g / med(peaks[b]):.0f}% of peak)"
        if v != "baseline" and b in fp32:
            cell += f", {med(t) / fp32[b]:.2f}x its fp32"
            # The same ratio per round (the variants of one bench run back
            # to back, so a slow phase of the machine slows both): steadier.
            paired = [r[v] / r["baseline"] for r in rounds.get(b, {}).values() if v in r and "baseline" in r]
            if paired:
                cell += f" (per round: median {med(paired):.2f}x, {min(paired):.2f}-{max(paired):.2f})"
        if v in torch:
            cell += f", {med(t) / med(torch[v]):.2f}x PyTorch"
            # Per round too: PyTorch's run of round r follows memunet's,
            # so the pair shares most of a slow phase.
            rs = rounds.get(b, {})
            paired = [rs[r][v] / torch[v][r] for r in sorted(rs) if v in rs[r] and r < len(torch[v])]
            if paired:
                cell += f" (per round: median {med(paired):.2f}x, {min(paired):.2f}-{max(paired):.2f}; best/best {min(t) / min(torch[v]):.2f}x)"
        cells.append(cell)
    line = f"{v}: " + "; ".join(cells)
    if v in torch:
        line += f"; PyTorch {med(torch[v]):.1f} ms [{min(torch[v]):.1f}]"
        if v != "baseline" and "baseline" in torch:
            line += f" ({med(torch[v]) / med(torch['baseline']):.2f}x its fp32)"
    if "before" in by and "after" in by:
        line += f"; after/before {med([x for x, _ in by['after']]) / med([x for x, _ in by['before']]):.3f}"
    print(line)
PY
