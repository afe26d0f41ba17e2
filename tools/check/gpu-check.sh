#!/usr/bin/env bash
# memunet's device check: the CUDA backend on a real GPU, with cuDNN and
# with memunet's own convolutions, beside PyTorch on the same GPU, brought
# back as one JSON file by one command that returns within 600 s (its
# steps' limits add up to 470 s).
#
#   tools/check/gpu-check.sh build [DIR]
#       Here (Go with cgo and a C compiler; no CUDA toolkit, no GPU): the
#       gpu build's stripped binaries into DIR (default bin/gpu-check:
#       memunet-gpu and cuda-backend.test, at most 48 MiB, which build
#       checks). DIR is the one folder that travels with the tree.
#   tools/check/gpu-check.sh run OUT [DIR]
#       There, from the repository root (no Go needed). Every step runs
#       under its own time limit, and OUT/gpu-check.json is rewritten whole
#       after each step (and closed by an exit trap), so it always parses;
#       it holds each step's raw results (compare.json rows, PyTorch's
#       JSON lines, bench's rows). OUT/gpu-check.log holds every step's
#       output, OUT/conformance.log and OUT/conformance-cudnn.log the
#       conformance suite's, and OUT/cudnn-tables/<precision>.json cuDNN's
#       algorithm tables (on a GPU with a cuDNN only). Nothing else is
#       written under OUT: at most 7 files, one folder down.
#   tools/check/gpu-check.sh run --cpu OUT [DIR]
#       The same steps with the CPU build (MEMUNET, else bin/memunet built
#       from the tree) on device cpu at tiny sizes: checks this script on
#       any machine. The steps that need a GPU run their binaries where
#       DIR has them (they skip, and the step records why) or are skipped
#       with the reason in the JSON.
#   run exits 0 when every step passed or was skipped, else 1.
#
# The steps of run and their time limits in seconds (issue 47's check:
# cuDNN as memunet's convolution provider against PyTorch). Every memunet
# process of one run shares one cuDNN Find cache (MEMUNET_CUDNN_CACHE in
# the run's scratch folder): the first variant measures, the rest and the
# same-seed runs choose from the same times.
#   gpu               10  nvidia-smi: the GPU, its driver and CUDA versions, memory
#   cudnn             25  a cuDNN handle on cuda:0 (TestHandleOnDevice);
#                         where the loader's own look-up finds no cuDNN,
#                         once more with MEMUNET_CUDNN naming a libcudnn.so.9
#                         or .8 under python3's site-packages (PyTorch's
#                         wheels), which every later step then uses
#   conformance       35  the backend conformance suite on cuda:0, memunet's
#                         kernels
#   conformance-cudnn 40  the same with cuDNN computing the convolutions
#                         (TestConformanceCUDNN), and its algorithm choices
#   conformance-sync  10  the first 3 failing cases again, each with
#                         MEMUNET_CUDA_SYNC=1, so a fault names its kernel
#   compare-cudnn-C   80  memunet compare of the 7 variants with cuda.conv
#                         cudnn at the first config C (BASExSIZE, batch 4,
#                         depth 4): pool bytes, the device's own
#                         (cuMemGetInfo) less the context's against the
#                         pool's reserved, step time, the provider per row
#   compare-memunet-C 50  5 variants (baseline, checkpoint, fp16, bf16,
#                         accum4) with cuda.conv memunet, the same run's
#                         baseline for cuDNN's gain
#   pytorch-C         60  PyTorch's 7 variants on the same GPU (TF32 on, as
#                         its default; cudnn.benchmark and
#                         cudnn.deterministic on), where python3's torch has
#                         CUDA; the ratios to compare-cudnn-C in the detail
#   same-seed         25  two runs of one seed with cuda.conv cudnn (the first
#                         config, STEPS steps): their weights compared bit
#                         for bit
#   bench             25  memunet bench, cuda.conv cudnn, at the first config:
#                         baseline, fp16 and accum4 (each at most 10 s), the median step, ms per layer
#                         kind, and on CUDA the device's work per optimizer
#                         step (kernel and library launches, blocking copies
#                         to the host and uploads, waits for all work) and
#                         the steps one read of the device answers
#   cudnn-tables      35  cudnnFind's algorithm tables for the seed UNet's
#                         convolutions (base 64, 256 px, batch 4) in tf32,
#                         fp16 and bf16 (TestRecordAlgorithmTables), into
#                         OUT/cudnn-tables: the policy's test fixtures
#   compare-cudnn-C2  40  compare-cudnn at the second config
#   pytorch-C2        35  pytorch at the second config
#
# Settings (environment): CONFIGS ("64x256 16x256"; --cpu "16x32"), STEPS
# (10; --cpu 2), BENCH_STEPS (10; --cpu 2), GPU_CHECK_LIMITS (per-step
# limits to override, e.g. "compare-cudnn-64x256=30 bench=10").
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
	mkdir -p "$DIR" || exit 1
	echo "building the gpu binaries into $DIR ..."
	go build -tags gpu -trimpath -ldflags='-s -w' -o "$DIR/memunet-gpu" ./cmd/memunet || exit 1
	go test -c -tags gpu -trimpath -ldflags='-s -w' -o "$DIR/cuda-backend.test" ./backend/cuda/driverapi || exit 1
	rm -f "$DIR/cudnn.test" "$DIR/cpu-twin.json" # what earlier versions of this check built
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
	CONFIGS=${CONFIGS:-16x32} STEPS=${STEPS:-2} BENCH_STEPS=${BENCH_STEPS:-2}
	memunet=${MEMUNET:-bin/memunet}
	if [ -z "${MEMUNET:-}" ] && command -v go >/dev/null; then
		go build -o "$memunet" ./cmd/memunet || exit 1 # as the tree is now
	fi
