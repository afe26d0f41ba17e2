package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/predict"
)

// TestEval: a run on a train/ val/ test/ folder set; eval scores its test
// split (and its val split as training validated it), writes the report
// into the run, and can score another dataset by --set data.path; model
// keys and a split the data lacks are refused; predict reads dataset:test.
func TestEval(t *testing.T) {
	ds := filepath.Join(t.TempDir(), "shapes")
	for sub, n := range map[string]string{"train": "10", "val": "4", "test": "3"} {
		runOK(t, "data", "synth", "--out", filepath.Join(ds, sub), "--count", n, "--size", "16", "--seed", n)
	}
	runDir, sum := trainTiny(t, "--set", "data.source=folder", "--set", "data.path="+ds)

	out := runOK(t, "eval", "--checkpoint", runDir, "--newest", "--split", "test")
	if !strings.Contains(out, "test, 3 samples") || !strings.Contains(out, "class       IoU") {
		t.Errorf("eval --split test:\n%s", out)
	}
	files, _ := filepath.Glob(filepath.Join(runDir, "eval", "test-step-*.json"))
	if len(files) != 1 {
		t.Fatalf("eval reports: %v", files)
	}
	var rep predict.EvalReport
	b, _ := os.ReadFile(files[0])
	if err := json.Unmarshal(b, &rep); err != nil || rep.Samples != 3 || len(rep.PerClass) != 4 {
		t.Errorf("report %+v, %v", rep, err)
	}

	val := filepath.Join(t.TempDir(), "val.json")
	runOK(t, "eval", "--checkpoint", runDir, "--newest", "--out", val)
	b, _ = os.ReadFile(val)
	if err := json.Unmarshal(b, &rep); err != nil || rep.Samples != 4 || rep.ValMIoU != sum.ValMIoU {
		t.Errorf("eval of val: miou %v over %d samples, training's %v (%v)", rep.ValMIoU, rep.Samples, sum.ValMIoU, err)
	}

	other := filepath.Join(t.TempDir(), "other")
	runOK(t, "data", "synth", "--out", other, "--count", "8", "--size", "16", "--seed", "77")
	out = runOK(t, "eval", "--checkpoint", runDir, "--set", "data.path="+other, "--out", filepath.Join(t.TempDir(), "o.json"))
	if !strings.Contains(out, "val, ") {
		t.Errorf("eval on another set:\n%s", out)
	}
	var o, e bytes.Buffer
	if code := run([]string{"eval", "--checkpoint", runDir, "--set", "data.path=" + other, "--split", "test"}, &o, &e); code != 1 ||
		!strings.Contains(e.String(), "no test split") {
		t.Errorf("a set without test/: exit %d, %s", code, e.String())
	}
	e.Reset()
	if code := run([]string{"eval", "--checkpoint", runDir, "--set", "model.base=8"}, &o, &e); code != 2 || !strings.Contains(e.String(), "only data.* keys") {
		t.Errorf("--set model.base: exit %d, %s", code, e.String())
	}
	pred := runOK(t, "predict", "--checkpoint", runDir, "--input", "dataset:test", "--out", t.TempDir())
	if !strings.Contains(pred, "predicted 3 images") {
		t.Errorf("predict dataset:test: %s", pred)
	}
}

// TestEvalReportsKeepTheirOwn: evaluations with --tta or on other data by
// --set go into reports of their own names, so the plain evaluation's
// report is never replaced by another view's.
func TestEvalReportsKeepTheirOwn(t *testing.T) {
	runDir, _ := trainTiny(t)
	runOK(t, "eval", "--checkpoint", runDir)
	plain, _ := filepath.Glob(filepath.Join(runDir, "eval", "val-step-*.json"))
	if len(plain) != 1 {
		t.Fatalf("reports %v", plain)
	}
	before, _ := os.ReadFile(plain[0])
	runOK(t, "eval", "--checkpoint", runDir, "--tta")
	runOK(t, "eval", "--checkpoint", runDir, "--set", "data.count=12")
	all, _ := filepath.Glob(filepath.Join(runDir, "eval", "val-step-*.json"))
	if len(all) != 3 {
		t.Errorf("reports %v, want three: plain, -tta, -data-HASH", all)
	}
	if after, _ := os.ReadFile(plain[0]); !bytes.Equal(after, before) {
		t.Errorf("another evaluation replaced %s", plain[0])
	}
}

