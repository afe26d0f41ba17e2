package rundir

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/metrics"
)

// earlyStopConfig stops at the second scheduled validation that fails to
// improve by min_delta, which no validation does after the first: with
// val_every 2 and patience 2, at step 6 of 10.
func earlyStopConfig() (c config.Config) {
	c = resumeConfig("fp32")
	c.Train.Steps, c.Train.ValEvery, c.Train.CheckpointEvery = 10, 2, 2
	c.Train.EarlyStop.Patience, c.Train.EarlyStop.MinDelta = 2, 10
	return c
}

// TestEarlyStop: the run ends at the validation that exhausts the patience,
// validates once there, saves its end, says so in summary.json and its
// log; a run resumed before that stops at the same step with the same
// losses (the state is in the checkpoint).
func TestEarlyStop(t *testing.T) {
	cfg := earlyStopConfig()
	dir := t.TempDir()
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	if !sum.EarlyStopped || sum.Steps != 6 {
		t.Fatalf("early stopped %v at step %d, want at 6", sum.EarlyStopped, sum.Steps)
	}
	want := stepLosses(t, dir)
	var vals []int
	f, _ := os.Open(filepath.Join(dir, "metrics.jsonl"))
	dec := json.NewDecoder(f)
	for dec.More() {
		var r checkpoint.ValRecord
		if dec.Decode(&r) == nil && r.Type == "val" {
			vals = append(vals, r.Step)
		}
	}
	f.Close()
	if len(vals) != 3 || vals[2] != 6 {
		t.Errorf("validations at %v, want 2, 4, 6 (no second one at 6)", vals)
	}
	if m := openCk(t, sum.LastCheckpoint).Manifest; m.Step != 6 || m.EarlyStop == nil || m.EarlyStop.Wait != 2 {
		t.Errorf("last checkpoint: step %d, early stop %+v", m.Step, m.EarlyStop)
	}

	resumed := t.TempDir()
	c3 := cfg
	c3.Train.Steps = 3
	mustRun(t, context.Background(), c3, Options{OutDir: resumed}, nil)
	again := mustRun(t, context.Background(), cfg, Options{OutDir: resumed, Resume: "auto"}, nil)
	if !again.EarlyStopped || again.Steps != 6 {
		t.Errorf("resumed: early stopped %v at step %d, want at 6", again.EarlyStopped, again.Steps)
	}
	sameLosses(t, want, stepLosses(t, resumed))
}

// TestBestByMonitor: train.monitor val_loss makes the best checkpoint the
// lowest val loss's; summary.json names the monitor and the score.
func TestBestByMonitor(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.ValEvery, cfg.Train.KeepLast = 6, 2, 0
	cfg.Train.Monitor = "val_loss"
	dir := t.TempDir()
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	f, _ := os.Open(filepath.Join(dir, "metrics.jsonl"))
	defer f.Close()
	dec := json.NewDecoder(f)
	var best *float64
	bestStep := 0
	for dec.More() {
		var r checkpoint.ValRecord
		if dec.Decode(&r) == nil && r.Type == "val" && metrics.Beats("val_loss", float64(r.ValLoss), best, 0) {
			loss := float64(r.ValLoss)
			best, bestStep = &loss, r.Step
		}
	}
	if sum.Monitor != "val_loss" || sum.BestScore == nil || best == nil || *sum.BestScore != *best {
		t.Errorf("summary: monitor %q, best score %v; lowest val loss %v at step %d", sum.Monitor, sum.BestScore, best, bestStep)
	}
	if m := openCk(t, sum.BestCheckpoint).Manifest; m.Step != bestStep || m.Monitor != "val_loss" {
		t.Errorf("best checkpoint: step %d, monitor %q; want step %d", m.Step, m.Monitor, bestStep)
	}
}
