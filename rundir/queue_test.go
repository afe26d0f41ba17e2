//go:build cudaemu

package rundir

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/train"
)

// TestQueuedRunMatchesEachStepRead: on the emulated GPU a run whose steps
// queue on the device, read every output.log_every (3) steps, writes the
// metrics and the checkpoint of a run whose every step reads its own
// answer (sync launches), bit for bit; so does one interrupted in the
// middle of a window (the steps queued so far are read, the checkpoint
// taken) and resumed. fp16 with a short growth interval: the scale
// changes on the device.
func TestQueuedRunMatchesEachStepRead(t *testing.T) {
	cfg := resumeConfig("fp16")
	cfg.Train.Steps, cfg.Train.ValEvery, cfg.Train.CheckpointEvery, cfg.Output.LogEvery = 7, 0, 0, 3
	queuedDir, eachDir, interruptedDir := t.TempDir(), t.TempDir(), t.TempDir()
	queuedGPU, each := emuBackend(t, nil), emuBackend(t, nil)
	queued := mustRun(t, context.Background(), cfg, Options{OutDir: queuedDir, backend: queuedGPU}, nil)
	each.SetSyncLaunches(true)
	readEach := mustRun(t, context.Background(), cfg, Options{OutDir: eachDir, backend: each}, nil)
	queuedCopies, eachCopies := queuedGPU.Counts().CopiesToHost, each.Counts().CopiesToHost
	if queuedCopies+4 > eachCopies { // 7 steps read in 3 copies, not 7
		t.Errorf("%d copies to the host queued, %d read each step", queuedCopies, eachCopies)
	}
	want := stepRecords(t, eachDir)
	if got := stepRecords(t, queuedDir); got != want {
		t.Errorf("metrics.jsonl's steps, queued:\n%s\nread each step:\n%s", got, want)
	}
	sameState(t, openCk(t, readEach.LastCheckpoint), openCk(t, queued.LastCheckpoint))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	backwards := 0
	stopAt4 := func(tr *train.Trainer) {
		tr.AfterBackward = func() {
			if backwards++; backwards == 4 {
				cancel()
			}
		}
	}
	part := mustRun(t, ctx, cfg, Options{OutDir: interruptedDir, backend: emuBackend(t, nil)}, stopAt4)
	if !part.Interrupted || part.Steps != 4 {
		t.Fatalf("interrupted run: %d steps, interrupted %v; want 4, true", part.Steps, part.Interrupted)
	}
	second := mustRun(t, context.Background(), cfg, Options{OutDir: interruptedDir, Resume: "auto", backend: emuBackend(t, nil)}, nil)
	if got := stepRecords(t, interruptedDir); got != want {
		t.Errorf("metrics.jsonl's steps, interrupted at 4 and resumed:\n%s\nread each step:\n%s", got, want)
	}
	sameState(t, openCk(t, readEach.LastCheckpoint), openCk(t, second.LastCheckpoint))
}

// stepRecords is metrics.jsonl's step records without their times and
// memory, one line each.
func stepRecords(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for line := range strings.Lines(string(raw)) {
		var r StepRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type != "step" {
			continue
		}
		out, err := json.Marshal(struct {
			Step, Epoch             int
			Loss, LR, Scale         float64
			Tracker, Skips          int
			Skipped                 bool
			Peak, Allocated, Device int64
		}{r.Step, r.Epoch, r.Loss, r.LR, r.LossScale, r.GrowthTracker, r.SkippedSteps, r.StepSkipped,
			r.PeakAllocatedBytes, r.AllocatedBytes, r.DeviceUsedBytes})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(out, '\n'))
	}
	return b.String()
}