else
	DEVICE=cuda MODE=gpu
	CONFIGS=${CONFIGS:-64x256 16x256} STEPS=${STEPS:-10} BENCH_STEPS=${BENCH_STEPS:-10}
	memunet=$DIR/memunet-gpu
fi
VARIANTS=baseline,checkpoint,fp16,bf16,accum4,all,offload
read -r -a configs <<<"$CONFIGS"
first=${configs[0]}

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
		printf '  "configs": [%s], "steps_per_variant": %d, "limits_s_total": %d,\n' \
			"$(printf '"%s"\n' "${configs[@]}" | paste -sd, -)" "$STEPS" "$TOTAL"
		printf '  "steps": [\n'
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

# Helpers of the steps.

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
	/: [0-9.]+ kernel launches, [0-9.]+ blocking copies to the host, [0-9.]+ blocking uploads, [0-9.]+ waits for all work/ {
		counted = 1
		launches = $2
		copies = $5
		uploads = $11
		syncs = $14
		per_read = match($0, /read once every [0-9]+/) ? substr($0, RSTART + 16, RLENGTH - 16) : 1
	}
	END {
		if (!row) {
			json = "\"error\": \"no row in its output\""
			line = "no row"
		}
		if (counted) {
			json = json ", \"counted\": true, \"launches_per_step\": " num(launches) ", \"copies_per_step\": " num(copies) \
				", \"blocking_uploads_per_step\": " num(uploads) ", \"syncs_per_step\": " num(syncs) ", \"steps_per_read\": " num(per_read)
			line = line " (" launches " launches, " copies " copies to the host, " uploads " blocking uploads, " syncs " syncs a step; a read every " per_read " steps)"
		} else json = json ", \"counted\": false"
		print (mode == "detail" ? line : json)
	}' "$1"
}

