//go:build cudaemu

package emu_test

import (
	"testing"

	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/train"
)

// TestStepCopies: a training step on the emulated GPU reads back from the
// device once: its record, every micro-batch's cross-entropy (sums,
// counts, bad targets) and one finite flag for all the gradients (the
// grad scaler's found_inf, as PyTorch's), not a loss a micro-batch and a
// flag a parameter; memunet bench reports the counts.
func TestStepCopies(t *testing.T) {
	for _, variant := range []string{"baseline", "fp16", "accum4"} {
		t.Run(variant, func(t *testing.T) {
			cfg, err := train.DeriveVariant(tinyConfig(), variant)
			if err != nil {
				t.Fatal(err)
			}
			gpu, err := emu.Backend(1 << 30)
			if err != nil {
				t.Fatal(err)
			}
			row, err := train.Bench(cfg, gpu, 2)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %.1f launches, %.1f copies to the host, %.1f syncs a step", variant, row.LaunchesPerStep, row.CopiesPerStep, row.SyncsPerStep)
			if !row.Counted || row.LaunchesPerStep < 10 {
				t.Fatalf("not counted: %+v", row)
			}
			// Before: the loss's sums and its bad-target flags apart, and a
			// finite flag for each of the parameters; then a loss a
			// micro-batch and the finite flag.
			if row.CopiesPerStep != 1 || row.SyncsPerStep > 1 {
				t.Errorf("%.1f blocking copies to the host and %.1f syncs a step, want 1 (the step's record) and at most 1",
					row.CopiesPerStep, row.SyncsPerStep)
			}
		})
	}
}
