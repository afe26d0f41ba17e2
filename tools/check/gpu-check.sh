#!/usr/bin/env bash
# memunet's device check: the CUDA backend on a real GPU, every variant
# measured, brought back as one JSON file by one command that returns
# within 600 s.
#
#   tools/check/gpu-check.sh build [DIR]
#       Here (Go with cgo and a C compiler; no CUDA toolkit, no GPU): the
#       gpu build's stripped binaries into DIR (default bin/gpu-check:
#       memunet-gpu, cuda-backend.test and cudnn.test, at most 48 MiB, which
#       build checks), and the CPU twin: the quickstart trained on this
#       machine's CPU (cpu-twin.json), so the GPU machine spends no time on
#       CPU runs. DIR is the one folder that travels with the tree.
#   tools/check/gpu-check.sh run OUT [DIR]
#       There, from the repository root (no Go needed). Every step runs
#       under its own time limit, and OUT/gpu-check.json is rewritten whole
#       after each step (and closed by an exit trap), so it always parses;
#       OUT/gpu-check.log holds every step's output, OUT/conformance.log
#       the conformance suite's and OUT/cudnn-tables/<precision>.json
#       cuDNN's algorithm tables, as TestRecordAlgorithmTables wrote them
#       (on a GPU with a cuDNN only). Nothing else is written under OUT:
#       at most 7 files, one folder down.
#   tools/check/gpu-check.sh run --cpu OUT [DIR]
#       The same steps with the CPU build (MEMUNET, else bin/memunet built
#       from the tree) on device cpu at tiny sizes: checks this script on
#       any machine. The steps that need a GPU run their binaries where
#       DIR has them (they skip, and the step records why) or are skipped
#       with the reason in the JSON.
#   run exits 0 when every step passed or was skipped, else 1.
#
# The steps of run and their time limits in seconds, 500 in all (the
# limits of the first GPU run, 475 s, of which it took 104 s, were cut to
# make room for cudnn and bench: gpu, page-moves 15 -> 10, conformance
# 50 -> 45, conformance-sync 30 -> 20, layers 45 -> 40, layers-2blocks
# 25 -> 20, pytorch-layers 40 -> 35, compare 70/80 -> 55/65,
# compare-caching 35 -> 25, train 50 -> 35):
#   gpu               10  nvidia-smi: the GPU, its driver and CUDA versions, memory
#   conformance       45  the backend conformance suite on cuda:0; the
#                         groups this work changed (the fused BatchNorm+ReLU
#                         and upsample+concat kernels, batch norm's apply,
#                         the one finite check) named in "groups"
#   conformance-sync  20  the first 3 failing cases again, each with
#                         MEMUNET_CUDA_SYNC=1, so a fault names its kernel
#   page-moves        10  what mapping and unmapping one page costs
#   layers            40  each convolution of the seed UNet (base 16 and 64,
#                         128 and 512 px, batch 4), forward and both
#                         gradients, in TF32, fp16, bf16, then exact fp32:
#                         ms and TFLOP/s on the GPU's events
#   layers-2blocks    20  the same with the tensor-core kernels built for two
#                         blocks an SM (MEMUNET_CUDA_TC_BLOCKS=2: 128
#                         registers, a few bytes spilled), 16-bit and TF32,
#                         against the default's time on the same rows
#   pytorch-layers    35  the same convolutions in PyTorch + cuDNN, where
#                         python3's torch has CUDA
#   cudnn             60  cudnn.test: a cuDNN handle on cuda:0
#                         (TestHandleOnDevice), then cudnnFind's algorithm
#                         tables for the seed UNet's convolutions (base 64,
#                         256 px, batch 4) in tf32, fp16 and bf16
#                         (TestRecordAlgorithmTables), copied into
#                         OUT/cudnn-tables, then fp32 (FMA math) while 15 s
#                         are left. Where the loader's own look-up finds
#                         no cuDNN, once more with MEMUNET_CUDNN naming a
#                         libcudnn.so.9 or .8 found under python3's
#                         site-packages (PyTorch's wheels), saying so
#   compare-S         55  memunet compare of 7 variants on the seed UNet
#                         (base 16, depth 4, batch 4) at the first size S:
#                         pool bytes, the device's own (cuMemGetInfo) less
#                         the context's against the pool's reserved,
#                         context overhead, step time
#   compare-S2        65  the same at the second size
#   compare-caching   25  the caching allocator at the first size: pages
#                         moved per step
#   bench             35  memunet bench at the seed UNet's width (base 64,
#                         256 px, batch 4, depth 4; --cpu: base 16 at the
#                         first size), one process a variant (baseline and
#                         fp16, then bf16 and accum4 while 12 s are left),
#                         each at most 16 s: the median step, ms per layer
#                         kind, and on CUDA the device's work per optimizer
#                         step (kernel launches, blocking copies to the
#                         host, waits for all work), parsed into the JSON
#   train             35  the quickstart trained on the GPU, beside the CPU twin
#   pytorch           45  PyTorch's figures for the same variants at the
#                         first size, where python3's torch has CUDA
#
# Settings (environment): SIZES ("128 256"; --cpu "32"), STEPS (5; --cpu 2),
# TRAIN_STEPS (200; build uses it for the twin; --cpu 4), BENCH_STEPS (10;
# --cpu 2), GPU_CHECK_LIMITS (per-step limits to override, e.g.
# "compare-128=30 train=10").
set -uo pipefail
cd "$(dirname "$0")/../.."

