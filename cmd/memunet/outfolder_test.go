package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/predict"
	"github.com/memunet/memunet/runfiles"
)

// TestEvalLocksItsFolder: while another process holds the folder eval
// writes into, eval stops at once with the in-use line and writes nothing;
// once it is free it writes its report and leaves no lock file beside it.
func TestEvalLocksItsFolder(t *testing.T) {
	runDir, _ := trainTiny(t)
	elsewhere := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		folder string // the folder the command writes into
		glob   string // its result
	}{
		{"eval", []string{"eval", "--checkpoint", runDir}, filepath.Join(runDir, "eval"), "val-step-*.json"},
		{"eval --out", []string{"eval", "--checkpoint", runDir, "--out", filepath.Join(elsewhere, "e.json")}, elsewhere, "e.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold, err := outdir.Acquire(tc.folder, "memunet train")
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			want := fmt.Sprintf("%s is in use by memunet train (pid %d on ", tc.folder, os.Getpid())
			if code != 1 || !strings.Contains(stderr.String(), want) {
				t.Errorf("while held: exit %d, %q; want 1 and %q", code, stderr.String(), want)
			}
			if m, _ := filepath.Glob(filepath.Join(tc.folder, tc.glob)); len(m) > 0 {
				t.Errorf("while held, it wrote %v", m)
			}
			hold.Release()
			stdout.Reset()
			stderr.Reset()
			if code := run(tc.args, &stdout, &stderr); code != 0 {
				t.Fatalf("once free: exit %d: %s", code, stderr.String())
			}
			if m, _ := filepath.Glob(filepath.Join(tc.folder, tc.glob)); len(m) != 1 {
				t.Errorf("once free, results %v", m)
			}
			if _, err := os.Lstat(filepath.Join(tc.folder, outdir.LockName)); !os.IsNotExist(err) && tc.folder != runDir {
				t.Errorf("a lock file stayed beside the result: %v", err)
			}
		})
	}
}

// TestExportFromARunInUse: export writes one file whole, so it takes no
// folder lock: a run that is still training (its folder held) can be
// exported into its own folder, and the holder's lock is left alone.
func TestExportFromARunInUse(t *testing.T) {
	runDir, _ := trainTiny(t)
	hold, err := outdir.Acquire(runDir, "memunet train")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	for _, format := range []string{"safetensors", "onnx"} {
		runOK(t, "export", "--checkpoint", runDir, "--format", format)
		if m, _ := filepath.Glob(filepath.Join(runDir, "model-step-*."+format)); len(m) != 1 {
			t.Errorf("%s: results %v", format, m)
		}
	}
	_, err = outdir.Acquire(runDir, "memunet predict")
	if !strings.Contains(fmt.Sprint(err), "in use by memunet train") {
		t.Errorf("the training run's lock was disturbed: %v", err)
	}
}

// TestExportReplacesAPlantedLink: a symlink where export writes is
// replaced by the file, and what it pointed at is left as it was.
func TestExportReplacesAPlantedLink(t *testing.T) {
	runDir, _ := trainTiny(t)
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.Symlink(target, out); err != nil {
		t.Fatal(err)
	}
	runOK(t, "export", "--checkpoint", runDir, "--out", out)
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("the link's target was written: %q", b)
	}
	if st, err := os.Lstat(out); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s is not a regular file now: %v", out, err)
	}
}

// TestTwoPredictsOneOut: two predicts into one --out at the same moment:
// one writes, the other is refused at once by the lock naming the first's
// pid, and the folder holds one prediction (predict.json lists every file
// there).
func TestTwoPredictsOneOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	runDir, _ := trainTiny(t)
	images := filepath.Join(t.TempDir(), "shapes")
	// Enough images that the first predict still runs when the second starts.
	runOK(t, "data", "synth", "--out", images, "--count", "400", "--size", "16")
	out := filepath.Join(t.TempDir(), "pred")
	raceTwoOf(t, []string{"predict", "--checkpoint", runDir, "--input", filepath.Join(images, "images"), "--out", out, "--overlay"})
	var rep predict.Report
	b, err := os.ReadFile(filepath.Join(out, "predict.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{"predict.json": true, runfiles.Legend: true}
	for _, o := range rep.Outputs {
		listed[filepath.Base(o.Mask)], listed[filepath.Base(o.Overlay)] = true, true
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("%s holds %s, which its predict.json does not list", out, e.Name())
		}
	}
	if len(rep.Outputs) != 400 || len(entries) != 802 { // 400 masks, 400 overlays, legend.png, predict.json
		t.Errorf("%d outputs and %d files, want 400 and 802", len(rep.Outputs), len(entries))
	}
}
