//go:build cudaemu

package emu_test

import (
	"math"
	"testing"

	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/train"
)

// TestQueuedStepsMatchEachStepRead: steps queued on the emulated GPU and
// read in one copy at the end train to the same bits as the same steps
// each reading its own answer (sync launches turn the queue off): every
// step's loss, skip and scaler state, then the weights, the optimizer's
// step count and the scaler. The fp16 cases start from a scale that
// overflows, so the device skips steps (SGD's first among them: its
// first real step comes later) and backs the scale off and grows it; the
// clip cases clip every step on the device (train.clip_grad_norm).
func TestQueuedStepsMatchEachStepRead(t *testing.T) {
	overflow := func(c *config.Config) {
		c.Train.Scaler.InitScale, c.Train.Scaler.BackoffFactor, c.Train.Scaler.GrowthInterval = 0x1p40, 0x1p-12, 2
	}
	cases := map[string]struct {
		variant string
		edit    func(*config.Config)
	}{
		"adam":       {"baseline", nil},
		"fp16-skips": {"fp16", overflow},
		"sgd-skips": {"fp16", func(c *config.Config) {
			overflow(c)
			c.Train.Optimizer, c.Train.LR, c.Train.Momentum = "sgd", 0.05, 0.9
		}},
		"rmsprop-acc4": {"accum4", func(c *config.Config) { c.Train.Optimizer, c.Train.LR, c.Train.Momentum = "rmsprop", 1e-3, 0.9 }},
		"adamw":        {"baseline", func(c *config.Config) { c.Train.Optimizer, c.Train.WeightDecay = "adamw", 0.1 }},
		"clip":         {"baseline", func(c *config.Config) { c.Train.ClipGradNorm = 0.05 }},
		"fp16-clip":    {"fp16", func(c *config.Config) { overflow(c); c.Train.ClipGradNorm = 0.05 }},
		"ce+dice-auto": {"accum4", func(c *config.Config) {
			c.Train.Loss = config.Loss{Kind: "ce+dice", ClassWeights: config.ClassWeights{Auto: true}, DiceSmooth: 1}
		}},
		"focal-fp16": {"fp16", func(c *config.Config) {
			overflow(c)
			c.Train.Loss = config.Loss{Kind: "focal", Gamma: 2, ClassWeights: config.ClassWeights{Values: []float64{1, 2, 3, 0.5}}}
		}},
		"dice-clip": {"baseline", func(c *config.Config) { c.Train.Loss, c.Train.ClipGradNorm = config.Loss{Kind: "dice"}, 0.05 }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := train.DeriveVariant(tinyConfig(), c.variant)
			if err != nil {
				t.Fatal(err)
			}
			if c.edit != nil {
				c.edit(&cfg)
			}
			cfg.Train.Steps = 4
			queued, qgpu := emuTrainer(t, cfg, false)
			each, _ := emuTrainer(t, cfg, true)
			if queued.QueueLimit() < cfg.Train.Steps || each.QueueLimit() != 0 {
				t.Fatalf("queue limits %d and %d", queued.QueueLimit(), each.QueueLimit())
			}
			copies0 := qgpu.Counts().CopiesToHost
			for range cfg.Train.Steps {
				res, err := queued.Step()
				if err != nil || !res.Pending {
					t.Fatalf("queued step: %+v, %v", res, err)
				}
			}
			copies1 := qgpu.Counts().CopiesToHost
			got, err := queued.Settle()
			if err != nil {
				t.Fatal(err)
			}
			copies2 := qgpu.Counts().CopiesToHost
			if copies1 != copies0 || copies2 != copies1+1 {
				t.Errorf("%d copies to the host while the steps queued and %d to read them, want 0 and 1", copies1-copies0, copies2-copies1)
			}
			if len(got) != cfg.Train.Steps {
				t.Fatalf("%d results settled, want %d", len(got), cfg.Train.Steps)
			}
			skipped := 0
			for i := range got {
				want, err := each.Step()
				if err != nil {
					t.Fatal(err)
				}
				g := got[i]
				if math.Float64bits(g.Loss) != math.Float64bits(want.Loss) || g.Skipped != want.Skipped || g.LossScale != want.LossScale ||
					g.GrowthTracker != want.GrowthTracker || g.SkippedSteps != want.SkippedSteps || g.LR != want.LR || g.Pending ||
					math.Float64bits(g.GradNorm) != math.Float64bits(want.GradNorm) || g.Clipping != want.Clipping {
					t.Errorf("step %d queued: loss %v skipped %v scale %g tracker %d skips %d; read each step: loss %v skipped %v scale %g tracker %d skips %d",
						i+1, g.Loss, g.Skipped, g.LossScale, g.GrowthTracker, g.SkippedSteps, want.Loss, want.Skipped, want.LossScale, want.GrowthTracker, want.SkippedSteps)
				}
				if g.Skipped {
					skipped++
				}
			}
			t.Logf("%d of %d steps skipped; the last's gradient norm %v (clipped: %v)", skipped, len(got), got[len(got)-1].GradNorm, got[len(got)-1].Clipping)
			if cfg.Train.ClipGradNorm > 0 && !(got[len(got)-1].Clipping && got[len(got)-1].GradNorm > cfg.Train.ClipGradNorm) {
				t.Errorf("the last step's gradients were not clipped: %+v", got[len(got)-1])
			}
			if (cfg.Train.Scaler.InitScale == 0x1p40) != (skipped > 0) {
				t.Errorf("%d steps skipped", skipped)
			}
			if queued.Opt.Steps() != each.Opt.Steps() || *queued.Scaler != *each.Scaler {
				t.Errorf("queued: %d optimizer steps, scaler %+v; read each step: %d, %+v", queued.Opt.Steps(), *queued.Scaler, each.Opt.Steps(), *each.Scaler)
			}
			for i, p := range queued.Net.Params() {
				a, b := p.Read(), each.Net.Params()[i].Read()
				for k := range a {
					if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
						t.Fatalf("%s[%d]: %v queued, %v read each step", p.Name, k, a[k], b[k])
					}
				}
			}
		})
	}
}