// TestEvalMatchesValidationWithAuto: with model.conv_algo: auto at widths
// where it takes Winograd, eval scores the val split with training's last
// validation's bits: loss, pixel accuracy, mIoU and Dice (auto's choice
// is the layer's shape, the same in training, validation and eval).
func TestEvalMatchesValidationWithAuto(t *testing.T) {
	runDir, sum := trainTiny(t, "--set", "model.base=16", "--set", "model.depth=3", "--set", "data.size=32",
		"--set", "model.conv_algo=auto", "--set", "train.steps=2")
	out := filepath.Join(t.TempDir(), "val.json")
	runOK(t, "eval", "--checkpoint", runDir, "--newest", "--out", out)
	var rep predict.EvalReport
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	got, want := rep.Validation, sum.Validation
	if got.ValLoss != want.ValLoss || got.ValPixelAcc != want.ValPixelAcc || got.ValMIoU != want.ValMIoU || got.ValDice != want.ValDice {
		t.Errorf("eval of val: loss %v, acc %v, miou %v, dice %v; training's %v, %v, %v, %v",
			got.ValLoss, got.ValPixelAcc, got.ValMIoU, got.ValDice, want.ValLoss, want.ValPixelAcc, want.ValMIoU, want.ValDice)
	}
}

// TestEvalFoldersHostile: eval --predictions --references refuses what
// would be ignored or lost, exit 1, naming the flag or file and the fix,
// and writes no report.
func TestEvalFoldersHostile(t *testing.T) {
	dir := t.TempDir()
	shapes := filepath.Join(dir, "shapes")
	runOK(t, "data", "synth", "--out", shapes, "--count", "1", "--size", "16")
	masks := filepath.Join(shapes, "masks")
	both := []string{"eval", "--predictions", masks, "--references", masks}
	folder := filepath.Join(dir, "preds")
	if err := os.MkdirAll(filepath.Join(folder, "00000.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a prediction that is a folder", []string{"--predictions", folder}, "--predictions: " + filepath.Join(folder, "00000.png") + " is a folder named as a mask: move it out of " + folder + ", or rename it"},
		{"a reference that is a folder", []string{"--references", folder}, "--references: " + filepath.Join(folder, "00000.png") + " is a folder named as a mask"},
		{"--checkpoint ignored", []string{"--checkpoint", "runs/q"}, "--checkpoint: a checkpoint's eval flags: drop them, or drop --predictions and --references"},
		{"--tta and --split ignored", []string{"--tta", "--split", "test"}, "--split, --tta: a checkpoint's eval flags"},
		{"--set ignored", []string{"--set", "data.count=3"}, "--set: a checkpoint's eval flags"},
		{"--out over a reference", []string{"--out", filepath.Join(masks, "00000.png")}, "--out " + filepath.Join(masks, "00000.png") + " names an image or mask file, which the JSON report would replace"},
		{"--out over an image", []string{"--out", filepath.Join(shapes, "images", "00000.PNG")}, "name the report .json, e.g. --out " + filepath.Join(shapes, "images", "eval.json")},
		{"--out a new mask in --references", []string{"--out", filepath.Join(masks, "r.nii.gz")}, "add as a case"},
		{"--out a jpeg", []string{"--out", filepath.Join(dir, "r.jpg")}, "names an image or mask file"},
	} {
		code, _, stderr := runOut(append(slices.Clip(both), tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d: %s", tc.name, code, stderr)
		}
		if _, err := os.Stat(filepath.Join(masks, "eval.json")); err == nil {
			t.Errorf("%s: wrote a report", tc.name)
		}
		if m := readPNG(t, filepath.Join(masks, "00000.png")); m == nil {
			t.Errorf("%s: the reference is gone", tc.name)
		}
	}
}
