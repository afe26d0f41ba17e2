package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/bench"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/train"
)

// gpuCheck is what the tests read of tools/check/gpu-check.sh's gpu-check.json.
type gpuCheck struct {
	Mode     string `json:"mode"`
	Finished bool   `json:"finished"`
	Note     string `json:"note"`
	Steps    []struct {
		Step   string          `json:"step"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	} `json:"steps"`
}

// step is the record of the step named name, or nil.
func (g *gpuCheck) step(name string) *struct {
	Step   string          `json:"step"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
} {
	for i := range g.Steps {
		if g.Steps[i].Step == name {
			return &g.Steps[i]
		}
	}
	return nil
}

// startGPUCheck starts tools/check/gpu-check.sh run --cpu into a fresh folder
// with the CPU build at 32 px, in a session of its own (each step's
// timeout makes a process group of its own), and returns the command and
// the folder. Whatever is left of the session when the test ends is
// killed.
func startGPUCheck(t *testing.T, bin, dir string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command("bash", "tools/check/gpu-check.sh", "run", "--cpu", out, dir)
	var console strings.Builder
	cmd.Stdout, cmd.Stderr = &console, &console
	t.Cleanup(func() {
		if strings.Contains(console.String(), "gpu-check.sh: line") {
			t.Errorf("the script reported an error of its own:\n%s", console.String())
		}
	})
	cmd.Dir = "../.."
	cmd.Env = append(append(os.Environ(), "MEMUNET="+bin, "CONFIGS=16x32", "STEPS=2", "TMPDIR="+t.TempDir()), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killSession(cmd.Process.Pid) })
	return cmd, out
}

