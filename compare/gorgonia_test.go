package compare

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/rundir"
)

// TestRunGorgonia: the reference run trains the steps asked, reports each,
// and writes a summary.json that compare reads back; data other than the
// synthetic set is refused by name.
func TestRunGorgonia(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth = 4, 2
	cfg.Data.Size, cfg.Data.Count = 16, 24
	cfg.Train.BatchSize, cfg.Train.Accumulate = 2, 1
	dir := filepath.Join(t.TempDir(), "gorgonia")
	var losses []float64
	err := RunGorgonia(cfg, 2, dir, func(step int, loss, ms float64) {
		if step != len(losses)+1 || ms < 0 {
			t.Errorf("onStep(%d, %v, %v) after %d steps", step, loss, ms, len(losses))
		}
		losses = append(losses, loss)
	})
	if err != nil {
		t.Fatal(err)
	}
	var sum GorgoniaSummary
	if err := readJSON(filepath.Join(dir, "summary.json"), &sum); err != nil {
		t.Fatal(err)
	}
	if len(losses) != 2 || sum.Steps != 2 || sum.FinalLoss != losses[1] || math.IsNaN(sum.FinalLoss) || sum.FinalLoss <= 0 {
		t.Fatalf("losses %v, summary %+v", losses, sum)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	var keys map[string]any
	if err := json.Unmarshal(raw, &keys); err != nil || keys["step_ms_median"] == nil || keys["peak_rss_bytes"] == nil {
		t.Errorf("summary.json %s: %v", raw, err)
	}

	// Again into the same folder, as compare into the same --out runs it:
	// its own earlier summary is replaced.
	if err := RunGorgonia(cfg, 1, dir, func(int, float64, float64) {}); err != nil {
		t.Fatalf("a second reference run into its own folder: %v", err)
	}
	if err := readJSON(filepath.Join(dir, "summary.json"), &sum); err != nil || sum.Steps != 1 {
		t.Errorf("after the second run: %+v, %v; want 1 step", sum, err)
	}

	cfg.Data.Source = "folder"
	err = RunGorgonia(cfg, 1, t.TempDir(), func(int, float64, float64) { t.Error("a step ran on folder data") })
	if err == nil || !strings.Contains(err.Error(), `data.source is "folder"`) {
		t.Errorf("folder data: %v; want a refusal naming data.source", err)
	}
}

// TestRunGorgoniaGuardsItsOut: the reference run holds its --out under the
// folder's lock, and refuses one that holds a run (train's summary.json
// among its files, or alone) or that another process holds, before any
// step runs and leaving the folder as it was.
func TestRunGorgoniaGuardsItsOut(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth = 4, 2
	cfg.Data.Size, cfg.Data.Count = 16, 24
	cfg.Train.BatchSize, cfg.Train.Accumulate = 2, 1
	trainSummary := `{"steps": 4, "final_loss": 0.5, "peak_allocated_bytes": 1024}`
	for _, tc := range []struct {
		name  string
		files map[string]string
		wants []string
	}{
		{"a run", map[string]string{"config.yaml": "model:\n  base: 4\n", "metrics.jsonl": "{}\n", "summary.json": trainSummary},
			[]string{"already holds a run (config.yaml, metrics.jsonl, summary.json)", "memunet gorgonia", "choose another --out"}},
		{"train's summary alone", map[string]string{"summary.json": trainSummary},
			[]string{"already holds a run (summary.json)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := RunGorgonia(cfg, 1, dir, func(int, float64, float64) { t.Error("a step ran") })
			var ex *rundir.ExistingRunError
			if !errors.As(err, &ex) {
				t.Fatalf("RunGorgonia into %s: %v, want an *rundir.ExistingRunError", tc.name, err)
			}
			for _, want := range append(tc.wants, dir) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != len(tc.files) {
				t.Errorf("the folder holds %d entries after the refusal, want the %d it had", len(entries), len(tc.files))
			}
			for name, body := range tc.files {
				if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != body {
					t.Errorf("%s changed: %q", name, b)
				}
			}
		})
	}

	dir := t.TempDir()
	lock, err := outdir.Acquire(dir, "memunet train")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	err = RunGorgonia(cfg, 1, dir, func(int, float64, float64) { t.Error("a step ran") })
	var inUse *outdir.InUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), "in use by memunet train") {
		t.Errorf("RunGorgonia into a held folder: %v, want it in use by memunet train", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		t.Errorf("RunGorgonia wrote into a held folder")
	}
}