usage() {
	echo "usage: tools/check/gpu-check.sh build [DIR] | run [--cpu] OUT [DIR]" >&2
	exit 2
}

# json_string prints its argument as a JSON string.
json_string() {
	local s
	s=$(printf '%s' "$1" | tr -d '\000-\010\013\014\016-\037')
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\t'/\\t}
	s=${s//$'\r'/}
	s=${s//$'\n'/\\n}
	printf '"%s"' "$s"
}

# valid_json reports whether a file holds one JSON value (python3's parser
# where there is one; else its last character closes an object or array).
valid_json() {
	[ -s "$1" ] || return 1
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" >/dev/null 2>&1
		return
	fi
	[[ $(tr -d ' \n\t\r' <"$1" | tail -c 1) == [\]\}] ]]
}

# json_file prints a JSON file's contents, or null where it is missing or
# not JSON.
json_file() { if valid_json "$1"; then cat "$1"; else printf null; fi; }

mode=${1:-}
case "$mode" in
build)
	DIR=${2:-bin/gpu-check}
	TRAIN_STEPS=${TRAIN_STEPS:-200}
	mkdir -p "$DIR" || exit 1
	echo "building the gpu binaries into $DIR ..."
	go build -tags gpu -trimpath -ldflags='-s -w' -o "$DIR/memunet-gpu" ./cmd/memunet || exit 1
	go test -c -tags gpu -trimpath -ldflags='-s -w' -o "$DIR/cuda-backend.test" ./backend/cuda/driverapi || exit 1
	go test -c -tags gpu -trimpath -ldflags='-s -w' -o "$DIR/cudnn.test" ./backend/cuda/cudnn || exit 1
	# The CPU twin: the quickstart on this CPU, as the GPU trains it.
	twin=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-twin.XXXXXX") || exit 1
	cpu="$twin/memunet"
	echo "training the CPU twin ($TRAIN_STEPS quickstart steps) ..."
	if go build -o "$cpu" ./cmd/memunet &&
		"$cpu" train --config configs/quickstart.yaml --device cpu --force --out "$twin/run" \
			--set train.steps="$TRAIN_STEPS" --set train.val_every="$TRAIN_STEPS" --set output.progress=none >"$twin/log" 2>&1 &&
		valid_json "$twin/run/summary.json"; then
		cp "$twin/run/summary.json" "$DIR/cpu-twin.json"
	else
		echo "the CPU twin failed:" >&2
		tail -5 "$twin/log" >&2
		rm -rf "$twin"
		exit 1
	fi
	rm -rf "$twin"
	bytes=$(du -sb "$DIR" | cut -f1)
	echo "built $DIR: $((bytes / 1048576)) MiB ($bytes bytes; the device run may carry 48 MiB)"
	[ "$bytes" -le $((48 << 20)) ] || {
		echo "$DIR is over 48 MiB" >&2
		exit 1
	}
	exit 0
	;;
run) ;;
*) usage ;;
esac

shift
CPU=0
if [ "${1:-}" = --cpu ]; then
	CPU=1
	shift
