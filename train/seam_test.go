package train

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/memory"
)

// seamConfigs are training runs that exercise every path of a step:
// recompute, fp16 with the grad scaler, bf16, 4-step accumulation, both
// up modes and all norms, and emptying the cache after every step.
func seamConfigs() map[string]config.Config {
	out := map[string]config.Config{}
	base := planGridConfig(16, 4, "bilinear", "batch")
	base.Data.Count = 24
	for _, name := range VariantNames() {
		c, err := DeriveVariant(base, name)
		if err != nil {
			panic(err)
		}
		out[name] = c
	}
	c := base
	c.Model.Up, c.Model.Norm, c.Model.Checkpoint = "transpose", "group", config.Checkpoint{Levels: []int{0, 2}}
	c.Train.Precision, c.Train.Accumulate, c.Train.BatchSize = backend.Float16, 2, 2
	out["transpose/group/ck[0,2]/fp16/2x2"] = c
	c = base
	c.Model.Norm, c.Memory.EmptyCache = "none", config.EmptyStep
	out["none/empty_cache step"] = c
	c = base
	c.Train.Optimizer, c.Train.Momentum, c.Train.Nesterov, c.Train.Precision = "sgd", 0.9, true, backend.Float16
	out["sgd nesterov/fp16"] = c
	c = base
	c.Train.Optimizer, c.Train.Momentum, c.Train.Accumulate, c.Train.BatchSize = "rmsprop", 0.9, 2, 2
	out["rmsprop momentum/2x2"] = c
	c = base
	c.Train.Loss = config.Loss{Kind: "ce+dice", ClassWeights: config.ClassWeights{Auto: true}, DiceSmooth: 1}
	c.Train.Precision = backend.BFloat16
	out["ce+dice auto weights/bf16"] = c
	c = base
	c.Train.Loss = config.Loss{Kind: "focal", Gamma: 2, ClassWeights: config.ClassWeights{Values: []float64{1, 2, 3}}}
	out["focal weighted"] = c
	// Validation's full batches after the first are counted, not run, on
	// the planning side (evaluate): 25 samples are 6 batches of 4 and a
	// tail of 1, in the arena and in the caching pool.
	c = base
	c.Data.Count = 100
	out["25 validation samples"] = c
	c.Memory.Allocator = "caching"
	out["25 validation samples/caching"] = c
	return out
}

// TestPlanningBackendMatchesCPU is the proof of the seam: the same trainer
// runs full steps (forward, loss, backward, recompute, the grad scaler,
// accumulation, Adam) and a validation on the CPU and on the planning
// backend, whose pool has no memory behind any buffer. Any code outside the
// CPU backend that read or wrote a buffer would fail on the planning side
// (there is nothing to read; the CPU backend panics on a virtual buffer,
// see TestPlanningBackendCatchesHostAccess), and the pool statistics after
// every step and after validation must be the CPU run's, to the byte.
func TestPlanningBackendMatchesCPU(t *testing.T) {
	for name, cfg := range seamConfigs() {
		t.Run(name, func(t *testing.T) {
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			stats := func(b backend.Backend) []memory.Stats {
				tr, err := buildTrainer(cfg, b, dist.Single{})
				if err != nil {
					t.Fatal(err)
				}
				defer tr.Close()
				if got := tr.Pool().Virtual(); got != strings.HasPrefix(b.Name(), "noop") {
					t.Fatalf("%s: virtual pool %v", b.Name(), got)
				}
				out := []memory.Stats{tr.Pool().Stats()}
				for range 3 {
					res, err := tr.Step()
					if err != nil {
						t.Fatal(err)
					}
					if res.Skipped {
						t.Fatalf("%s: a step was skipped", b.Name())
					}
					out = append(out, tr.Pool().Stats())
				}
				tr.Pool().ResetPeak()
				if _, err := tr.Validate(); err != nil {
					t.Fatal(err)
				}
				return append(out, tr.Pool().Stats())
			}
			real, planned := stats(cpu.New()), stats(noop.New(cpu.New()))
			for i := range real {
				if real[i] != planned[i] {
					t.Errorf("after %s: planned\n%+v\nCPU\n%+v", []string{"building", "step 1", "step 2", "step 3", "validation"}[i], planned[i], real[i])
				}
			}
		})
	}
}

// hostToucher is the planning backend with one operation done by the CPU
// backend instead: what a layer, the optimizer or the scaler reading host
// memory behind the backend's back amounts to.
type hostToucher struct {
	noop.Noop
	op string
}

func (h hostToucher) ReLU(out, in backend.View) {
	if h.op == "relu" {
		cpu.New().ReLU(out, in)
	}
}

func (h hostToucher) Adam(a backend.AdamStep, w, g, m, v backend.View) {
	if h.op == "adam" {
		cpu.New().Adam(a, w, g, m, v)
	}
}

func (h hostToucher) UnscaleCheck(gs []backend.View, inv float32) bool {
	if h.op == "unscale" {
		return cpu.New().UnscaleCheck(gs, inv)
	}
	return true
}

// TestPlanningBackendCatchesHostAccess: the seam test fails when a layer's,
// Adam's or the grad scaler's arithmetic touches a buffer's memory outside
// the planning backend: the CPU code finds no host memory behind a virtual
// buffer and panics, naming it.
func TestPlanningBackendCatchesHostAccess(t *testing.T) {
	cfg := seamConfigs()["fp16"]
	for _, op := range []string{"relu", "adam", "unscale"} {
		t.Run(op, func(t *testing.T) {
			tr, err := buildTrainer(cfg, hostToucher{noop.New(cpu.New()), op}, dist.Single{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "has no host memory") {
					t.Errorf("a %s on host memory in a planned step: recovered %v, want a panic saying the buffer has no host memory", op, r)
				}
			}()
			tr.Step()
		})
	}
}
