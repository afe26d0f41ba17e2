package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneErrorPrefix: a failed command prints one line with one "memunet:"
// prefix, the out-of-memory error too.
func TestOneErrorPrefix(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", t.TempDir() + "/run",
		"--set", "train.steps=2", "--set", "output.progress=none", "--set", "memory.capacity=64KiB"}, &out, &errb)
	oneLine(t, "train refused by the plan", code, errb.String())

	// The pool's out-of-memory error from predict's model, worded as the
	// --capacity that set the pool.
	runDir, _ := trainTiny(t)
	errb.Reset()
	code = run([]string{"predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", t.TempDir(), "--capacity", "4KiB"}, &out, &errb)
	oneLine(t, "predict out of memory", code, errb.String())
	if !strings.Contains(errb.String(), "a pool of 4.00 KiB (--capacity, else the checkpoint's memory.capacity) cannot hold the model's weights; raise --capacity") {
		t.Errorf("predict under 4 KiB: %q, want the pool's out-of-memory error in words", errb.String())
	}
}

func oneLine(t *testing.T, what string, code int, msg string) {
	t.Helper()
	if code != 1 || strings.Count(msg, "memunet:") != 1 || !strings.HasPrefix(msg, "memunet: ") || strings.Count(msg, "\n") != 1 {
		t.Errorf("%s: exit %d, stderr %q: want exit 1 and one line with one memunet: prefix", what, code, msg)
	}
}

// TestBannerAfterChecks: the start banner is printed only once every check
// has passed: a run refused by its plan prints none, a run that starts
// prints it first.
func TestBannerAfterChecks(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", t.TempDir() + "/run",
		"--set", "train.steps=2", "--set", "output.progress=none", "--set", "memory.capacity=64KiB"}, &out, &errb)
	if code != 1 || strings.Contains(out.String(), "training on") {
		t.Errorf("refused run: exit %d, stdout %q: want exit 1 and no banner", code, out.String())
	}
	out.Reset()
	args := append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", t.TempDir() + "/run"}, tinyArgs...)
	if code := run(append(args, "--set", "output.progress=none"), &out, &errb); code != 0 ||
		!strings.HasPrefix(out.String(), "memunet "+version+": training on synthetic data 16x16") {
		t.Errorf("run: exit %d, stdout %q: want the banner first", code, out.String())
	}
}

// TestRecoveryHintWithAndWithoutConfig: resuming a corrupt newest
// checkpoint names the previous one that verifies and how to continue from
// it, with --config and without (the checkpoint's own configuration).
func TestRecoveryHintWithAndWithoutConfig(t *testing.T) {
	runDir, sum := trainTiny(t, "--set", "train.checkpoint_every=2", "--set", "train.keep_last=2")
	model := filepath.Join(sum.LastCheckpoint, "model.safetensors")
	b, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(model, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, withConfig := range []bool{true, false} {
		args := []string{"train", "--resume", "auto", "--out", runDir}
		if withConfig {
			args = append(append(args, "--config", "../../configs/quickstart.yaml"), tinyArgs...)
		}
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		msg := errb.String()
		if code != 1 || !strings.Contains(msg, "model.safetensors is corrupt") || !strings.Contains(msg, "verifies: pass --resume ") {
			t.Errorf("--config %v: exit %d, %q: want the corruption and the recovery hint", withConfig, code, msg)
		}
	}
}

// TestPerClassReport: the end of a run and predict on dataset:val show a
// table of each class's IoU and Dice; summary.json and the validation
// records of metrics.jsonl carry per_class.
func TestPerClassReport(t *testing.T) {
	dir := t.TempDir()
	out := runOK(t, append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", dir, "--set", "output.progress=none"}, tinyArgs...)...)
	if !strings.Contains(out, "class       IoU     Dice      target px   predicted px") {
		t.Errorf("train output has no per-class table:\n%s", out)
	}
	sum := ckSummary(t, dir)
	if len(sum.PerClass) != 4 {
		t.Fatalf("summary per_class: %+v", sum.PerClass)
	}
	var present float64
	n := 0
	for _, s := range sum.PerClass {
		if s.Present() {
			present += *s.IoU
			n++
		}
	}
	if math.Abs(present/float64(n)-sum.ValMIoU) > 1e-12 {
		t.Errorf("val_miou %v is not the mean of the present classes' IoU %v", sum.ValMIoU, present/float64(n))
	}
	metrics, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil || !strings.Contains(string(metrics), `"per_class":[{"class":0,`) {
		t.Errorf("metrics.jsonl validations lack per_class (%v)", err)
	}
	pred := runOK(t, "predict", "--checkpoint", dir, "--input", "dataset:val", "--out", t.TempDir())
	if !strings.Contains(pred, "class       IoU") {
		t.Errorf("predict output has no per-class table:\n%s", pred)
	}
}
