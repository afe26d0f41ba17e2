package train

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// planGridConfig is a tiny network for the plan-vs-measured grid.
func planGridConfig(size, batch int, up, norm string) config.Config {
	c := config.Default()
	c.Model.Base, c.Model.Depth, c.Model.Classes, c.Model.Up, c.Model.Norm, c.Model.Groups = 4, 2, 3, model.UpMode(up), model.NormKind(norm), 2
	c.Data.Size, c.Data.Count, c.Data.ValFraction = size, 3*batch, 0.25
	c.Train.BatchSize, c.Train.Steps, c.Train.ValEvery = batch, 4, 2 // as plan's dry run
	c.Output.Progress = "none"
	return c
}

// TestPlanRecommendsFastestFit: with a capacity between all's peak and
// baseline's, baseline does not fit, and the recommendation is the fitting
// variant with the lowest estimated time.
func TestPlanRecommendsFastestFit(t *testing.T) {
	base := planGridConfig(32, 8, "bilinear", "batch")
	rows, _, err := Plan(base, VariantNames(), 0)
	if err != nil {
		t.Fatal(err)
	}
	peak := map[string]int64{}
	for _, r := range rows {
		peak[r.Name] = r.PeakReservedBytes
	}
	capacity := peak["baseline"] - 1
	rows, rec, err := Plan(base, VariantNames(), capacity)
	if err != nil {
		t.Fatal(err)
	}
	var bestTime float64
	for _, r := range rows {
		if r.Fits == nil {
			t.Fatalf("%s: no fits verdict with a capacity", r.Name)
		}
		if *r.Fits != (r.PeakReservedBytes <= capacity) {
			t.Errorf("%s: fits=%v with peak reserved %d and capacity %d", r.Name, *r.Fits, r.PeakReservedBytes, capacity)
		}
		if r.Name == rec {
			bestTime = r.RelativeTime
		}
	}
	if rec == "" || rec == "baseline" {
		t.Fatalf("recommended %q under a capacity baseline cannot meet", rec)
	}
	for _, r := range rows {
		if *r.Fits && r.RelativeTime < bestTime {
			t.Errorf("%s fits and is estimated faster (%.3f) than the recommended %s (%.3f)", r.Name, r.RelativeTime, rec, bestTime)
		}
	}
}