// killSession kills every process of session sid and waits until none is
// left.
func killSession(sid int) {
	for range 500 {
		entries, _ := os.ReadDir("/proc")
		left := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			i := strings.LastIndexByte(string(stat), ')')
			if err != nil || i < 0 {
				continue
			}
			// After the command's name: state, ppid, pgrp, session.
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 3 && f[3] == strconv.Itoa(sid) && f[0] != "Z" {
				syscall.Kill(pid, syscall.SIGKILL)
				left++
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeDeviceTest is a stand-in for the gpu build's cuda-backend.test on a
// GPU whose relu faults and without a cuDNN: the conformance suite fails
// two cases, each of which, run again with MEMUNET_CUDA_SYNC=1, names its
// kernel; its cuDNN run fails one (and lists a choice), though no handle
// is made (a fake's liberty: the steps do not depend on each other).
const fakeDeviceTest = `#!/bin/sh
case "$2" in
'^TestConformance$')
	echo '    conformance_test.go:28: cuda:0 NVIDIA H200 (compute 9.0, 132 SMs, 139.8 GiB, driver for CUDA 13.0)'
	echo '--- FAIL: TestConformance (1.00s)'
	echo '    --- FAIL: TestConformance/Pointwise (0.50s)'
	echo '        --- FAIL: TestConformance/Pointwise/ReLU/fp32 (0.10s)'
	echo '        --- FAIL: TestConformance/Pointwise/Add (0.10s)'
	echo '    --- PASS: TestConformance/Transfer (0.10s)'
	echo FAIL; exit 1 ;;
'^TestConformanceCUDNN$')
	echo '=== RUN   TestConformanceCUDNN'
	echo '    cudnn_test.go:50: cuda:0 NVIDIA H200 (compute 9.0, 132 SMs, 139.8 GiB, driver for CUDA 13.0); cuDNN 9.6.0 (CUDA 12.6) from /x'
	echo '    --- PASS: TestConformanceCUDNN/Transfer (0.10s)'
	echo '    --- FAIL: TestConformanceCUDNN/Layers (0.50s)'
	echo '        --- FAIL: TestConformanceCUDNN/Layers/Conv/fp16 (0.10s)'
	echo '        --- PASS: TestConformanceCUDNN/Layers/ConvBack (0.10s)'
	echo '    cudnn_test.go:67: conv 3x3 3->5 on 2x7x9 (pad 1) (tf32): forward IMPLICIT_PRECOMP_GEMM, backward_data ALGO_1, backward_filter ALGO_1; workspace 1024 bytes'
	echo '--- FAIL: TestConformanceCUDNN (1.00s)'
	echo FAIL; exit 1 ;;
'^TestHandleOnDevice$')
	echo '=== RUN   TestHandleOnDevice'
	echo '    cudnn_test.go:120: no cuDNN: no cuDNN library found'
	echo '--- SKIP: TestHandleOnDevice (0.00s)'; exit 0 ;;
*)
	[ "$MEMUNET_CUDA_SYNC" = 1 ] && echo "    conformance_test.go:40: cuda:0: kernel relu (ReLU, grid 4x1, args 0x7f00 0x7f00 fp32 1000) failed: CUDA_ERROR_ILLEGAL_ADDRESS; run $2"
	exit 1 ;;
esac
`

// readGPUCheck parses out/gpu-check.json, failing the test where it does
// not parse.
func readGPUCheck(t *testing.T, out string) *gpuCheck {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, "gpu-check.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g gpuCheck
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("gpu-check.json does not parse: %v\n%s", err, raw)
	}
	return &g
}

// watchGPUCheck reads out/gpu-check.json until done is closed, failing
// the test at any version that does not parse, and returns how many
// versions it saw.
func watchGPUCheck(t *testing.T, out string, done <-chan struct{}) int {
	t.Helper()
	seen, last := 0, ""
	for {
		select {
		case <-done:
			return seen
		case <-time.After(20 * time.Millisecond):
		}
		raw, err := os.ReadFile(filepath.Join(out, "gpu-check.json"))
		if err != nil || string(raw) == last {
			continue
		}
		last = string(raw)
		seen++
		if !json.Valid(raw) {
			t.Errorf("a version of gpu-check.json does not parse:\n%s", raw)
		}
	}
}

// TestGPUCheckScriptSmoke runs tools/check/gpu-check.sh run --cpu (the same steps
// with the CPU build at base 16, 32 px): gpu-check.json parses after every
// step, compare's 7 variants (and 5 more), two runs of one seed with the
// same weights and bench's rows are in it, and a step killed at its time
// limit (compare-cudnn-16x32 limited to 1 s) is recorded as timed out
// while the steps after it run; with a stand-in device test binary, both
// conformance runs' failing cases are listed and run again with sync
// launches. Then a run stopped by SIGTERM (the exit trap closes the JSON)
// and one killed with its children by SIGKILL (the last whole version
// stays) leave a gpu-check.json that parses. Nothing else than the result
// files is written under OUT.
func TestGPUCheckScriptSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := filepath.Join(t.TempDir(), "memunet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	t.Run("steps", func(t *testing.T) {
		for _, limit := range []string{"", "compare-cudnn-16x32=1"} {
			// The run with a limit also has a device test binary whose relu
			// faults.
			dir := t.TempDir()
			if limit != "" {
				if err := os.WriteFile(filepath.Join(dir, "cuda-backend.test"), []byte(fakeDeviceTest), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd, out := startGPUCheck(t, bin, dir, "GPU_CHECK_LIMITS="+limit)
			done := make(chan struct{})
			versions := make(chan int)
			go func() { versions <- watchGPUCheck(t, out, done) }()
			err := cmd.Wait()
			close(done)
			if n := <-versions; n < 2 {
				t.Errorf("limits %q: saw %d versions of gpu-check.json; want one per step", limit, n)
			}
			if (err != nil) != (limit != "") {
				t.Fatalf("limits %q: %v (a timed-out step exits 1, else 0)", limit, err)
			}
			g := readGPUCheck(t, out)
			if !g.Finished || g.Mode != "cpu-smoke" || len(g.Steps) != 11 {
				t.Errorf("limits %q: finished %v, mode %q, %d steps", limit, g.Finished, g.Mode, len(g.Steps))
			}
			var rows []report.CompareRow
			cmp := g.step("compare-cudnn-16x32")
			if limit != "" {
				if cmp == nil || cmp.Status != "timed out" || string(cmp.Result) != "null" {
					t.Errorf("compare-cudnn-16x32 limited to 1 s: %+v", cmp)
				}
			} else if cmp == nil || json.Unmarshal(cmp.Result, &rows) != nil || len(rows) != 7 {
				t.Errorf("compare-cudnn-16x32: %+v", cmp)
			}
			var kernels []report.CompareRow
			if c := g.step("compare-memunet-16x32"); c == nil || json.Unmarshal(c.Result, &kernels) != nil || len(kernels) != 5 {
				t.Errorf("limits %q: compare-memunet-16x32: %+v", limit, c)
			}
			rows = append(rows, kernels...)
			for _, r := range rows {
				if r.Error != "" || r.PeakAllocatedBytes == 0 {
					t.Errorf("compare %s: %+v", r.Name, r)
				}
			}
			var same struct {
				Tensors   int  `json:"tensors"`
				Identical bool `json:"identical"`
			}
			if s := g.step("same-seed"); s == nil || s.Status != "passed" || json.Unmarshal(s.Result, &same) != nil || !same.Identical || same.Tensors == 0 {
				t.Errorf("limits %q: same-seed: %+v", limit, s)
			}
			// bench runs on the CPU too: one row a variant, baseline and fp16
			// in that order; the CPU counts no device work. cudnn skips without a GPU.
			var bench []struct {
				Variant string  `json:"variant"`
				StepMS  float64 `json:"step_ms"`
				Counted bool    `json:"counted"`
			}
			if b := g.step("bench"); b == nil || b.Status != "passed" || json.Unmarshal(b.Result, &bench) != nil || len(bench) < 2 ||
				bench[0].Variant != "baseline" || bench[1].Variant != "fp16" || bench[0].StepMS == 0 || bench[0].Counted {
				t.Errorf("limits %q: bench: %+v", limit, b)
			}
			for _, s := range []string{"cudnn", "cudnn-tables", "pytorch-16x32"} {
				if c := g.step(s); c == nil || c.Status != "skipped" {
					t.Errorf("limits %q: %s: %+v", limit, s, c)
				}
			}
			for _, s := range []string{"gpu", "conformance", "conformance-cudnn", "conformance-sync", "bench"} {
				if g.step(s) == nil {
					t.Errorf("no step %s", s)
				}
			}
			if limit != "" {
				var conf struct {
					Passed  int      `json:"passed"`
					Device  string   `json:"device"`
					Failing []string `json:"failing"`
				}
				var cudnnConf struct {
					Passed  int      `json:"passed"`
					Failing []string `json:"failing"`
					Choices string   `json:"choices"`
				}
				var reruns []struct{ Case, Status, Error string }
				if c := g.step("conformance"); c == nil || !strings.HasPrefix(c.Status, "failed") || json.Unmarshal(c.Result, &conf) != nil ||
					conf.Passed != 1 || !strings.HasPrefix(conf.Device, "cuda:0 NVIDIA H200") ||
					strings.Join(conf.Failing, " ") != "TestConformance/Pointwise/ReLU/fp32 TestConformance/Pointwise/Add" {
					t.Errorf("conformance: %+v", conf)
				}
				if c := g.step("conformance-cudnn"); c == nil || !strings.HasPrefix(c.Status, "failed") || json.Unmarshal(c.Result, &cudnnConf) != nil ||
					cudnnConf.Passed != 2 || strings.Join(cudnnConf.Failing, " ") != "TestConformanceCUDNN/Layers/Conv/fp16" ||
					!strings.HasPrefix(cudnnConf.Choices, "conv 3x3 3->5 on 2x7x9 (pad 1) (tf32): forward IMPLICIT_PRECOMP_GEMM") {
					t.Errorf("conformance-cudnn: %+v", cudnnConf)
				}
				if c := g.step("conformance-sync"); c == nil || json.Unmarshal(c.Result, &reruns) != nil || len(reruns) != 3 ||
					!strings.HasPrefix(reruns[0].Error, "cuda:0: kernel relu (ReLU, grid 4x1") ||
					!strings.HasSuffix(reruns[0].Error, `run ^TestConformance$/^Pointwise$/^ReLU$/^fp32$`) ||
					!strings.HasSuffix(reruns[2].Error, `run ^TestConformanceCUDNN$/^Layers$/^Conv$/^fp16$`) {
					t.Errorf("conformance-sync: %+v", reruns)
				}
				if c := g.step("cudnn"); c == nil || c.Status != "skipped" {
					t.Errorf("cudnn with a device binary that finds no cuDNN: %+v", c)
				}
			}
			files, _ := os.ReadDir(out)
			var names []string
			for _, f := range files {
				names = append(names, f.Name())
			}
			if got := strings.Join(names, " "); got != "conformance-cudnn.log conformance.log gpu-check.json gpu-check.log" && got != "gpu-check.json gpu-check.log" {
				t.Errorf("OUT holds %s", got)
			}
		}
	})

	t.Run("killed", func(t *testing.T) {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			cmd, out := startGPUCheck(t, bin, t.TempDir())
			for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(20 * time.Millisecond) { // until compare runs
				if raw, err := os.ReadFile(filepath.Join(out, "gpu-check.log")); err == nil && strings.Contains(string(raw), "===== compare-cudnn-16x32") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%v: the run did not reach compare-cudnn-16x32 in 3 minutes", sig)
				}
			}
			time.Sleep(300 * time.Millisecond)
			if sig == syscall.SIGKILL {
				killSession(cmd.Process.Pid) // the script and every step it runs
			} else {
				cmd.Process.Signal(sig)
			}
			cmd.Wait()
			killSession(cmd.Process.Pid)
			g := readGPUCheck(t, out)
			if g.Finished || g.step("conformance-sync") == nil || g.step("same-seed") != nil {
				t.Errorf("%v during compare: finished %v, %d steps", sig, g.Finished, len(g.Steps))
			}
			if sig == syscall.SIGTERM && !strings.Contains(g.Note, "stopped (exit 143)") {
				t.Errorf("SIGTERM: note %q", g.Note)
			}
		}
	})
}