# conformance_step runs TEST (TestConformance or TestConformanceCUDNN) of
# cuda-backend.test with ENV, its output into OUT/LOGNAME, and records
# what passed and failed; the failing cases are added to failing.
failing=()
conformance_step() {
	local test=$1 logname=$2
	shift 2
	if [ ! -x "$DIR/cuda-backend.test" ]; then
		STATUS=skipped DETAIL="no $DIR/cuda-backend.test (tools/check/gpu-check.sh build)"
		return
	fi
	local log=$OUT/$logname rc pass fails described mine=()
	CAPTURE=$log limited "$(left)" env "$@" "$DIR/cuda-backend.test" -test.run "^$test\$" -test.v
	rc=$?
	pass=$(grep -c -- '--- PASS' "$log")
	fails=$(grep -c -- '--- FAIL' "$log")
	mapfile -t mine < <(grep -o -- '--- FAIL: [^ ]*' "$log" | cut -d' ' -f3 |
		awk '{n[NR] = $0} END {for (i = 1; i <= NR; i++) {leaf = 1; for (j = 1; j <= NR; j++) if (index(n[j], n[i] "/") == 1) leaf = 0; if (leaf) print n[i]}}')
	failing+=("${mine[@]}")
	described=$(grep -m1 -o '_test.go:[0-9]*: cuda:.*' "$log" | cut -d' ' -f2-)
	{
		printf '{"passed": %d, "failed": %d, "device": %s, "failing": [' "$pass" "$fails" "$(json_string "$described")"
		local sep="" f
		for f in "${mine[@]:0:20}"; do
			printf '%s%s' "$sep" "$(json_string "$f")"
			sep=", "
		done
		printf '], "groups": '
		conformance_groups "$log"
		printf ', "choices": %s}' "$(json_string "$(grep -E -o 'cudnn_test\.go:[0-9]+: (conv|up-conv) .*' "$log" | cut -d' ' -f2-)")"
	} >"$WORK/$test.json"
	RESULT=$WORK/$test.json STATUS=$(status_of $rc)
	if grep -q -- "--- SKIP: $test" "$log"; then
		STATUS=skipped DETAIL=$(test_says "$log" "$test")
	else
		DETAIL="$pass passed, ${#mine[@]} failing cases"
		local bad
		bad=$(grep -o -- "--- FAIL: $test/[^ ]*" "$log" | cut -d' ' -f3 | cut -d/ -f2- |
			grep -E -o "^(Composed/)?($CHANGED_GROUPS)(/|\$)" | sed 's|/$||' | sort -u | paste -sd, -)
		[ -z "$bad" ] || DETAIL+="; failing among the changed groups: $bad"
	fi
}

# config_args prints memunet's settings for config BASExSIZE: depth 4,
# batch 4, 64 synthetic images.
config_args() {
	printf -- '--set model.base=%s --set model.depth=4 --set train.batch_size=4 --set data.size=%s --set data.count=64' "${1%x*}" "${1#*x}"
}

