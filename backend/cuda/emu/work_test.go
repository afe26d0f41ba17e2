//go:build cudaemu

package emu_test

import (
	"testing"

	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/train"
)

// TestStepCopies: training steps on the emulated GPU queue on the device
// and are read once every output.log_every steps, as a run reads them: a
// window's every micro-batch's cross-entropy (sums, counts, bad targets)
// and every step's finite flag (the grad scaler's found_inf, as
// PyTorch's) in one copy, not a loss a micro-batch and a flag a parameter
// or a step; and no upload waits for the device. So too with nnU-Net's
// loss (Dice and cross-entropy, formed on the device) and clipping, and
// with the BatchNorm buffers saved each step for a retry. memunet bench reports
// the counts.
func TestStepCopies(t *testing.T) {
	for _, variant := range []string{"baseline", "fp16", "accum4", "nnunet", "retry"} {
		t.Run(variant, func(t *testing.T) {
			cfg := tinyConfig()
			switch variant {
			case "nnunet": // its loss and clipping
				cfg.Train.Loss, cfg.Train.ClipGradNorm = config.Loss{Kind: "ce+dice", DiceSmooth: 1e-5}, 12
			case "retry": // the BatchNorm buffers saved each step, for a retry
				cfg.Memory.EmptyCache = config.EmptyOOM
			default:
				d, err := train.DeriveVariant(cfg, variant)
				if err != nil {
					t.Fatal(err)
				}
				cfg = d
			}
			cfg.Output.LogEvery = 3
			gpu, err := emu.Backend(1 << 30)
			if err != nil {
				t.Fatal(err)
			}
			row, err := train.Bench(cfg, gpu, 6)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %.1f launches, %.2f copies to the host, %.2f blocking uploads, %.2f syncs a step; a read every %d steps",
				variant, row.LaunchesPerStep, row.CopiesPerStep, row.BlockingUploadsPerStep, row.SyncsPerStep, row.StepsPerRead)
			if !row.Counted || row.LaunchesPerStep < 10 {
				t.Fatalf("not counted: %+v", row)
			}
			// Before: the loss's sums and its bad-target flags apart, and a
			// finite flag for each of the parameters; then a loss a
			// micro-batch and the finite flag; then one read a step.
			// The micro-batches' uploads are staged (pinned memory, the copy
			// stream): none waits for the work before it.
			if row.BlockingUploadsPerStep != 0 {
				t.Errorf("%.2f uploads a step waited for the device", row.BlockingUploadsPerStep)
			}
			if row.StepsPerRead != 3 || row.CopiesPerStep*3 != 1 || row.SyncsPerStep*3 > 1 {
				t.Errorf("%.2f blocking copies to the host and %.2f syncs a step, a read every %d steps; want one copy and at most one sync every 3 steps",
					row.CopiesPerStep, row.SyncsPerStep, row.StepsPerRead)
			}
		})
	}
}