// TestGPUCheckReadsBenchCounts: the device check's bench_row reads, from
// memunet bench's table as report.PrintBench writes it, the device's work
// per step (launches, copies to the host, blocking uploads, syncs) and
// how many steps one read answers, into the row's JSON and its detail.
func TestGPUCheckReadsBenchCounts(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	var out strings.Builder
	row := train.BenchRow{Variant: "4 x 1", StepMS: 20, StepMSMin: 19, StepMSMax: 21, GFLOPs: 300, Counted: true,
		LaunchesPerStep: 412, CopiesPerStep: 0.1, BlockingUploadsPerStep: 0, SyncsPerStep: 0.1, StepsPerRead: 10}
	if err := report.PrintBench(&out, bench.Result{Rows: []bench.Row{{Name: "fp16", BenchRow: row}}}); err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join(t.TempDir(), "bench.log")
	if err := os.WriteFile(sample, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `eval "$(sed -n '/^bench_row() {/,/^}/p' ../../tools/check/gpu-check.sh)"; bench_row "$1"; bench_row "$1" detail`
	got, err := exec.Command("bash", "-c", script, "bash", sample).CombinedOutput()
	if err != nil {
		t.Fatalf("bench_row: %v\n%s", err, got)
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	var parsed struct {
		StepMS          float64  `json:"step_ms"`
		Counted         bool     `json:"counted"`
		Launches        float64  `json:"launches_per_step"`
		Copies          float64  `json:"copies_per_step"`
		BlockingUploads *float64 `json:"blocking_uploads_per_step"`
		Syncs           float64  `json:"syncs_per_step"`
		StepsPerRead    int      `json:"steps_per_read"`
	}
	if len(lines) != 2 || json.Unmarshal([]byte("{"+lines[0]+"}"), &parsed) != nil {
		t.Fatalf("bench_row's output:\n%s\nfrom:\n%s", got, out.String())
	}
	if parsed.StepMS != 20 || !parsed.Counted || parsed.Launches != 412 || parsed.Copies != 0.1 || parsed.BlockingUploads == nil ||
		*parsed.BlockingUploads != 0 || parsed.Syncs != 0.1 || parsed.StepsPerRead != 10 {
		t.Errorf("bench_row read %+v from:\n%s", parsed, out.String())
	}
	if want := "fp16 20.0 ms (412.0 launches, 0.1 copies to the host, 0.0 blocking uploads, 0.1 syncs a step; a read every 10 steps)"; lines[1] != want {
		t.Errorf("detail %q, want %q", lines[1], want)
	}
}
