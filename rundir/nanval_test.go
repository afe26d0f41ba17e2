package rundir

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/checkpoint"
)

// TestValidationLossNotFinite: an fp16 validation that overflows (found on
// the first GPU run: the seed UNet at base 64, 10 steps) leaves a run that
// goes on, says why once, writes the loss as null in metrics.jsonl and
// summary.json, ranks nothing by it, saves its checkpoints and resumes to
// the same losses.
func TestValidationLossNotFinite(t *testing.T) {
	cfg := resumeConfig("fp16")
	cfg.Train.LR, cfg.Train.Steps, cfg.Train.ValEvery = 0.3, 6, 2
	cfg.Train.Monitor, cfg.Train.KeepBest = "val_loss", true
	cfg.Train.EarlyStop.Patience = 5
	cfg.Train.Schedule.Kind = "plateau"
	cfg.Output.Progress = "plain"
	dir := t.TempDir()
	var out bytes.Buffer
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: dir, Progress: &out}, nil)
	if sum.Steps != 6 || sum.ValLoss.Finite() {
		t.Fatalf("ran %d steps, last val loss %v: want 6 steps and a loss that is not finite (make the config overflow again)", sum.Steps, float64(sum.ValLoss))
	}
	if n := strings.Count(out.String(), "the loss is NaN, written as null"); n != 1 {
		t.Errorf("the note came %d times, want once:\n%s", n, out.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), `"val_loss":null`); n != 3 {
		t.Errorf("metrics.jsonl has %d null val losses, want 3", n)
	}
	var s map[string]any
	if b, err := os.ReadFile(filepath.Join(dir, "summary.json")); err != nil || json.Unmarshal(b, &s) != nil || s["val_loss"] != nil {
		t.Errorf("summary.json: %v, val_loss %v (want null)", err, s["val_loss"])
	}
	if m := openCk(t, sum.LastCheckpoint).Manifest; m.Step != 6 || m.Score != nil || m.EarlyStop == nil || m.EarlyStop.Best != nil {
		t.Errorf("last checkpoint: step %d, score %v, early stop %+v: want step 6 and no score", m.Step, m.Score, m.EarlyStop)
	}
	var h checkpoint.ValRecord
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		if strings.Contains(line, `"val"`) {
			if err := json.Unmarshal([]byte(line), &h); err != nil || h.ValLoss.Finite() {
				t.Errorf("reading %s back: %v, loss %v (want NaN)", line, err, float64(h.ValLoss))
			}
		}
	}

	resumed := t.TempDir()
	c4 := cfg
	c4.Train.Steps = 4
	mustRun(t, context.Background(), c4, Options{OutDir: resumed}, nil)
	mustRun(t, context.Background(), cfg, Options{OutDir: resumed, Resume: "auto"}, nil)
	sameLosses(t, stepLosses(t, dir), stepLosses(t, resumed))
}
