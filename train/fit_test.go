package train

import (
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
)

// TestFitAutoOnOOMDuringTraining: when memory is taken away after the plan
// was made (another user of the device), the step that runs out moves to the
// next candidate and succeeds, keeping the effective batch.
func TestFitAutoOnOOMDuringTraining(t *testing.T) {
	c := planGridConfig(32, 8, "bilinear", "batch")
	c.Memory.Allocator = "caching" // an arena holds its memory from the start: nobody takes it later
	full, err := PlanConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Memory.Capacity, c.Memory.Fit = config.ByteSize(full.PeakReservedBytes), "auto"
	tr, err := NewTrainer(c, Placement{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if len(tr.FitLog) != 1 || !strings.Contains(tr.FitLog[0], "the configuration as it is") {
		t.Fatalf("fit log %q: the configuration fits exactly and should be kept", tr.FitLog)
	}
	// Someone else takes what the plan left free at the peak (the rest of
	// its last page) and a fifth of the run's need besides.
	pad, err := tr.Pool().Alloc(memory.Workspace, full.PeakReservedBytes-full.PeakAllocatedBytes+full.PeakAllocatedBytes/5)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Pool().MustFree(pad)
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

// TestSizeKeyInAdvice: the advice when nothing fits names the key that
// sets the training size: data.resize for images, data.size for
// synthetic volumes, data.patch for NIfTI volumes (volumes refuse
// data.resize).
func TestSizeKeyInAdvice(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *config.Config)
		want string
	}{
		{"images", func(c *config.Config) {}, "data.resize"},
		{"synthetic volumes", func(c *config.Config) { c.Model.Dims = 3 }, "data.size"},
		{"nifti volumes", func(c *config.Config) { c.Model.Dims, c.Data.Source = 3, data.SourceNIfTI }, "data.patch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Model.Base, cfg.Model.Depth, cfg.Data.Size, cfg.Data.Count, cfg.Train.BatchSize = 2, 2, 16, 16, 2
			tc.edit(&cfg)
			if got := SizeKey(cfg); got != tc.want {
				t.Fatalf("SizeKey: %q, want %q", got, tc.want)
			}
			if tc.want == "data.patch" {
				return // planning needs the volumes
			}
			cfg.Memory.Capacity = 1 << 10
			_, _, err := Fit(cfg)
			if err == nil || !strings.Contains(err.Error(), "lower "+tc.want+" or model.base") {
				t.Errorf("Fit: %v, want the advice to name %s", err, tc.want)
			}
		})
	}
}

// TestTooFewTrainingSamples: a batch larger than the training split is
// refused naming the keys, and data.count only for synthetic data.
func TestTooFewTrainingSamples(t *testing.T) {
	dir := volumeFolder(t, 3, 16)
	for _, tc := range []struct {
		name string
		edit func(c *config.Config)
		want string
	}{
		{"synthetic", func(c *config.Config) { c.Data.Count, c.Train.BatchSize = 8, 8 }, "needs 8 training samples, there are 7; lower them or raise data.count"},
		{"nifti volumes", func(c *config.Config) {
			c.Model.Dims, c.Model.InChannels, c.Model.Classes, c.Data.Source, c.Data.Path, c.Data.ValFraction = 3, 1, 2, data.SourceNIfTI, dir, 0.5
		}, "needs 2 training samples, there are 1; lower them or add samples to " + dir + " (or lower data.val_fraction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Model.Base, cfg.Model.Depth, cfg.Data.Size, cfg.Train.BatchSize = 2, 2, 16, 2
			tc.edit(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if _, err := NewTrainer(cfg, Placement{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