// quickstartPlanConfig is configs/quickstart.yaml at batch 2 with count
// samples, the case whose plan once took a time growing with count².
func quickstartPlanConfig(tb testing.TB, count int) config.Config {
	cfg, err := config.Load("../configs/quickstart.yaml", []string{"train.batch_size=2", fmt.Sprintf("data.count=%d", count)})
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// TestPlanCostIndependentOfSamples: nothing in a step's memory depends on
// the number of samples, and neither does the work of planning: the arena
// plan holds as many slots, and the plan's figures are the same, for 80
// samples as for 80,000 (validation's batches are one phase each, and the
// planning backend counts the repeats of a full batch instead of running
// them).
func TestPlanCostIndependentOfSamples(t *testing.T) {
	slots := func(p memory.ArenaPlan) map[string]int {
		out := map[string]int{"build": len(p.Build)}
		for name, s := range p.Phases {
			out[name] = len(s)
		}
		return out
	}
	var plans []memory.ArenaPlan
	var rows []PlanRow
	for _, count := range []int{80, 8000} {
		cfg := quickstartPlanConfig(t, count)
		p, err := ArenaPlan(cfg, cpu.New())
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
		row, err := PlanConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		row.Config = config.Config{}
		rows = append(rows, row)
	}
	if a, b := slots(plans[0]), slots(plans[1]); !maps.Equal(a, b) {
		t.Errorf("arena slots per phase: %v for 80 samples, %v for 8000", a, b)
	}
	if !reflect.DeepEqual(rows[0], rows[1]) {
		t.Errorf("plan for 80 samples\n%+v\nfor 8000\n%+v", rows[0], rows[1])
	}
}

// BenchmarkPlanSamples is memunet plan's work (every variant) on the
// quickstart at batch 2 for 1k, 10k and 100k samples.
func BenchmarkPlanSamples(b *testing.B) {
	for _, count := range []int{1000, 10000, 100000} {
		cfg := quickstartPlanConfig(b, count)
		b.Run(fmt.Sprintf("samples=%d", count), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := Plan(cfg, append([]string{"config"}, VariantNames()...), 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestConvAutoPlan: model.conv_algo: auto takes Winograd's workspace for
// the wide layers only: every variant's planned peak, with the arena and
// the caching pool, lies between the direct way's and winograd's, and
// somewhere a phase holds more than direct (so auto took it).
func TestConvAutoPlan(t *testing.T) {
	took := false
	for _, alloc := range []string{"arena", "caching"} {
		cfg := planGridConfig(32, 4, "bilinear", "batch")
		cfg.Model.Base, cfg.Memory.Allocator = 16, alloc
		plan := func(algo string) []PlanRow {
			c := cfg
			c.Model.ConvAlgo = algo
			rows, _, err := Plan(c, VariantNames(), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.Error != "" {
					t.Fatalf("%s, %s: %s", algo, r.Name, r.Error)
				}
			}
			return rows
		}
		direct, auto, wino := plan("direct"), plan("auto"), plan("winograd")
		for i, d := range direct {
			a, w := auto[i], wino[i]
			if a.PeakAllocatedBytes < d.PeakAllocatedBytes || a.PeakAllocatedBytes > w.PeakAllocatedBytes {
				t.Errorf("%s, %s: auto's peak %d, direct's %d, winograd's %d", alloc, d.Name, a.PeakAllocatedBytes, d.PeakAllocatedBytes, w.PeakAllocatedBytes)
			}
			for phase, n := range a.PeakByPhase {
				took = took || n > d.PeakByPhase[phase]
			}
		}
	}
	if !took {
		t.Error("auto took Winograd's workspace in no phase of any variant")
	}
}

// TestConvAutoSameBits: auto's choice is the shape's, so at widths where
// it takes Winograd the memory-saving variants still train bit for bit
// alike (checkpointing recomputes the same way, offloading keeps the
// same values), and the cores change nothing: the losses and every
// parameter after two steps.
func TestConvAutoSameBits(t *testing.T) {
	cfg := planGridConfig(32, 4, "bilinear", "batch")
	cfg.Model.Base, cfg.Model.Depth, cfg.Data.Count, cfg.Model.ConvAlgo = 16, 3, 16, "auto"
	run := func(variant string, procs int) ([]float64, map[string][]float32) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		c, err := DeriveVariant(cfg, variant)
		if err != nil {
			t.Fatal(err)
		}
		tr := testTrainer(t, c)
		var losses []float64
		for range 2 {
			res, err := tr.Step()
			if err != nil {
				t.Fatalf("%s on %d cores: %v", variant, procs, err)
			}
			losses = append(losses, res.Loss)
		}
		return losses, paramsCopy(tr.Net)
	}
	wantLoss, wantParams := run("baseline", 2)
	cfg.Model.ConvAlgo = "direct"
	if direct, _ := run("baseline", 2); slices.Equal(direct, wantLoss) {
		t.Fatalf("auto's losses %v are direct's bits: no layer took Winograd", wantLoss)
	}
	cfg.Model.ConvAlgo = "auto"
	for _, c := range []struct {
		variant string
		procs   int
	}{{"checkpoint", 2}, {"offload", 2}, {"baseline", 1}, {"baseline", 3}, {"checkpoint", 5}} {
		loss, params := run(c.variant, c.procs)
		if !slices.Equal(loss, wantLoss) {
			t.Errorf("%s on %d cores: losses %v, baseline's on 2 %v", c.variant, c.procs, loss, wantLoss)
		}
		for name, v := range params {
			if !slices.Equal(v, wantParams[name]) {
				t.Errorf("%s on %d cores: %s differs from baseline's on 2", c.variant, c.procs, name)
				break
			}
		}
	}
}

// TestConvAutoTrains: a run with model.conv_algo: auto trains, its wide
// convolutions Winograd, to the direct run's losses within rounding
// (fp16's after an Adam step, where a last bit flips a rounding of the
// 16-bit activations), not to its bits.
func TestConvAutoTrains(t *testing.T) {
	for _, variant := range []string{"baseline", "fp16", "accum4"} {
		cfg := planGridConfig(32, 4, "bilinear", "batch")
		cfg.Model.Base, cfg.Model.Depth, cfg.Data.Count = 16, 4, 16
		var losses [2][]float64
		for i, algo := range []string{"direct", "auto"} {
			c := cfg
			c.Model.ConvAlgo = algo
			c, err := DeriveVariant(c, variant)
			if err != nil {
				t.Fatal(err)
			}
			tr := testTrainer(t, c)
			for range 2 {
				res, err := tr.Step()
				if err != nil {
					t.Fatalf("%s, %s: %v", variant, algo, err)
				}
				losses[i] = append(losses[i], res.Loss)
			}
		}
		direct, auto := losses[0], losses[1]
		tol := 1e-4
		if variant == "fp16" {
			tol = 2e-3
		}
		for i := range direct {
			if math.Abs(auto[i]-direct[i]) > tol*(1+math.Abs(direct[i])) {
				t.Errorf("%s: step %d: auto's loss %.9g, direct's %.9g", variant, i, auto[i], direct[i])
			}
		}
		if slices.Equal(auto, direct) {
			t.Errorf("%s: auto's losses %v are direct's bits: did it run Winograd?", variant, auto)
		}
	}
}

// nnUNet3dFullres is nnU-Net's 3d_fullres default shape as memunet plans
// it: 128^3 patches, batch 2, widths 32..320, 5 poolings, instance norm
// (group norm with a group per channel), transposed up-sampling, fp16.
func nnUNet3dFullres() config.Config {
	c := config.Default()
	c.Model.Dims, c.Model.Base, c.Model.MaxChannels, c.Model.Depth = 3, 32, 320, 5
	c.Model.Up, c.Model.Norm, c.Model.Groups, c.Model.Classes = model.UpTranspose, model.NormGroup, 320, 3
	c.Data.Size, c.Data.Count = 128, 8
	c.Train.BatchSize, c.Train.Precision = 2, backend.Float16
	return c
}

// TestFastestFitUnder4GiB: for nnU-Net's 3d_fullres shape no named variant
// fits 4 GiB (a 6 GB card less its context; accum4 and all need an
// effective batch of 4), and plan recommends the fastest setting that
// does: its row fits, and no setting of the search (precision, micro-batch,
// recompute) that fits has a lower estimated time.
func TestFastestFitUnder4GiB(t *testing.T) {
	const capacity = 4 << 30
	cfg := nnUNet3dFullres()
	rows, rec, err := Plan(cfg, VariantNames(), capacity)
	if err != nil {
		t.Fatal(err)
	}
	if rec != FastestFitName {
		t.Fatalf("recommended %q, want %q", rec, FastestFitName)
	}
	fit := rows[len(rows)-1]
	if fit.Name != FastestFitName || fit.PeakReservedBytes > capacity || fit.Variant.EffectiveBatch() != 2 {
		t.Fatalf("last row %s: %d bytes reserved, effective batch %d", fit.Name, fit.PeakReservedBytes, fit.Variant.EffectiveBatch())
	}
	for _, r := range rows[:len(rows)-1] {
		if r.Error == "" && r.PeakReservedBytes <= capacity {
			t.Errorf("variant %s fits (%d bytes): the search was not needed", r.Name, r.PeakReservedBytes)
		}
	}
	for _, micro := range []int{2, 1} {
		for _, ck := range []config.Checkpoint{{}, {All: true}} {
			c := cfg
			c.Train.BatchSize, c.Train.Accumulate, c.Model.Checkpoint = micro, 2/micro, ck
			row, err := PlanConfig(c)
			if err != nil {
				t.Fatal(err)
			}
			if row.PeakReservedBytes <= capacity && row.RelativeTime < fit.RelativeTime {
				t.Errorf("micro-batch %d, checkpoint %s fits (%d bytes) at %.3fx, faster than the recommended %.3fx",
					micro, ck, row.PeakReservedBytes, row.RelativeTime, fit.RelativeTime)
			}
		}
	}
	t.Logf("fastest under 4 GiB: %s, %d bytes reserved, %.2fx", fit.Variant, fit.PeakReservedBytes, fit.RelativeTime)
}
