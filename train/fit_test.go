package train

import (
	"context"
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
)

// TestFitAutoPicksFittingVariant: under a capacity the configured baseline
// cannot meet, memory.fit: auto trains a variant whose planned peak fits,
// with the same effective batch, and the run stays under the capacity.
func TestFitAutoPicksFittingVariant(t *testing.T) {
	base := planGridConfig(32, 8, "bilinear", "batch")
	full, err := PlanConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, frac := range []float64{0.9, 0.6, 0.35} {
		c := base
		c.Memory.Capacity = config.ByteSize(float64(full.PeakAllocatedBytes) * frac)
		c.Memory.Fit = "auto"
		sum, err := Run(context.Background(), c, Options{OutDir: t.TempDir()})
		if err != nil {
			t.Fatalf("capacity %.0f%% of baseline: %v", 100*frac, err)
		}
		if sum.MicroBatch*sum.Accumulate != 8 {
			t.Errorf("capacity %.0f%%: effective batch %d x %d, want 8", 100*frac, sum.MicroBatch, sum.Accumulate)
		}
		if sum.PeakAllocatedBytes > int64(c.Memory.Capacity) {
			t.Errorf("capacity %.0f%%: peak %d over capacity %d", 100*frac, sum.PeakAllocatedBytes, c.Memory.Capacity)
		}
		if len(sum.Fit) != 1 || !strings.Contains(sum.Fit[0], "fits memory.capacity") || !strings.Contains(sum.Fit[0], "did not fit: as configured") ||
			!strings.Contains(sum.Fit[0], "model.checkpoint: all") {
			t.Errorf("capacity %.0f%%: fit log %q", 100*frac, sum.Fit)
		}
		t.Logf("capacity %.0f%%: %s", 100*frac, sum.Fit[0])
	}
	// Far too small: a clear error naming what was tried.
	c := base
	c.Memory.Capacity, c.Memory.Fit = 4096, "auto"
	_, err = Run(context.Background(), c, Options{OutDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "nothing fits") || !strings.Contains(err.Error(), "as configured") {
		t.Errorf("capacity 4 KiB: %v", err)
	}
}

// TestFitAutoOnOOMDuringTraining: when memory is taken away after the plan
// was made (another user of the device), the step that runs out moves to the
// next candidate and succeeds, keeping the effective batch.
func TestFitAutoOnOOMDuringTraining(t *testing.T) {
	c := planGridConfig(32, 8, "bilinear", "batch")
	full, err := PlanConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Memory.Capacity, c.Memory.Fit = config.ByteSize(full.PeakAllocatedBytes), "auto"
	tr, err := NewTrainer(c)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if len(tr.FitLog) != 1 || !strings.Contains(tr.FitLog[0], "the configuration as it is") {
		t.Fatalf("fit log %q: the configuration fits exactly and should be kept", tr.FitLog)
	}
	// Someone else takes a fifth of the device.
	pad, err := tr.Pool.Alloc(memory.Workspace, full.PeakAllocatedBytes/5)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Pool.MustFree(pad)
	res, err := tr.Step()
	if err != nil {
		t.Fatalf("step after losing memory: %v", err)
	}
	if !res.Retried || len(tr.FitLog) < 2 || !strings.Contains(tr.FitLog[len(tr.FitLog)-1], "out of memory during training") {
		t.Errorf("retried=%v, fit log %q", res.Retried, tr.FitLog)
	}
	if b := tr.Config.Train.BatchSize * tr.Config.Train.Accumulate; b != 8 {
		t.Errorf("effective batch %d after moving on, want 8", b)
	}
	if _, err := tr.Step(); err != nil {
		t.Errorf("next step: %v", err)
	}
}
