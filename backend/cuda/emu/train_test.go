//go:build cudaemu

package emu_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/train"
)

// tinyConfig is a few steps of a tiny UNet on 16x16 synthetic images.
func tinyConfig() config.Config {
	c := config.Default()
	c.Device = device.Spec{Kind: device.CPU}
	c.Model.Base, c.Model.Depth, c.Model.Classes = 4, 2, 4
	c.Data.Size, c.Data.Count = 16, 24
	c.Train.BatchSize, c.Train.Steps = 4, 2
	return c
}

// trainerOn is a trainer of cfg on b (nil: the CPU), closed when the
// test ends.
func trainerOn(t *testing.T, cfg config.Config, b backend.Backend) *train.Trainer {
	t.Helper()
	tr, err := train.NewTrainer(cfg, train.Placement{Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// lossTol is how close a training step's loss on the emulated GPU must be
// to the CPU's, relative to 1+|loss|, for cfg's precision: exact fp32
// 1e-4 (the summation orders differ); fp32 on TF32 operands PyTorch's
// TF32 bound for convolutions, 0.005 (backendtest's tolTF32); fp16 and
// bf16 their storage's rounding, 2^-10 and 2^-7 (backendtest's tolFP16,
// tolBF16): the GPU rounds its own sums, in another order, to 16 bits.
func lossTol(cfg config.Config, gpu *cuda.Backend) float64 {
	switch {
	case cfg.Train.Precision == backend.Float16:
		return 0x1p-10
	case cfg.Train.Precision == backend.BFloat16:
		return 0x1p-7
	case gpu.ConvTF32():
		return 5e-3
	}
	return 1e-4
}

// TestTrainingMatchesCPU: two training steps on the emulated CUDA backend
// lose what they lose on the CPU (within lossTol), and the peak allocated
// bytes are exactly what the plan on the CUDA backend's sizes predicted:
// fp32 on TF32 (the default) and exact (cuda.tf32: false); fp16 and bf16
// (16-bit tensors, the convolutions on 16-bit operands, the grad scaler);
// all (checkpointing, fp16, 1x4 accumulation); offload (the checkpointed
// inputs in pinned host memory and back); and the other losses and
// optimizers on fp32 (ce+dice with auto class weights and RMSprop; focal
// with SGD and Nesterov; dice with AdamW). Emulation is slow, so the
// other variants are left to the GPU run (tools/check/gpu-check.sh).
func TestTrainingMatchesCPU(t *testing.T) {
	others := map[string]func(*config.Config){
		"ce+dice/rmsprop": func(c *config.Config) {
			c.Train.Loss = config.Loss{Kind: "ce+dice", ClassWeights: config.ClassWeights{Auto: true}, DiceSmooth: 1}
			c.Train.Optimizer, c.Train.LR, c.Train.Momentum = "rmsprop", 1e-3, 0.9
		},
		"focal/sgd": func(c *config.Config) {
			c.Train.Loss = config.Loss{Kind: "focal", Gamma: 2, ClassWeights: config.ClassWeights{Values: []float64{1, 2, 3, 0.5}}}
			c.Train.Optimizer, c.Train.LR, c.Train.Momentum, c.Train.Nesterov = "sgd", 0.05, 0.9, true
		},
		"dice/adamw": func(c *config.Config) {
			c.Train.Loss = config.Loss{Kind: "dice"}
			c.Train.Optimizer, c.Train.WeightDecay = "adamw", 0.1
		},
		"exact": func(c *config.Config) { c.CUDA.TF32 = false },
	}
	for _, name := range []string{"baseline", "exact", "fp16", "bf16", "all", "offload", "ce+dice/rmsprop", "focal/sgd", "dice/adamw"} {
		t.Run(name, func(t *testing.T) {
			cfg := tinyConfig()
			if edit, ok := others[name]; ok {
				edit(&cfg)
			} else {
				var err error
				if cfg, err = train.DeriveVariant(cfg, name); err != nil {
					t.Fatal(err)
				}
			}
			cpu := trainerOn(t, cfg, nil)
			gpu, err := emu.Backend(1 << 30)
			if err != nil {
				t.Fatal(err)
			}
			gpu.SetTF32(cfg.CUDA.TF32)
			tr := trainerOn(t, cfg, gpu)
			// The measured peak as plan takes it: building, every step, validation.
			peak := tr.Pool().Stats().Allocated.Peak
			for step := 1; step <= cfg.Train.Steps; step++ {
				peak = max(peak, stepBoth(t, step, cpu, tr, lossTol(cfg, gpu)).Peak)
			}
			peak = max(peak, validate(t, tr).Allocated.Peak)
			plan := syncAndPlan(t, cfg, gpu)
			if peak != plan.PeakAllocatedBytes {
				t.Errorf("peak allocated %d on cuda (emulated), planned %d", peak, plan.PeakAllocatedBytes)
			}
		})
	}
}

// stepBoth runs a step on the CPU and on the emulated GPU and checks that
// they lose the same within tol (relative to 1+|loss|); the GPU's result.
func stepBoth(t *testing.T, step int, cpu, gpu *train.Trainer, tol float64) train.StepResult {
	t.Helper()
	want, err := cpu.Step()
	if err != nil {
		t.Fatal(err)
	}
	got, err := gpu.Step()
	if err == nil && got.Pending {
		var settled []train.StepResult
		settled, err = gpu.Settle()
		got = settled[len(settled)-1]
	}
	if err != nil {
		t.Fatal(err)
	}
	d := math.Abs(got.Loss-want.Loss) / (1 + math.Abs(want.Loss))
	if d > tol || math.IsNaN(got.Loss) {
		t.Errorf("step %d: loss %v on cuda (emulated), %v on the CPU: %.3g apart, tolerance %.3g", step, got.Loss, want.Loss, d, tol)
	}
	t.Logf("step %d: loss %v on cuda (emulated), %v on the CPU: %.3g apart (tolerance %.3g)", step, got.Loss, want.Loss, d, tol)
	return got
}

// validate runs a validation in a peak window of its own and returns the
// pool's statistics after it.
func validate(t *testing.T, tr *train.Trainer) memory.Stats {
	t.Helper()
	tr.Pool().ResetPeak()
	if _, err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	return tr.Pool().Stats()
}

// syncAndPlan waits for the emulated GPU (reporting its errors) and plans
// cfg on its sizes and memory.
func syncAndPlan(t *testing.T, cfg config.Config, gpu *cuda.Backend) train.PlanRow {
	t.Helper()
	if err := gpu.Sync(); err != nil {
		t.Fatal(err)
	}
	plan, err := train.PlanConfigOn(cfg, gpu)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestDriverOutOfMemory: when the device itself is full (not the pool's
// capacity), the pool's out-of-memory error is the one a user gets, with
// the driver's cause in it: cuMemAlloc for segments, cuMemCreate for pages.
func TestDriverOutOfMemory(t *testing.T) {
	for page, call := range map[int64]string{0: "cuMemAlloc", emu.Page: "cuMemCreate"} {
		gpu, err := cuda.New(emu.NewPaged(4<<20, page))
		if err != nil {
			t.Fatal(err)
		}
		pool := memory.NewPool(gpu.Allocator(), memory.Options{})
		if pool.Stats().PageBytes != page {
			t.Fatalf("a device of %d-byte pages gives a pool of %d-byte pages", page, pool.Stats().PageBytes)
		}
		a, err := pool.Alloc(memory.Activations, 2<<20)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pool.Alloc(memory.Activations, 2<<20)
		var oom *memory.OutOfMemoryError
		if !errors.As(err, &oom) || !errors.Is(err, memory.ErrExhausted) || !strings.Contains(err.Error(), call) {
			t.Errorf("a full device with %d-byte pages: %v", page, err)
		}
		pool.MustFree(a)
		pool.EmptyCache()
		if err := gpu.Sync(); err != nil {
			t.Errorf("pages %d: %v", page, err)
		}
	}
}

// TestCachingOnPagedDevice: the caching pool on an emulated device that
// maps pages trains plan's program (four steps, a validation after the
// second and the fourth) with the losses of the CPU, and reserves exactly
// what plan predicted for it, moving pages as it goes. Checkpointing frees
// and allocates within the backward pass; pages of 4 KiB make a tiny
// model's buffers span many.
func TestCachingOnPagedDevice(t *testing.T) {
	cfg, err := train.DeriveVariant(tinyConfig(), "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Memory.Allocator, cfg.Train.Steps, cfg.Train.BatchSize = "caching", 4, 2
	cpu := trainerOn(t, cfg, nil)
	gpu, err := cuda.New(emu.NewPaged(1<<30, 4<<10))
	if err != nil {
		t.Fatal(err)
	}
	tr := trainerOn(t, cfg, gpu)
	reserved := tr.Pool().Stats().Reserved.Peak
	for step := 1; step <= 4; step++ {
		got := stepBoth(t, step, cpu, tr, lossTol(cfg, gpu))
		for _, pm := range got.Phases {
			reserved = max(reserved, pm.PeakReservedBytes)
		}
		if step%2 == 0 {
			reserved = max(reserved, validate(t, tr).Reserved.Peak)
		}
	}
	plan := syncAndPlan(t, cfg, gpu)
	st := tr.Pool().Stats()
	if reserved != plan.PeakReservedBytes || st.PageBytes != 4<<10 || st.PagesMapped == 0 || st.PagesUnmapped == 0 {
		t.Errorf("reserved peak %d on cuda (emulated), planned %d; %+v", reserved, plan.PeakReservedBytes, st)
	}
	t.Logf("allocated peak %d, reserved peak %d (%.3fx); %d pages mapped, %d unmapped", plan.PeakAllocatedBytes,
		reserved, float64(reserved)/float64(plan.PeakAllocatedBytes), st.PagesMapped, st.PagesUnmapped)
}

// TestMeasurePageMoves: the page-move measurement the device check runs
// maps and unmaps every page, leaves the device's memory as it was, and
// refuses a device that does not map pages.
func TestMeasurePageMoves(t *testing.T) {
	d := emu.New(1 << 30)
	gpu, err := cuda.New(d)
	if err != nil {
		t.Fatal(err)
	}
	freeBefore, _, _ := d.MemInfo()
	m, err := gpu.MeasurePageMoves(8)
	if err != nil || m.Pages != 8 || m.PageBytes != emu.Page {
		t.Fatalf("%+v, %v", m, err)
	}
	if free, _, _ := d.MemInfo(); free != freeBefore {
		t.Errorf("%d bytes free after the measurement, %d before", free, freeBefore)
	}
	unpaged, err := cuda.New(emu.NewPaged(1<<30, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unpaged.MeasurePageMoves(8); err == nil {
		t.Error("a device without pages measured page moves")
	}
}