fi
[ $# -ge 1 ] || usage
OUT=$1
DIR=${2:-bin/gpu-check}
mkdir -p "$OUT" || exit 1
if [ "$CPU" = 1 ]; then
	DEVICE=cpu MODE=cpu-smoke
	SIZES=${SIZES:-32} STEPS=${STEPS:-2} TRAIN_STEPS=${TRAIN_STEPS:-4} BENCH_STEPS=${BENCH_STEPS:-2}
	memunet=${MEMUNET:-bin/memunet}
	if [ -z "${MEMUNET:-}" ] && command -v go >/dev/null; then
		go build -o "$memunet" ./cmd/memunet || exit 1 # as the tree is now
	fi
else
	DEVICE=cuda MODE=gpu
	SIZES=${SIZES:-128 256} STEPS=${STEPS:-5} TRAIN_STEPS=${TRAIN_STEPS:-200} BENCH_STEPS=${BENCH_STEPS:-10}
	memunet=$DIR/memunet-gpu
fi
VARIANTS=baseline,checkpoint,fp16,bf16,accum4,all,offload
read -r -a sizes <<<"$SIZES"
first=${sizes[0]}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
mkdir -p "$WORK/steps"
LOG=$OUT/gpu-check.log
: >"$LOG"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
TOTAL=0
NSTEP=0
FAILED=0
CHILD=""
FINISHED=false
NOTE=""

# write_json writes OUT/gpu-check.json whole: the run so far and every
# step's record, then renames it into place.
write_json() {
	local f sep=""
	{
		printf '{\n  "check": "memunet tools/check/gpu-check.sh", "mode": "%s", "device": "%s",\n' "$MODE" "$DEVICE"
		printf '  "started": "%s", "updated": "%s", "finished": %s, "note": %s,\n' \
			"$started" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$FINISHED" "$(json_string "$NOTE")"
		printf '  "sizes": [%s], "steps_per_variant": %d, "train_steps": %d, "limits_s_total": %d,\n' \
			"$(printf '%s\n' "${sizes[@]}" | paste -sd, -)" "$STEPS" "$TRAIN_STEPS" "$TOTAL"
		printf '  "cpu_twin": '
		json_file "$DIR/cpu-twin.json"
		printf ',\n  "steps": [\n'
		for f in "$WORK"/steps/*.json; do
			[ -e "$f" ] || continue
			printf '%s    ' "$sep"
			cat "$f"
			sep=$',\n'
		done
		printf '\n  ]\n}\n'
	} >"$OUT/gpu-check.json.tmp" && mv -f "$OUT/gpu-check.json.tmp" "$OUT/gpu-check.json"
}

finish() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$CHILD" ]; then
		kill -TERM "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
	fi
	[ "$FINISHED" = true ] || NOTE="stopped (exit $rc) before every step ran${NOTE:+; $NOTE}"
	write_json
	rm -rf "$WORK"
	echo "wrote $OUT/gpu-check.json"
	exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# limit is a step's time limit: its default, or GPU_CHECK_LIMITS's.
limit() {
	local kv
	for kv in ${GPU_CHECK_LIMITS:-}; do
		[ "${kv%%=*}" = "$1" ] && {
			echo "${kv#*=}"
			return
		}
	done
	echo "$2"
}

# limited SECS CMD... runs CMD for at most SECS seconds (TERM to it and
# its children, then KILL 5 s later) with its output in the log, in the
# background so that a signal to this script stops it at once; its exit
# status (124: timed out). With CAPTURE set, the output goes to that file
# first, then into the log.
limited() {
	local secs=$1 to=${CAPTURE:-$LOG}
	shift
	[ "$secs" -gt 0 ] || return 124
	[ "$to" = "$LOG" ] || : >"$to"
	timeout --kill-after=5 "$secs" "$@" >>"$to" 2>&1 &
	CHILD=$!
	wait "$CHILD"
	local rc=$?
	CHILD=""
	[ "$to" = "$LOG" ] || cat "$to" >>"$LOG"
	return $rc
}

# Step state: its name, limit and deadline, and its record's parts.
STEP="" STEP_LIMIT=0 STEP_START=0 STATUS="" RESULT=null DETAIL=""

begin() {
	STEP=$1
	STEP_LIMIT=$(limit "$1" "$2")
	TOTAL=$((TOTAL + STEP_LIMIT))
	STEP_START=${EPOCHREALTIME/./}
	STATUS="" RESULT=null DETAIL=""
	printf '\n===== %s (limit %d s) =====\n' "$STEP" "$STEP_LIMIT" >>"$LOG"
	printf '%-17s ' "$STEP"
}

# left is the seconds left of the step's limit.
left() { echo $((STEP_LIMIT - (${EPOCHREALTIME/./} - STEP_START) / 1000000)); }

# status_of names an exit status: passed, timed out or failed.
status_of() {
	case $1 in
	0) echo passed ;;
	124 | 137) echo "timed out" ;;
	*) echo "failed (exit $1)" ;;
	esac
}

# end writes the step's record and the JSON.
end() {
	local ms=$(((${EPOCHREALTIME/./} - STEP_START) / 1000))
	NSTEP=$((NSTEP + 1))
	case $STATUS in failed* | "timed out")
		FAILED=$((FAILED + 1))
		[ -n "$DETAIL" ] || DETAIL=$(grep -v '^\s*$' "$LOG" | tail -1)
		;;
	esac
	{
		printf '{"step": %s, "status": %s, "seconds": %d.%03d, "limit_s": %d, "detail": %s, "result": ' \
			"$(json_string "$STEP")" "$(json_string "$STATUS")" $((ms / 1000)) $((ms % 1000)) "$STEP_LIMIT" "$(json_string "$DETAIL")"
		if [ "$RESULT" = null ]; then printf null; else json_file "$RESULT"; fi
		printf '}'
	} >"$WORK/steps/$(printf %02d "$NSTEP").json"
	write_json
	printf '%-12s %4d.%03d s  %s\n' "$STATUS" $((ms / 1000)) $((ms % 1000)) "$DETAIL"
}

echo "memunet gpu-check ($MODE): results in $OUT/gpu-check.json"
write_json

# 1. The GPU: name, driver, CUDA version, memory.
begin gpu 10
if command -v nvidia-smi >/dev/null; then
	limited "$(left)" nvidia-smi
	rc=$?
	q=$(timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_cap --format=csv,noheader 2>&1 | head -1)
	cudav=$(timeout 10 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1 | cut -d' ' -f3)
	IFS=',' read -r name driver total used cc <<<"$q"
	printf '{"name": %s, "driver": %s, "cuda": %s, "memory_total": %s, "memory_used": %s, "compute_capability": %s}' \
		"$(json_string "${name# }")" "$(json_string "${driver# }")" "$(json_string "$cudav")" "$(json_string "${total# }")" \
		"$(json_string "${used# }")" "$(json_string "${cc# }")" >"$WORK/gpu.json"
	RESULT=$WORK/gpu.json STATUS=$(status_of $rc) DETAIL="$q, CUDA $cudav"
	if [ "$rc" != 0 ]; then
		RESULT=null DETAIL=$(head -1 <<<"$q")
		[ "$CPU" = 0 ] || STATUS=skipped # the CPU run has no GPU to ask about
	fi
else
	STATUS=skipped DETAIL="no nvidia-smi here"
fi
end

# 2. Conformance on cuda:0; 3. its first failing cases again with sync
# launches.

# CHANGED_GROUPS are the conformance groups whose CUDA kernels issue 47
# changed: the fused BatchNorm+ReLU and upsample+concat (and Composed/'s
# compositions they are held to), batch norm's apply without a division a
# value, the one finite check a step and the loss's one copy.
CHANGED_GROUPS='BatchNorm|BatchNormBack|BatchNormReLU|BatchNormReLUBack|UpsampleConcat|UpsampleConcatBack|UnscaleCheck|LossSums'

# conformance_groups prints, as a JSON object, each of CHANGED_GROUPS (and
# its Composed/ twin) that the log names: its own status and how many of
# its subtests passed and failed.
conformance_groups() {
	awk -v groups="$CHANGED_GROUPS" '
	BEGIN { n = split(groups, g, "|"); for (i = 1; i <= n; i++) want[g[i]] = 1 }
	match($0, /--- (PASS|FAIL|SKIP): [^ ]+/) {
		st = substr($0, RSTART + 4, 4)
		k = split(substr($0, RSTART + 10, RLENGTH - 10), p, "/")
		for (j = 2; j <= k; j++) {
			if (!(p[j] in want)) continue
			key = (j > 2 && p[j - 1] == "Composed") ? "Composed/" p[j] : p[j]
			if (!(key in seen)) { seen[key] = 1; order[++m] = key }
			if (j == k) status[key] = st
			else if (st == "PASS") passed[key]++
			else if (st == "FAIL") failed[key]++
			break
		}
	}
	END {
		printf "{"
		for (i = 1; i <= m; i++) {
			key = order[i]
			printf "%s\"%s\": {\"status\": \"%s\", \"passed\": %d, \"failed\": %d}", (i > 1 ? ", " : ""), key, status[key], passed[key], failed[key]
		}
		printf "}"
	}' "$1"
}

failing=()
begin conformance 45
if [ -x "$DIR/cuda-backend.test" ]; then
	CAPTURE=$OUT/conformance.log limited "$(left)" "$DIR/cuda-backend.test" -test.run '^TestConformance$' -test.v
	rc=$?
	pass=$(grep -c -- '--- PASS' "$OUT/conformance.log")
	fails=$(grep -c -- '--- FAIL' "$OUT/conformance.log")
	mapfile -t failing < <(grep -o -- '--- FAIL: [^ ]*' "$OUT/conformance.log" | cut -d' ' -f3 |
		awk '{n[NR] = $0} END {for (i = 1; i <= NR; i++) {leaf = 1; for (j = 1; j <= NR; j++) if (index(n[j], n[i] "/") == 1) leaf = 0; if (leaf) print n[i]}}')
	described=$(grep -m1 -o 'conformance_test.go:[0-9]*: .*' "$OUT/conformance.log" | cut -d' ' -f2-)
	{
		printf '{"passed": %d, "failed": %d, "device": %s, "failing": [' "$pass" "$fails" "$(json_string "$described")"
		sep=""
		for f in "${failing[@]:0:20}"; do
			printf '%s%s' "$sep" "$(json_string "$f")"
			sep=", "
		done
		printf '], "groups": '
		conformance_groups "$OUT/conformance.log"
		printf '}'
	} >"$WORK/conformance.json"
	RESULT=$WORK/conformance.json STATUS=$(status_of $rc)
	if grep -q -- '--- SKIP: TestConformance' "$OUT/conformance.log"; then
		STATUS=skipped DETAIL=$(grep -m1 -B1 -- '--- SKIP: TestConformance' "$OUT/conformance.log" | head -1 | sed 's/^ *conformance_test.go:[0-9]*: //')
	else
		DETAIL="$pass passed, ${#failing[@]} failing cases"
		# The fused kernels' groups, where any of them failed.
		bad=$(grep -o -- '--- FAIL: TestConformance/[^ ]*' "$OUT/conformance.log" | cut -d' ' -f3 | cut -d/ -f2- |
			grep -E -o "^(Composed/)?($CHANGED_GROUPS)(/|\$)" | sed 's|/$||' | sort -u | paste -sd, -)
		[ -z "$bad" ] || DETAIL+="; failing among the changed groups: $bad"
	fi
else
	STATUS=skipped DETAIL="no $DIR/cuda-backend.test (tools/check/gpu-check.sh build)"
fi
end

begin conformance-sync 20
if [ ${#failing[@]} -eq 0 ]; then
	STATUS=skipped DETAIL="no failing case"
else
	: >"$WORK/sync.json"
	printf '[' >"$WORK/sync.json"
	sep=""
	for f in "${failing[@]:0:3}"; do
		pattern=$(printf '%s' "$f" | sed 's/[][\.*^$+?(){}|]/\\&/g; s|/|$/^|g')
		MEMUNET_CUDA_SYNC=1 CAPTURE=$WORK/sync.log limited "$(left)" "$DIR/cuda-backend.test" -test.run "^$pattern\$" -test.v
		rc=$?
		err=$(grep -m1 -o 'cuda:[0-9]*: .*' "$WORK/sync.log")
		printf '%s{"case": %s, "status": %s, "error": %s}' "$sep" "$(json_string "$f")" "$(json_string "$(status_of $rc)")" \
			"$(json_string "$err")" >>"$WORK/sync.json"
		sep=", "
	done
	printf ']' >>"$WORK/sync.json"
	n=${#failing[@]}
	RESULT=$WORK/sync.json STATUS=done DETAIL="$n failing; the first $((n < 3 ? n : 3)) again with sync launches"
fi
end

# 4. What a page move costs.
begin page-moves 10
if [ -x "$DIR/cuda-backend.test" ]; then
	CAPTURE=$WORK/pages.log limited "$(left)" "$DIR/cuda-backend.test" -test.run '^TestPageMoves$' -test.v
	rc=$?
	line=$(grep -m1 -o 'page-moves: {.*}' "$WORK/pages.log" | cut -d' ' -f2-)
	if [ -n "$line" ]; then
		printf '%s' "$line" >"$WORK/pages.json"
		RESULT=$WORK/pages.json DETAIL=$line
	fi
	STATUS=$(status_of $rc)
	if grep -q -- '--- SKIP: TestPageMoves' "$WORK/pages.log"; then STATUS=skipped DETAIL="no GPU here"; fi
else
	STATUS=skipped DETAIL="no $DIR/cuda-backend.test"
fi
end

# 5. Each convolution of the seed UNet: memunet's kernels, then cuDNN's.
begin layers 40
if [ -x "$DIR/cuda-backend.test" ]; then
	MEMUNET_LAYER_BENCH=$WORK/layers.json MEMUNET_LAYER_BENCH_S=$(($(left) > 15 ? $(left) - 10 : 5)) CAPTURE=$WORK/layers.log \
		limited "$(left)" "$DIR/cuda-backend.test" -test.run '^TestLayerBench$' -test.v
	rc=$?
	STATUS=$(status_of $rc)
	if grep -q -- '--- SKIP: TestLayerBench' "$WORK/layers.log"; then
		STATUS=skipped DETAIL="no GPU here"
	elif valid_json "$WORK/layers.json"; then
		RESULT=$WORK/layers.json
		DETAIL="$(grep -c '"layer"' "$WORK/layers.json") rows"
		# The best TFLOP/s of each precision.
		command -v python3 >/dev/null && DETAIL+=$(python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
best = {}
for r in rows:
    best[r["precision"]] = max(best.get(r["precision"], 0), r["tflops"])
print("; best TFLOP/s: " + ", ".join("%s %.1f" % kv for kv in sorted(best.items())))' "$WORK/layers.json" 2>/dev/null)
	fi
else
	STATUS=skipped DETAIL="no $DIR/cuda-backend.test"
fi
STATUS_LAYERS=$STATUS
end

# 5b. The occupancy experiment: the same layers, two blocks an SM.
begin layers-2blocks 20
if [ -x "$DIR/cuda-backend.test" ] && [ "$STATUS_LAYERS" = passed ]; then
	MEMUNET_CUDA_TC_BLOCKS=2 MEMUNET_LAYER_BENCH=$WORK/layers2.json MEMUNET_LAYER_BENCH_S=$(($(left) > 13 ? $(left) - 8 : 5)) \
		CAPTURE=$WORK/layers2.log limited "$(left)" "$DIR/cuda-backend.test" -test.run '^TestLayerBench$' -test.v
	rc=$?
	STATUS=$(status_of $rc)
	if valid_json "$WORK/layers2.json"; then
		RESULT=$WORK/layers2.json
		# Time summed over the rows both measured, per precision: two blocks / one.
		command -v python3 >/dev/null && DETAIL=$(python3 -c '
import json, sys, collections
one, two = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda r: (r["base"], r["size"], r["layer"], r["pass"], r["precision"])
base = {key(r): r["ms"] * r["count"] for r in one}
tot = collections.defaultdict(lambda: [0.0, 0.0])
for r in two:
    if key(r) in base:
        t = tot[r["precision"]]; t[0] += r["ms"] * r["count"]; t[1] += base[key(r)]
print("two blocks / one, time over the rows both ran: " + ", ".join("%s %.2fx" % (p, a / b) for p, (a, b) in sorted(tot.items()) if b))' \
			"$WORK/layers.json" "$WORK/layers2.json" 2>/dev/null)
	fi
else
	STATUS=skipped DETAIL="the layers step did not pass here"
fi
end

begin pytorch-layers 35
if [ "$DEVICE" != cuda ]; then
	STATUS=skipped DETAIL="PyTorch's CUDA figures are for the GPU run"
elif ! limited 15 python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)'; then
	STATUS=skipped DETAIL="torch with CUDA is not importable here"
else
	CAPTURE=$WORK/torch-layers.log limited "$(left)" python3 tools/pytorch/pytorch_layers.py --out "$WORK/torch-layers.json" \
		--seconds $(($(left) > 15 ? $(left) - 10 : 5))
	rc=$?
	STATUS=$(status_of $rc)
	if valid_json "$WORK/torch-layers.json"; then
		RESULT=$WORK/torch-layers.json DETAIL=$(grep '^{' "$WORK/torch-layers.log" | tail -1)
	fi
fi
end

# 6. cuDNN on cuda:0: a handle, then cudnnFind's algorithm tables for the
# seed UNet's convolutions per precision, which the policy's tests take as
# fixtures (backend/cuda/cudnn/testdata).

# test_status prints what go test -v said of test NAME in FILE: PASS,
# FAIL or SKIP, or nothing where it did not finish.
test_status() { grep -E -m1 -o -- "^--- (PASS|FAIL|SKIP): $2 " "$1" | cut -d' ' -f2 | tr -d :; }

# test_says prints the first line test NAME logged in FILE, without its
# file and line.
test_says() {
	awk -v run="=== RUN   $2" '
	$0 == run { on = 1; next }
	on && /^(=== |--- )/ { exit }
	on && /^ +[A-Za-z0-9_]+\.go:[0-9]+: / { sub(/^ +[A-Za-z0-9_]+\.go:[0-9]+: /, ""); print; exit }' "$1"
}

# wheel_cudnn prints a libcudnn.so.9 (else .8) under python3's
# site-packages folders, as PyTorch's wheels install it (nvidia/*/lib,
# torch/lib), or nothing.
wheel_cudnn() {
	command -v python3 >/dev/null || return 0
	local found
	found=$(timeout 10 python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null |
		while read -r d; do
			[ -d "$d" ] && find "$d/nvidia" "$d/torch/lib" -maxdepth 3 -name 'libcudnn.so.[89]' 2>/dev/null
		done)
	grep -m1 '\.so\.9$' <<<"$found" || grep -m1 '\.so\.8$' <<<"$found" || true
}

begin cudnn 60
if [ -x "$DIR/cudnn.test" ]; then
	tables=$WORK/cudnn-tables
	mkdir -p "$tables"
	cudnn_env=(MEMUNET_CUDNN_TABLES="$tables")
	lookup="the loader's own (MEMUNET_CUDNN, libcudnn.so.9/.8 on the loader path, PyTorch's wheels)"
	# The handle first, in a process of its own, so that a fault there is
	# named and the tables' run knows which cuDNN to take.
	CAPTURE=$WORK/cudnn-handle.log limited "$(left)" env "${cudnn_env[@]}" "$DIR/cudnn.test" -test.run '^TestHandleOnDevice$' -test.v
	rc=$?
	handle=$(test_status "$WORK/cudnn-handle.log" TestHandleOnDevice)
	why=$(test_says "$WORK/cudnn-handle.log" TestHandleOnDevice)
	# No cuDNN by the loader's own look-up on a GPU: once more with the one
	# a PyTorch wheel ships, named, its folder and its siblings' on the
	# loader path (cuDNN 9 opens its engine libraries by name).
	if [ "$DEVICE" = cuda ] && [ "$handle" = SKIP ] && [[ $why == "no cuDNN"* ]] && [ "$(left)" -gt 20 ] &&
		lib=$(wheel_cudnn) && [ -n "$lib" ]; then
		libdir=$(dirname "$lib") path=$(dirname "$lib")
		for d in "${lib%/nvidia/*}"/nvidia/*/lib; do [ -d "$d" ] && [ "$d" != "$libdir" ] && path+=":$d"; done
		cudnn_env+=(MEMUNET_CUDNN="$lib" LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
		lookup="MEMUNET_CUDNN=$lib, after the loader's own look-up said: $why"
		CAPTURE=$WORK/cudnn-handle.log limited "$(left)" env "${cudnn_env[@]}" "$DIR/cudnn.test" -test.run '^TestHandleOnDevice$' -test.v
		rc=$?
		handle=$(test_status "$WORK/cudnn-handle.log" TestHandleOnDevice)
		why=$(test_says "$WORK/cudnn-handle.log" TestHandleOnDevice)
	fi
	[ -n "$handle" ] || handle=$(status_of $rc)
	library="" record="not run: the handle did not pass" fp32="not run" logs=""
	[ "$handle" = SKIP ] || library=$why
	# Then the tables in tf32, fp16 and bf16 (each written as it is done).
	if [ "$handle" = PASS ]; then
		CAPTURE=$WORK/cudnn.log limited "$(left)" env "${cudnn_env[@]}" "$DIR/cudnn.test" -test.run '^TestRecordAlgorithmTables$' -test.v
		rc=$?
		record=$(test_status "$WORK/cudnn.log" TestRecordAlgorithmTables)
		[ -n "$record" ] || record=$(status_of $rc)
		logs=$(grep -E -o 'record_test\.go:[0-9]+: (tf32|fp32|fp16|bf16): .*' "$WORK/cudnn.log" | cut -d' ' -f2-)
	fi
	# Exact fp32 (FMA math) while time is left: its own run, so that a
	# slow one loses only itself.
	if [ "$record" = PASS ]; then
		if [ "$(left)" -ge 15 ]; then
			CAPTURE=$WORK/cudnn32.log limited "$(left)" env "${cudnn_env[@]}" MEMUNET_CUDNN_TABLE_PRECISIONS=fp32 \
				"$DIR/cudnn.test" -test.run '^TestRecordAlgorithmTables$' -test.v
			fp32=$(status_of $?)
			logs+=$'\n'$(grep -E -o 'record_test\.go:[0-9]+: fp32: .*' "$WORK/cudnn32.log" | cut -d' ' -f2-)
		else
			fp32="not run: $(left) s left"
		fi
	fi
	# The tables as the test wrote them, into OUT.
	copied=() files=()
	for f in "$tables"/*.json; do
		if valid_json "$f" && mkdir -p "$OUT/cudnn-tables" && cp "$f" "$OUT/cudnn-tables/"; then
			copied+=("$(basename "$f" .json)") files+=("$OUT/cudnn-tables/$(basename "$f")")
		fi
	done
	summary=null
	if [ ${#copied[@]} -gt 0 ] && command -v python3 >/dev/null; then
		# Per table and pass: the summed time of the fastest algorithm that
		# ran, and of the fastest deterministic one (as the policy counts it).
		summary=$(python3 -c '
import json, sys
nondet = {"backward_data": {0}, "backward_filter": {0, 3}}
out = {}
for p in sys.argv[1:]:
    t = json.load(open(p))
    s = {"cudnn": t.get("cudnn"), "device": t.get("device"), "entries": len(t["layers"]), "passes": {}}
    for e in t["layers"]:
        ran = [r for r in e["results"] if r["status"] == 0 and r["time_ms"] >= 0]
        det = [r for r in ran if r["deterministic"] and r["algo"] not in nondet.get(e["pass"], ())]
        ps = s["passes"].setdefault(e["pass"], {"fastest_ms": 0.0, "fastest_deterministic_ms": 0.0, "without_deterministic": 0, "most_workspace_bytes": 0})
        if ran:
            ps["fastest_ms"] += min(r["time_ms"] for r in ran)
        if det:
            best = min(det, key=lambda r: (r["time_ms"], r["workspace_bytes"]))
            ps["fastest_deterministic_ms"] += best["time_ms"]
            ps["most_workspace_bytes"] = max(ps["most_workspace_bytes"], best["workspace_bytes"])
        else:
            ps["without_deterministic"] += 1
    out[t["precision"]] = s
print(json.dumps(out))' "${files[@]}" 2>/dev/null)
		[[ $summary == "{"* ]] || summary=null
	fi
	{
		printf '{"handle": %s, "record": %s, "record_fp32": %s, "library": %s, "lookup": %s, "tables": [' \
			"$(json_string "$handle")" "$(json_string "$record")" "$(json_string "$fp32")" "$(json_string "$library")" "$(json_string "$lookup")"
		sep=""
		for p in "${copied[@]}"; do
			printf '%s%s' "$sep" "$(json_string "cudnn-tables/$p.json")"
			sep=", "
		done
		printf '], "log": %s, "summary": %s}' "$(json_string "$logs")" "$summary"
	} >"$WORK/cudnn.json"
	RESULT=$WORK/cudnn.json STATUS=$(status_of $rc)
	if [ "$handle" = SKIP ]; then
		STATUS=skipped DETAIL=$why
	else
		DETAIL="handle ${handle:-none}, tables ${record:-none} (fp32: $fp32); OUT/cudnn-tables: ${copied[*]:-none}; $library"
	fi
else
	STATUS=skipped DETAIL="no $DIR/cudnn.test (tools/check/gpu-check.sh build)"
fi
end

# 7. compare per size, and the caching allocator at the first.
compare() {
	local name=$1 size=$2 variants=$3
	shift 3
	limited "$(left)" "$memunet" compare --config configs/baseline.yaml --device "$DEVICE" --steps "$STEPS" --variants "$variants" \
		--set model.base=16 --set model.depth=4 --set train.batch_size=4 --set data.size="$size" --set data.count=64 \
		"$@" --out "$WORK/$name"
	local rc=$?
	STATUS=$(status_of $rc)
	if valid_json "$WORK/$name/compare.json"; then
		RESULT=$WORK/$name/compare.json
		DETAIL="$(grep -c '"variant"' "$WORK/$name/compare.json") variants"
		# The device's used bytes less the context's, beyond the pool's
		# reserved, per variant (a GPU run), and the pages moved.
		command -v python3 >/dev/null && DETAIL+=$(python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
beyond = ["%s %+.1f MiB" % (r["variant"], r["device_beyond_pool_bytes"] / 2**20) for r in rows if "device_beyond_pool_bytes" in r]
pages = ["%s %d/%d" % (r["variant"], r.get("pages_mapped", 0), r.get("pages_unmapped", 0)) for r in rows if "pages_mapped" in r]
print(("; device less context beyond the pool: " + ", ".join(beyond) if beyond else "") +
      ("; pages mapped/unmapped: " + ", ".join(pages) if pages else ""))' "$WORK/$name/compare.json" 2>/dev/null)
	fi
}
limits=(55 65)
for i in "${!sizes[@]}"; do
	begin "compare-${sizes[$i]}" "${limits[$i]:-90}"
	compare "compare-${sizes[$i]}" "${sizes[$i]}" "$VARIANTS"
	end
done
begin compare-caching 25
compare compare-caching "$first" baseline,checkpoint,all --set memory.allocator=caching
end

# 8. memunet bench at the seed UNet's width: the median step, the time per
# layer kind, and on CUDA the device's work per optimizer step.

# bench_row prints memunet bench's output in FILE, one variant's, as JSON
# members: its row's cells, then the device's work per optimizer step
# where the backend counts it (the CUDA backend); with mode=detail, one
# line for the step's detail instead.
bench_row() {
	awk -v mode="${2:-json}" '
	function cells(s, a) { sub(/^ +/, "", s); sub(/ +$/, "", s); return split(s, a, /  +/) }
	function num(v) { return v ~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ ? v : "null" }
	function esc(v) { gsub(/[\\"]/, "", v); gsub(/\t/, " ", v); return v }
	/^ *variant  / { nh = cells($0, h); table = 1; next }
	table && /^step ms: the median/ { table = 0; next }
	table && !row {
		row = 1
		nc = cells($0, c)
		if (nc != nh) {
			err = ""
			for (i = 2; i <= nc; i++) err = err (i > 2 ? " " : "") c[i]
			json = "\"error\": \"" esc(err) "\""
			line = c[1] ": " err
			next
		}
		split(c[4], spread, /\.\./)
		json = "\"micro_x_acc\": \"" esc(c[2]) "\", \"step_ms\": " num(c[3]) ", \"step_ms_min\": " num(spread[1]) ", \"step_ms_max\": " num(spread[2]) ", \"gflops\": " num(c[5]) ", \"kind_ms\": {"
		for (i = 7; i <= nh - 2; i++) json = json (i > 7 ? ", " : "") "\"" esc(h[i]) "\": " num(c[i])
		json = json "}, \"optimizer_ms\": " num(c[nh - 1]) ", \"other_ms\": " num(c[nh])
		line = c[1] " " c[3] " ms"
		next
	}
	/: [0-9.]+ kernel launches, [0-9.]+ blocking copies to the host, [0-9.]+ waits for all work/ {
		counted = 1
		launches = $2
		copies = $5
		syncs = $11
	}
	END {
		if (!row) {
			json = "\"error\": \"no row in its output\""
			line = "no row"
		}
		if (counted) {
			json = json ", \"counted\": true, \"launches_per_step\": " num(launches) ", \"copies_per_step\": " num(copies) ", \"syncs_per_step\": " num(syncs)
			line = line " (" launches " launches, " copies " copies to the host, " syncs " syncs a step)"
		} else json = json ", \"counted\": false"
		print (mode == "detail" ? line : json)
	}' "$1"
}

begin bench 35
if [ "$CPU" = 1 ]; then bbase=16 bsize=$first; else bbase=64 bsize=256; fi
printf '[' >"$WORK/bench.json"
sep="" STATUS=passed lines=() left_out=()
# baseline and fp16 always, the others while 12 s are left; each at most
# 16 s, so that a slow one leaves the next its time.
for v in baseline fp16 bf16 accum4; do
	n=$(left)
	case $v in baseline | fp16) min=3 ;; *) min=12 ;; esac
	if [ "$n" -lt "$min" ]; then
		left_out+=("$v")
		continue
	fi
	CAPTURE=$WORK/bench.log limited "$((n < 16 ? n : 16))" "$memunet" bench --config configs/baseline.yaml --device "$DEVICE" \
		--steps "$BENCH_STEPS" --variants "$v" --set model.base="$bbase" --set model.depth=4 --set train.batch_size=4 \
		--set data.size="$bsize" --set data.count=64
	rc=$?
	st=$(status_of $rc)
	row=$(bench_row "$WORK/bench.log")
	if [ "$rc" = 0 ] && [[ $row == '"error"'* ]]; then st="failed (no row)"; fi
	[ "$st" = passed ] || STATUS=$st
	printf '%s{"variant": "%s", "status": %s, "base": %d, "size": %d, "batch": 4, "depth": 4, "steps": %d, %s, "output": %s}' \
		"$sep" "$v" "$(json_string "$st")" "$bbase" "$bsize" "$BENCH_STEPS" "$row" "$(json_string "$(tail -c 4000 "$WORK/bench.log")")" >>"$WORK/bench.json"
	sep=", "
	lines+=("$(bench_row "$WORK/bench.log" detail)")
	[ "$rc" = 0 ] || lines[-1]+=" [$st]"
done
printf ']' >>"$WORK/bench.json"
RESULT=$WORK/bench.json
DETAIL="base $bbase, $bsize px: $(printf '%s; ' "${lines[@]}")"
DETAIL=${DETAIL%; }
[ ${#left_out[@]} -eq 0 ] || DETAIL+="; no time left for ${left_out[*]}"
end

# 9. The quickstart trained on the device, beside the CPU twin (build).
begin train 35
limited "$(left)" "$memunet" train --config configs/quickstart.yaml --device "$DEVICE" --force --out "$WORK/train" \
	--set train.steps="$TRAIN_STEPS" --set train.val_every="$TRAIN_STEPS" --set output.progress=plain
rc=$?
STATUS=$(status_of $rc)
if valid_json "$WORK/train/summary.json"; then
	RESULT=$WORK/train/summary.json
	DETAIL=$(grep -o '"final_loss": *[0-9.e+-]*' "$WORK/train/summary.json" | head -1)
fi
end

# 10. PyTorch on the same GPU, where python3's torch has CUDA.
begin pytorch 45
if [ "$DEVICE" != cuda ]; then
	STATUS=skipped DETAIL="PyTorch's CUDA figures are for the GPU run"
elif ! limited "$(left)" python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)'; then
	STATUS=skipped DETAIL="torch with CUDA is not importable here"
else
	printf '[' >"$WORK/pytorch.json"
	sep=""
	for v in baseline:"" checkpoint:"--checkpoint" fp16:"--precision fp16" bf16:"--precision bf16" \
		accum4:"--accumulate 4" all:"--checkpoint --precision fp16 --accumulate 4" offload:"--checkpoint --offload"; do
		n=$(left)
		[ "$n" -gt 5 ] || break
		# shellcheck disable=SC2086
		CAPTURE=$WORK/torch.log limited "$((n < 25 ? n : 25))" python3 tools/pytorch/pytorch_unet.py --device cuda --base 16 --depth 4 \
			--batch 4 --size "$first" --classes 4 --steps "$STEPS" ${v#*:}
		line=$(grep '^{' "$WORK/torch.log" | tail -1)
		if [ "${line:0:1}" = "{" ]; then
			printf '%s{"variant": "%s", "size": %d, "result": %s}' "$sep" "${v%%:*}" "$first" "$line" >>"$WORK/pytorch.json"
			sep=", "
		fi
	done
	printf ']' >>"$WORK/pytorch.json"
	RESULT=$WORK/pytorch.json STATUS=passed DETAIL="torch with CUDA: $(grep -o '"variant"' "$WORK/pytorch.json" | wc -l) variants at $first px"
fi
end

FINISHED=true
NOTE="$FAILED step(s) failed or timed out"
echo "every step ran ($TOTAL s of limits); $NOTE"
[ "$FAILED" = 0 ]