# compare_step runs memunet compare of VARIANTS at config C with cuda.conv
# CONV into WORK/NAME and records its rows.
compare_step() {
	local name=$1 c=$2 variants=$3 conv=$4
	# shellcheck disable=SC2046
	limited "$(left)" env "${cudnn_env[@]}" "$memunet" compare --config configs/baseline.yaml --device "$DEVICE" --steps "$STEPS" \
		--variants "$variants" $(config_args "$c") --set cuda.conv="$conv" --out "$WORK/$name"
	local rc=$?
	STATUS=$(status_of $rc)
	if valid_json "$WORK/$name/compare.json"; then
		RESULT=$WORK/$name/compare.json
		DETAIL="$(grep -c '"variant"' "$WORK/$name/compare.json") variants"
		# Per variant: the step, the provider, and the device's used bytes
		# less the context's beyond the pool's reserved (a GPU run).
		command -v python3 >/dev/null && DETAIL+=$(python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
print("; " + ", ".join("%s %.1f ms%s%s" % (r["variant"], r["step_ms_median"], " (" + r["conv"] + ")" if r.get("conv") else "",
    ", %+.1f MiB beyond the pool" % (r["device_beyond_pool_bytes"] / 2**20) if "device_beyond_pool_bytes" in r else "") for r in rows))' \
			"$WORK/$name/compare.json" 2>/dev/null)
	fi
}

# pytorch_step runs tools/pytorch/pytorch_unet.py's 7 variants at config C
# on the GPU (cudnn.benchmark and cudnn.deterministic on, TF32 as its
# default) and records their JSON lines, with the ratios to compare-cudnn-C.
pytorch_step() {
	local c=$1 v n line sep=""
	if [ "$DEVICE" != cuda ]; then
		STATUS=skipped DETAIL="PyTorch's CUDA figures are for the GPU run"
		return
	fi
	if ! limited "$(left)" python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)'; then
		STATUS=skipped DETAIL="torch with CUDA is not importable here"
		return
	fi
	printf '[' >"$WORK/pytorch-$c.json"
	for v in baseline:"" checkpoint:"--checkpoint" fp16:"--precision fp16" bf16:"--precision bf16" \
		accum4:"--accumulate 4" all:"--checkpoint --precision fp16 --accumulate 4" offload:"--checkpoint --offload"; do
		n=$(left)
		[ "$n" -gt 5 ] || break
		# shellcheck disable=SC2086
		CAPTURE=$WORK/torch.log limited "$((n < 20 ? n : 20))" python3 tools/pytorch/pytorch_unet.py --device cuda --base "${c%x*}" \
			--depth 4 --batch 4 --size "${c#*x}" --classes 4 --steps "$STEPS" --cudnn-benchmark --deterministic ${v#*:}
		line=$(grep '^{' "$WORK/torch.log" | tail -1)
		if [ "${line:0:1}" = "{" ]; then
			printf '%s{"variant": "%s", "config": "%s", "result": %s}' "$sep" "${v%%:*}" "$c" "$line" >>"$WORK/pytorch-$c.json"
			sep=", "
		fi
	done
	printf ']' >>"$WORK/pytorch-$c.json"
	RESULT=$WORK/pytorch-$c.json STATUS=passed
	DETAIL="$(grep -o '"variant"' "$WORK/pytorch-$c.json" | wc -l) variants at $c"
	command -v python3 >/dev/null && DETAIL+=$(python3 -c '
import json, sys
torch = {r["variant"]: r["result"] for r in json.load(open(sys.argv[1]))}
try:
    ours = {r["variant"]: r for r in json.load(open(sys.argv[2]))}
except (OSError, ValueError):
    ours = {}
out = []
for v, t in torch.items():
    m = ours.get(v)
    if m and not m.get("error") and t.get("max_memory_allocated"):
        out.append("%s %.2fx time, %.2fx memory" % (v, m["step_ms_median"] / t["step_ms_median"], m["peak_allocated_bytes"] / t["max_memory_allocated"]))
print("; memunet (cuDNN) / PyTorch: " + ", ".join(out) if out else "")' "$WORK/pytorch-$c.json" "$WORK/compare-cudnn-$c/compare.json" 2>/dev/null)
}

# Every memunet process of this run shares one Find cache.
cudnn_env=(MEMUNET_CUDNN_CACHE="$WORK/cudnn-find")

# 2. cuDNN on cuda:0: a handle, found by the loader's own look-up or
# else in PyTorch's wheels.
begin cudnn 25
if [ -x "$DIR/cuda-backend.test" ]; then
	lookup="the loader's own (MEMUNET_CUDNN, libcudnn.so.9/.8 on the loader path, PyTorch's wheels)"
	CAPTURE=$WORK/cudnn-handle.log limited "$(left)" env "${cudnn_env[@]}" "$DIR/cuda-backend.test" -test.run '^TestHandleOnDevice$' -test.v
	rc=$?
	handle=$(test_status "$WORK/cudnn-handle.log" TestHandleOnDevice)
	why=$(test_says "$WORK/cudnn-handle.log" TestHandleOnDevice)
	# No cuDNN by the loader's own look-up on a GPU: once more with the one
	# a PyTorch wheel ships, named, its folder and its siblings' on the
	# loader path (cuDNN 9 opens its engine libraries by name).
	if [ "$DEVICE" = cuda ] && [ "$handle" = SKIP ] && [[ $why == "no cuDNN"* ]] && [ "$(left)" -gt 8 ] &&
		lib=$(wheel_cudnn) && [ -n "$lib" ]; then
		libdir=$(dirname "$lib") path=$(dirname "$lib")
		for d in "${lib%/nvidia/*}"/nvidia/*/lib; do [ -d "$d" ] && [ "$d" != "$libdir" ] && path+=":$d"; done
		cudnn_env+=(MEMUNET_CUDNN="$lib" LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
		lookup="MEMUNET_CUDNN=$lib, after the loader's own look-up said: $why"
		CAPTURE=$WORK/cudnn-handle.log limited "$(left)" env "${cudnn_env[@]}" "$DIR/cuda-backend.test" -test.run '^TestHandleOnDevice$' -test.v
		rc=$?
		handle=$(test_status "$WORK/cudnn-handle.log" TestHandleOnDevice)
		why=$(test_says "$WORK/cudnn-handle.log" TestHandleOnDevice)
	fi
	[ -n "$handle" ] || handle=$(status_of $rc)
	printf '{"handle": %s, "library": %s, "lookup": %s}' "$(json_string "$handle")" "$(json_string "$why")" "$(json_string "$lookup")" >"$WORK/cudnn.json"
	RESULT=$WORK/cudnn.json STATUS=$(status_of $rc)
	case $handle in
	SKIP) STATUS=skipped DETAIL=$why ;;
	PASS) DETAIL="$why; looked up by $lookup" ;;
	*) DETAIL="handle: $handle; $why" ;;
	esac
else
	STATUS=skipped DETAIL="no $DIR/cuda-backend.test (tools/check/gpu-check.sh build)"
fi
end

# 3. Conformance on cuda:0, memunet's kernels then cuDNN's; 4. the first
# failing cases again with sync launches.
begin conformance 35
conformance_step TestConformance conformance.log "${cudnn_env[@]}"
end

begin conformance-cudnn 40
conformance_step TestConformanceCUDNN conformance-cudnn.log "${cudnn_env[@]}"
end

begin conformance-sync 10
if [ ${#failing[@]} -eq 0 ]; then
	STATUS=skipped DETAIL="no failing case"
else
	printf '[' >"$WORK/sync.json"
	sep=""
	for f in "${failing[@]:0:3}"; do
		pattern=$(printf '%s' "$f" | sed 's/[][\.*^$+?(){}|]/\\&/g; s|/|$/^|g')
		MEMUNET_CUDA_SYNC=1 CAPTURE=$WORK/sync.log limited "$(left)" env "${cudnn_env[@]}" "$DIR/cuda-backend.test" -test.run "^$pattern\$" -test.v
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

# 5. The first config: every variant with cuDNN, five with memunet's
# kernels, PyTorch's beside them.
begin "compare-cudnn-$first" 80
compare_step "compare-cudnn-$first" "$first" "$VARIANTS" cudnn
end
begin "compare-memunet-$first" 50
compare_step "compare-memunet-$first" "$first" baseline,checkpoint,fp16,bf16,accum4 memunet
end
begin "pytorch-$first" 60
pytorch_step "$first"
end

# 6. Two runs of one seed with cuDNN: the same weights, bit for bit.
begin same-seed 25
for i in 1 2; do
	# shellcheck disable=SC2046
	limited "$(left)" env "${cudnn_env[@]}" "$memunet" train --config configs/baseline.yaml --device "$DEVICE" --force \
		--out "$WORK/seed$i" $(config_args "$first") --set train.steps="$STEPS" --set train.val_every=0 \
		--set cuda.conv=cudnn --set output.progress=none --set output.tensorboard=false
	rc=$?
	[ "$rc" = 0 ] || break
done
STATUS=$(status_of "$rc")
if [ "$rc" = 0 ]; then
	# The tensors' bytes of the last checkpoint's model.safetensors, each
	# compared by name (the header's metadata aside).
	same=$(python3 -c '
import glob, json, struct, sys
def tensors(run):
    path = sorted(glob.glob(run + "/checkpoints/step-*/model.safetensors"))[-1]
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    return {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in head.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
diff = sorted(k for k in a if a[k] != b.get(k))
print(json.dumps({"tensors": len(a), "differ": diff[:20], "identical": not diff and a.keys() == b.keys()}))' "$WORK/seed1" "$WORK/seed2" 2>&1)
	if [[ $same == "{"* ]]; then
		printf '%s' "$same" >"$WORK/same-seed.json"
		RESULT=$WORK/same-seed.json
		if [[ $same == *'"identical": true'* ]]; then DETAIL="identical weights after $STEPS steps ($first)"; else STATUS="failed (the weights differ)" DETAIL=$same; fi
	else
		STATUS="failed (no comparison)" DETAIL=$same
	fi
fi
end

# 7. memunet bench with cuDNN at the first config: the median step, the
# time per layer kind, and on CUDA the device's work per optimizer step.
begin bench 25
printf '[' >"$WORK/bench.json"
sep="" STATUS=passed lines=() left_out=()
for v in baseline fp16 accum4; do
	n=$(left)
	if [ "$n" -lt 3 ]; then
		left_out+=("$v")
		continue
	fi
	# shellcheck disable=SC2046
	CAPTURE=$WORK/bench.log limited "$((n < 10 ? n : 10))" env "${cudnn_env[@]}" "$memunet" bench --config configs/baseline.yaml \
		--device "$DEVICE" --steps "$BENCH_STEPS" --variants "$v" $(config_args "$first") --set cuda.conv=cudnn
	rc=$?
	st=$(status_of $rc)
	row=$(bench_row "$WORK/bench.log")
	if [ "$rc" = 0 ] && [[ $row == '"error"'* ]]; then st="failed (no row)"; fi
	[ "$st" = passed ] || STATUS=$st
	printf '%s{"variant": "%s", "status": %s, "config": "%s", "batch": 4, "depth": 4, "steps": %d, "conv": "cudnn", %s, "output": %s}' \
		"$sep" "$v" "$(json_string "$st")" "$first" "$BENCH_STEPS" "$row" "$(json_string "$(tail -c 4000 "$WORK/bench.log")")" >>"$WORK/bench.json"
	sep=", "
	lines+=("$(bench_row "$WORK/bench.log" detail)")
	[ "$rc" = 0 ] || lines[-1]+=" [$st]"
done
printf ']' >>"$WORK/bench.json"
RESULT=$WORK/bench.json
DETAIL="$first: $(printf '%s; ' "${lines[@]}")"
DETAIL=${DETAIL%; }
[ ${#left_out[@]} -eq 0 ] || DETAIL+="; no time left for ${left_out[*]}"
end

# 8. cudnnFind's algorithm tables for the seed UNet's convolutions per
# precision, which the policy's tests take as fixtures
# (backend/cuda/cudnn/testdata).
begin cudnn-tables 35
if [ -x "$DIR/cuda-backend.test" ] && [ "$(test_status "$WORK/cudnn-handle.log" TestHandleOnDevice 2>/dev/null)" = PASS ]; then
	tables=$WORK/cudnn-tables
	mkdir -p "$tables"
	CAPTURE=$WORK/cudnn.log limited "$(left)" env "${cudnn_env[@]}" MEMUNET_CUDNN_TABLES="$tables" "$DIR/cuda-backend.test" \
		-test.run '^TestRecordAlgorithmTables$' -test.v
	rc=$?
	record=$(test_status "$WORK/cudnn.log" TestRecordAlgorithmTables)
	[ -n "$record" ] || record=$(status_of $rc)
	logs=$(grep -E -o 'cudnn_test\.go:[0-9]+: (tf32|fp32|fp16|bf16): .*' "$WORK/cudnn.log" | cut -d' ' -f2-)
	copied=()
	for f in "$tables"/*.json; do
		if valid_json "$f" && mkdir -p "$OUT/cudnn-tables" && cp "$f" "$OUT/cudnn-tables/"; then
			copied+=("$(basename "$f" .json)")
		fi
	done
	{
		printf '{"record": %s, "tables": [' "$(json_string "$record")"
		sep=""
		for p in "${copied[@]}"; do
			printf '%s%s' "$sep" "$(json_string "cudnn-tables/$p.json")"
			sep=", "
		done
		printf '], "log": %s}' "$(json_string "$logs")"
	} >"$WORK/cudnn-tables.json"
	RESULT=$WORK/cudnn-tables.json STATUS=$(status_of $rc)
	DETAIL="tables $record; OUT/cudnn-tables: ${copied[*]:-none}"
else
	STATUS=skipped DETAIL="no cuDNN handle on this device (the cudnn step)"
fi
end

# 9. The second config, with cuDNN, beside PyTorch.
for c in "${configs[@]:1}"; do
	begin "compare-cudnn-$c" 40
	compare_step "compare-cudnn-$c" "$c" "$VARIANTS" cudnn
	end
	begin "pytorch-$c" 35
	pytorch_step "$c"
	end
done

FINISHED=true
NOTE="$FAILED step(s) failed or timed out"
echo "every step ran ($TOTAL s of limits); $NOTE"
[ "$FAILED" = 0 ]
