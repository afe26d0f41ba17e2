package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportNeverDestroysItsInput: --out naming the checkpoint being read,
// a file in it, anything under the run's checkpoints/ or one of the run's
// own files is refused (usage error, nothing written); without --out the
// file goes into the run directory.
func TestExportNeverDestroysItsInput(t *testing.T) {
	runDir, sum := trainTiny(t)
	ck := sum.LastCheckpoint
	model := filepath.Join(ck, "model.safetensors")
	before, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{
		model,
		ck,
		filepath.Join(ck, "new.safetensors"),
		filepath.Join(runDir, "checkpoints", "x.safetensors"),
		filepath.Join(runDir, "metrics.jsonl"),
		filepath.Join(runDir, "config.yaml"),
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"export", "--checkpoint", runDir, "--out", out}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "--out "+out) {
			t.Errorf("export --out %s: exit %d, %q: want a usage error naming it", out, code, stderr.String())
		}
	}
	if after, _ := os.ReadFile(model); !bytes.Equal(after, before) {
		t.Fatalf("an export changed the checkpoint's model.safetensors")
	}
	if _, err := os.Stat(filepath.Join(ck, "new.safetensors")); err == nil {
		t.Errorf("an export wrote into the checkpoint")
	}

	stdout := runOK(t, "export", "--checkpoint", runDir, "--dtype", "bf16")
	want := filepath.Join(runDir, "model-step-00000004-bf16.safetensors")
	if _, err := os.Stat(want); err != nil || !strings.Contains(stdout, want) {
		t.Errorf("export without --out: %v, stdout %q; want %s", err, stdout, want)
	}
}

// TestEvalAndPredictNeverDestroyTheirInput: as export's, eval's and
// predict's --out naming the checkpoint being read, a path in it, anything
// under the run's checkpoints/ or one of the run's own files is refused
// (usage error naming it), and nothing of the run changes.
func TestEvalAndPredictNeverDestroyTheirInput(t *testing.T) {
	runDir, sum := trainTiny(t)
	ck := sum.LastCheckpoint
	before := map[string][]byte{}
	for _, f := range []string{filepath.Join(ck, "model.safetensors"), filepath.Join(runDir, "metrics.jsonl"), filepath.Join(runDir, "config.yaml")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
	}
	ckEntries, err := os.ReadDir(ck)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"eval", "--checkpoint", runDir},
		{"predict", "--checkpoint", runDir, "--input", "dataset:val"},
	} {
		for _, out := range []string{
			ck,
			filepath.Join(ck, "model.safetensors"),
			filepath.Join(ck, "new"),
			filepath.Join(runDir, "checkpoints", "x"),
			filepath.Join(runDir, "metrics.jsonl"),
			filepath.Join(runDir, "config.yaml"),
			filepath.Join(runDir, "summary.json"),
		} {
			var stdout, stderr bytes.Buffer
			code := run(append(append([]string{}, cmd...), "--out", out), &stdout, &stderr)
			if want := cmd[0] + ": --out " + out; code != 2 || !strings.Contains(stderr.String(), want) {
				t.Errorf("%s --out %s: exit %d, %q: want a usage error with %q", cmd[0], out, code, stderr.String(), want)
			}
		}
	}
	for f, b := range before {
		if after, _ := os.ReadFile(f); !bytes.Equal(after, b) {
			t.Errorf("a refused eval or predict changed %s", f)
		}
	}
	if after, _ := os.ReadDir(ck); len(after) != len(ckEntries) {
		t.Errorf("the checkpoint holds %d entries after the refusals, %d before", len(after), len(ckEntries))
	}
	if _, err := os.Stat(filepath.Join(runDir, "checkpoints", "x")); err == nil {
		t.Errorf("a refused command wrote into checkpoints/")
	}
}

// TestPredictTileBound: a --tile beyond the largest side (16384), here
// the next multiple of 2^model.depth, is refused by name and nothing is
// predicted. (16384 itself passes the parse: predict/tiled_test.go.)
func TestPredictTileBound(t *testing.T) {
	runDir, _ := trainTiny(t)
	images := filepath.Join(t.TempDir(), "shapes")
	runOK(t, "data", "synth", "--out", images, "--count", "2", "--size", "16")
	out := filepath.Join(t.TempDir(), "pred")
	var stdout, stderr bytes.Buffer
	code := run([]string{"predict", "--checkpoint", runDir, "--input", filepath.Join(images, "images"), "--out", out, "--tile", "16388"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), `--tile "16388"`) || !strings.Contains(stderr.String(), "up to 16384") {
		t.Errorf("--tile 16388: exit %d, %q: want a refusal naming the bound", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, "predict.json")); err == nil {
		t.Errorf("a refused predict wrote predict.json")
	}
}

// TestOutputsAreGitIgnored: what train, predict, export and compare write
// by default (runs/...) and weights exported anywhere are ignored by git;
// the PyTorch goldens are not.
func TestOutputsAreGitIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	ignored := func(path string) bool {
		cmd := exec.Command("git", "check-ignore", "--no-index", "-q", path)
		cmd.Dir = root
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("git check-ignore: %v", err)
		}
		return err == nil
	}
	for _, p := range []string{"runs/20261203-101010/config.yaml", "runs/q/checkpoints/step-00000004/model.safetensors",
		"runs/q/predict/val-step-00000004/legend.png", "runs/q/model-step-00000004.safetensors", "runs/compare-1/memory.png",
		"model.safetensors", "weights/unet-fp16.safetensors"} {
		if !ignored(p) {
			t.Errorf("%s is not git-ignored", p)
		}
	}
	for _, p := range []string{"testdata/goldens/unet_bilinear_batch.safetensors", "predict/predict.go", "configs/quickstart.yaml"} {
		if ignored(p) {
			t.Errorf("%s is git-ignored", p)
		}
	}
}
