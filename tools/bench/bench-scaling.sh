#!/usr/bin/env bash
# How memunet's fp32 training step scales with cores, image size and width,
# beside PyTorch's on the same machine: tools/bench/bench-vs-pytorch.sh (baseline
# variant) for GOMAXPROCS/threads 1 and all cores, 64/128/256 px and base
# 16/32/64 (depth 4, batch 4), printed as a markdown table. ROUNDS (default
# 1) alternating rounds each; SIZES, BASES and CORES override the grids,
# ISAS the instruction sets (default "native"; "native avx2" adds rows as
# on a machine without AVX-512, see bench-vs-pytorch.sh's ISA), and
# MEMUNET_SET passes --set flags to memunet (model.conv_algo=winograd);
# MEMUNET_BIN and PYTHON as bench-vs-pytorch.sh's (a machine without Go).
# Needs Debian's python3-torch; not part of CI. Takes about ten minutes on
# a 2-core machine at the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes=${SIZES:-64 128 256}
bases=${BASES:-16 32 64}
cores=${CORES:-1 $(nproc)}
rounds=${ROUNDS:-1}
isas=${ISAS:-native}
echo "| ISA | cores | size | base | GFLOP/step | memunet ms | PyTorch ms | memunet/PyTorch | memunet GFLOP/s (% of FMA peak) |"
echo "|---|---|---|---|---|---|---|---|---|"
for isa in $isas; do
for c in $cores; do
	for size in $sizes; do
		for base in $bases; do
			out=$(ISA=$isa THREADS=$c SIZE=$size BASE=$base VARIANTS=baseline ROUNDS=$rounds STEPS=3 tools/bench/bench-vs-pytorch.sh 2>/dev/null | tail -3)
			python3 - "$isa" "$c" "$size" "$base" "$out" <<'PY'
import re, sys
isa, c, size, base, out = sys.argv[1:6]
line = next((l for l in out.splitlines() if l.startswith("baseline:")), "")
m = re.search(r"memunet after ([\d.]+) ms.*?, ([\d.]+) GFLOP/s \((\d+)% of peak\).*?PyTorch ([\d.]+) ms", line)
if not m:
    print(f"| {isa} | {c} | {size} | {base} | - | - | - | - | - |")
else:
    mu, gf, pk, pt = float(m[1]), float(m[2]), m[3], float(m[4])
    print(f"| {isa} | {c} | {size} | {base} | {gf * mu / 1000:.1f} | {mu:.1f} | {pt:.1f} | {mu / pt:.2f} | {gf:.1f} ({pk}%) |")
PY
		done
	done
done
done
