package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/bench"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/report"
)

// TestMain lets tests run this binary as memunet itself (compare starts
// child processes of its own executable): with MEMUNET_TEST_AS_MAIN=1 the
// test binary behaves as the memunet command.
func TestMain(m *testing.M) {
	if os.Getenv("MEMUNET_TEST_AS_MAIN") == "1" {
		if os.Getenv("MEMUNET_TEST_SLOW_SAVE") == "1" {
			// A checkpoint save that takes a minute once its temporary
			// directory exists, for a signal to land in.
			checkpoint.FaultHook = func(point string) {
				if point == "tmpdir" {
					time.Sleep(time.Minute)
				}
			}
		}
		if n, err := strconv.Atoi(os.Getenv("MEMUNET_TEST_HANG_AFTER_SAVES")); err == nil {
			// The n-th checkpoint saved whole, the process hangs a minute
			// there, for a SIGKILL to land in.
			saves := 0
			checkpoint.FaultHook = func(point string) {
				if point == "done" {
					if saves++; saves == n {
						time.Sleep(time.Minute)
					}
				}
			}
		}
		code := run(os.Args[1:], os.Stdout, os.Stderr)
		if path := os.Getenv("MEMUNET_TEST_HWM_FILE"); path != "" {
			writeOwnPeakRSS(path)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// tinyArgs trains a few steps of a tiny network on 16x16 synthetic images.
var tinyArgs = []string{
	"--set", "model.base=4", "--set", "model.depth=2", "--set", "data.size=16", "--set", "data.count=24",
	"--set", "train.batch_size=4", "--set", "train.steps=4", "--set", "train.val_every=2",
}

func TestTrainWritesRunFiles(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", dir}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr.String())
	}
	for _, name := range []string{"config.yaml", "metrics.jsonl", "summary.json", "curves.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s missing: %v", name, err)
		}
		if !strings.Contains(stdout.String(), filepath.Join(dir, name)) {
			t.Errorf("the files: line does not list %s", name)
		}
	}

	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stepKeys := []string{"step", "epoch", "loss", "lr", "step_ms", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes"}
	valKeys := []string{"step", "epoch", "val_loss", "val_pixel_acc", "val_miou", "val_dice"}
	steps, vals := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("metrics.jsonl line %q: %v", sc.Text(), err)
		}
		keys := stepKeys
		switch rec["type"] {
		case "step":
			steps++
			if rec["step"].(float64) != float64(steps) {
				t.Errorf("step record %d has step %v", steps, rec["step"])
			}
			if rec["peak_allocated_bytes"].(float64) < rec["allocated_bytes"].(float64) || rec["allocated_bytes"].(float64) <= 0 {
				t.Errorf("implausible memory in %v", rec)
			}
		case "val":
			vals++
			keys = valKeys
		default:
			t.Fatalf("record without a known type: %v", rec)
		}
		for _, k := range keys {
			if _, ok := rec[k]; !ok {
				t.Errorf("%v record lacks %q: %v", rec["type"], k, rec)
			}
		}
	}
	if steps != 4 || vals != 2 {
		t.Errorf("got %d step and %d val records, want 4 and 2", steps, vals)
	}

	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"steps", "final_loss", "val_miou", "val_dice", "peak_allocated_bytes", "peak_reserved_bytes",
		"peak_rss_bytes", "step_ms_median", "peak_allocated_by_category"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary.json lacks %q", k)
		}
	}
	if sum["steps"].(float64) != 4 {
		t.Errorf("summary steps = %v, want 4", sum["steps"])
	}
	byCat := sum["peak_allocated_by_category"].(map[string]any)
	var total float64
	for _, k := range []string{"params", "grads", "optimizer", "activations", "workspace"} {
		v, ok := byCat[k].(float64)
		if !ok {
			t.Errorf("peak_allocated_by_category lacks %q", k)
		}
		total += v
	}
	if total != sum["peak_allocated_bytes"].(float64) {
		t.Errorf("categories add up to %v, peak_allocated_bytes is %v", total, sum["peak_allocated_bytes"])
	}
	if byCat["optimizer"].(float64) != 2*byCat["grads"].(float64) {
		t.Errorf("Adam state %v should be twice the gradients %v", byCat["optimizer"], byCat["grads"])
	}
}

func TestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no command", nil, 2, nil},
		{"unknown command", []string{"fly"}, 2, []string{`unknown command "fly"`}},
		{"no config", []string{"train"}, 2, []string{"--config FILE is required"}},
		{"missing config file", []string{"train", "--config", filepath.Join(dir, "nope.yaml")}, 1, []string{"nope.yaml", "does not exist"}},
		{"unknown key", []string{"train", "--config", write("unknown.yaml", "train:\n  batchsize: 4\n")}, 1,
			[]string{"unknown.yaml", "line 2", `"train.batchsize"`, "batch_size"}},
		{"wrong type", []string{"train", "--config", write("type.yaml", "train:\n  batch_size: four\n")}, 1,
			[]string{"type.yaml", "train.batch_size", "want an integer"}},
		{"negative batch", []string{"train", "--config", write("neg.yaml", "train:\n  batch_size: -2\n")}, 1,
			[]string{"neg.yaml", "train.batch_size", "-2", "at least 1"}},
		{"size not divisible", []string{"train", "--config", write("size.yaml", "data:\n  size: 30\nmodel:\n  depth: 3\n")}, 1,
			[]string{"size.yaml", "data.size", "not divisible by 2^model.depth = 8"}},
		{"bad set", []string{"train", "--config", "../../configs/quickstart.yaml", "--set", "train.steps"}, 1,
			[]string{"--set", "section.key=value"}},
		{"stray argument", []string{"train", "--config", "../../configs/quickstart.yaml", "extra"}, 2, []string{`"extra"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			msg := stderr.String()
			if tc.want != nil && strings.Count(strings.TrimSpace(msg), "\n") != 0 {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestVersionAndHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "memunet ") {
		t.Errorf("version: exit %d, output %q", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "memunet train --config FILE") {
		t.Errorf("help: exit %d, output %q", code, stdout.String())
	}
}

func TestPlanCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := append([]string{"plan", "--config", "../../configs/quickstart.yaml", "--json", "--capacity", "1GiB"}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var out struct {
		Capacity    int64
		Recommended string
		Variants    []struct {
			Variant            string
			PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
			Fits               *bool
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("plan --json output: %v\n%s", err, stdout.String())
	}
	if out.Capacity != 1<<30 || len(out.Variants) != 7 || out.Recommended != "config" {
		t.Errorf("capacity %d, %d variants, recommended %q; want 1GiB, 7, config (the fastest, and everything fits)", out.Capacity, len(out.Variants), out.Recommended)
	}
	for _, v := range out.Variants {
		if v.PeakAllocatedBytes <= 0 || v.Fits == nil || !*v.Fits {
			t.Errorf("variant %+v", v)
		}
	}
	stdout.Reset()
	if code := run(append([]string{"plan", "--config", "../../configs/quickstart.yaml", "--capacity", "64KiB"}, tinyArgs...), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"variant", "reserved", "accum4", "no variant fits"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("plan table lacks %q:\n%s", want, stdout.String())
		}
	}
	if code := run([]string{"plan", "--config", "../../configs/quickstart.yaml", "--capacity", "lots"}, &stdout, &stderr); code != 2 {
		t.Errorf("bad --capacity: exit %d, want 2", code)
	}
}

func TestCompareCommand(t *testing.T) {
	t.Setenv("MEMUNET_TEST_AS_MAIN", "1")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append([]string{"compare", "--config", "../../configs/quickstart.yaml", "--steps", "2", "--out", dir,
		"--variants", "baseline,checkpoint,accum4,all,gorgonia"}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	var rows []report.CompareRow
	raw, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5:\n%s", len(rows), stdout.String())
	}
	peak := map[string]int64{}
	for _, r := range rows {
		if r.Error != "" {
			t.Errorf("%s failed: %s", r.Name, r.Error)
		}
		if r.StepMSMedian <= 0 || r.PeakRSSBytes <= 0 || r.FinalLoss <= 0 {
			t.Errorf("%s: implausible row %+v", r.Name, r)
		}
		peak[r.Name] = r.PeakAllocatedBytes
	}
	if !(peak["all"] < peak["checkpoint"] && peak["checkpoint"] < peak["baseline"] && peak["accum4"] < peak["baseline"]) {
		t.Errorf("peaks do not shrink with the remedies: %v", peak)
	}
	// The same weights, data and Adam: gorgonia's loss after 2 steps is
	// baseline's up to float32 summation order.
	if a, b := rows[0].FinalLoss, rows[4].FinalLoss; math.Abs(a-b) > 1e-3*a {
		t.Errorf("baseline final loss %v, gorgonia %v", a, b)
	}
	for _, f := range []string{"compare.csv", "memory.png", "timeline.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() < 100 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	for _, want := range []string{"peak alloc", "samples/s", "gorgonia", "all"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
	// Again into the same --out with --force (without it the used folder
	// is refused, TestCompareRefusesAUsedOut): the children replace their
	// earlier runs, gorgonia its own summary.json in the folder compare
	// made for it.
	stdout.Reset()
	args = append([]string{"compare", "--config", "../../configs/quickstart.yaml", "--steps", "1", "--out", dir,
		"--variants", "baseline,gorgonia", "--force"}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("compare again: exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	raw, err = os.ReadFile(filepath.Join(dir, "compare.json"))
	if err == nil {
		err = json.Unmarshal(raw, &rows)
	}
	if err != nil || len(rows) != 2 || rows[0].Error != "" || rows[1].Error != "" {
		t.Errorf("compare again: %v, rows %+v", err, rows)
	}
}

func TestBenchCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	args := append([]string{"bench", "--config", "../../configs/quickstart.yaml", "--steps", "2", "--variants", "config,fp16", "--cpuprofile", prof}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"GFLOP/s", "conv forward", "conv backward", "conversions", "optimizer", "fp16"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	// The profile is pprof's gzip-compressed protocol buffer.
	if data, err := os.ReadFile(prof); err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Errorf("--cpuprofile wrote %d bytes (%v), not a gzip profile", len(data), err)
	}
	// A profile that cannot be written is an error naming the flag, before anything runs.
	stdout.Reset()
	stderr.Reset()
	args = append([]string{"bench", "--config", "../../configs/quickstart.yaml", "--steps", "1", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p")}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "--cpuprofile") {
		t.Errorf("unwritable --cpuprofile: exit %d, stderr %q", code, stderr.String())
	}
}

// TestBenchProfileGuarded: --cpuprofile replaces a link planted at its name
// instead of writing through it, and refuses a run's own file or a path in
// its checkpoints/ (usage error, nothing written).
func TestBenchProfileGuarded(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious")
	if err := os.WriteFile(precious, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "prof.link")
	if err := os.Symlink(precious, link); err != nil {
		t.Fatal(err)
	}
	bench := func(prof string) (int, string) {
		var stdout, stderr bytes.Buffer
		args := append([]string{"bench", "--config", "../../configs/quickstart.yaml", "--steps", "1", "--cpuprofile", prof}, tinyArgs...)
		return run(args, &stdout, &stderr), stderr.String()
	}
	if code, msg := bench(link); code != 0 {
		t.Fatalf("--cpuprofile over a link: exit %d: %s", code, msg)
	}
	if b, _ := os.ReadFile(precious); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b[:min(len(b), 16)])
	}
	if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s: %v, want the profile in place of the link", link, err)
	}

	runDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(filepath.Join(runDir, "checkpoints", "step-00000002"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "config.yaml"), []byte("model: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prof := range []string{filepath.Join(runDir, "summary.json"), filepath.Join(runDir, "config.yaml"),
		filepath.Join(runDir, "checkpoints", "step-00000002", "cpu.pprof")} {
		code, msg := bench(prof)
		if code != 2 || !strings.Contains(msg, "--cpuprofile "+prof) {
			t.Errorf("--cpuprofile %s: exit %d, %q: want a usage error naming it", prof, code, msg)
		}
	}
	if _, err := os.Stat(filepath.Join(runDir, "summary.json")); err == nil {
		t.Errorf("a refused bench wrote the run's summary.json")
	}
	if b, _ := os.ReadFile(filepath.Join(runDir, "config.yaml")); string(b) != "model: {}\n" {
		t.Errorf("a refused bench changed the run's config.yaml: %q", b[:min(len(b), 16)])
	}
}

// TestBenchRepeat: --repeat N runs the bench in N fresh processes and
// reports each one's step of every variant and the spread over them;
// --repeat with --json is a usage error.
func TestBenchRepeat(t *testing.T) {
	t.Setenv("MEMUNET_TEST_AS_MAIN", "1")
	var stdout, stderr bytes.Buffer
	args := append([]string{"bench", "--config", "../../configs/quickstart.yaml", "--steps", "1", "--variants", "config,fp16", "--repeat", "2"}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"2 processes", "process  config  fp16  peak GFLOP/s", "over 2 processes", "config: fastest", "fp16: fastest"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench --repeat output lacks %q:\n%s", want, out)
		}
	}
	stdout.Reset()
	if code := run([]string{"bench", "--config", "../../configs/quickstart.yaml", "--repeat", "2", "--json"}, &stdout, &stderr); code != 2 {
		t.Errorf("--repeat with --json: exit %d", code)
	}
}

// TestBenchUnderBusySibling: with two busy processes beside it, one
// steady and one on and off, bench never prints a share of the FMA peak
// past what the arithmetic allows (100 x bench.WinogradGain where
// Winograd may run, in direct FLOPs): each % cell is a number within
// that, or "?" with its note.
func TestBenchUnderBusySibling(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	for _, script := range []string{"while :; do :; done", "while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.02; done"} {
		sibling := exec.Command("/bin/sh", "-c", script)
		if err := sibling.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sibling.Process.Kill(); _ = sibling.Wait() })
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"bench", "--config", "../../configs/quickstart.yaml", "--steps", "3", "--variants", "config,baseline,fp16,bf16"}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "% peak: of the FMA peak's best") {
		t.Fatalf("no peak line:\n%s", out)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[2] != "x" || f[0] == "variant" {
			continue
		}
		rows++
		for _, cell := range f[7:9] { // % peak, conv % peak
			if cell == "?" {
				if !strings.Contains(out, "?: more than the arithmetic allows") {
					t.Errorf("a ? without its note:\n%s", out)
				}
				continue
			}
			if p, err := strconv.ParseFloat(cell, 64); err != nil || p > 100*bench.WinogradGain {
				t.Errorf("%s: a share of %q:\n%s", f[0], cell, out)
			}
		}
	}
	if rows != 4 {
		t.Errorf("%d rows, want 4:\n%s", rows, out)
	}
}