// emuTrainer is a trainer of cfg on a fresh emulated GPU, with sync
// launches (each step reading its own answer) or not.
func emuTrainer(t *testing.T, cfg config.Config, syncLaunches bool) (*train.Trainer, *cuda.Backend) {
	t.Helper()
	gpu, err := emu.Backend(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	gpu.SetSyncLaunches(syncLaunches)
	return trainerOn(t, cfg, gpu), gpu
}

// TestSaveBuffersBesideTheDevice: saving the BatchNorm buffers for a
// step's retry (memory.empty_cache: oom, memory.fit: auto) copies them to
// pinned memory on the copy stream, with no read of the device, and the
// restore puts back exactly what they held when saved, after a step has
// changed them.
func TestSaveBuffersBesideTheDevice(t *testing.T) {
	tr, gpu := emuTrainer(t, tinyConfig(), false)
	var before [][]float32
	for _, p := range tr.Net.Params() {
		if !p.Trainable {
			before = append(before, p.Read())
		}
	}
	copies := gpu.Counts().CopiesToHost
	restore := tr.Net.SaveBuffers()
	if n := gpu.Counts().CopiesToHost - copies; n != 0 {
		t.Errorf("saving the buffers read the device %d times", n)
	}
	if _, err := tr.Step(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Settle(); err != nil {
		t.Fatal(err)
	}
	changed := false
	i := 0
	for _, p := range tr.Net.Params() {
		if !p.Trainable {
			changed = changed || math.Float32bits(p.Read()[0]) != math.Float32bits(before[i][0])
			i++
		}
	}
	if !changed {
		t.Fatal("a training step changed no BatchNorm buffer")
	}
	restore()
	i = 0
	for _, p := range tr.Net.Params() {
		if p.Trainable {
			continue
		}
		got := p.Read()
		for k := range got {
			if math.Float32bits(got[k]) != math.Float32bits(before[i][k]) {
				t.Fatalf("%s[%d]: %v restored, %v saved", p.Name, k, got[k], before[i][k])
			}
		}
		i++
	}
	if err := gpu.Sync(); err != nil {
		t.Fatal(err)
	}
}
