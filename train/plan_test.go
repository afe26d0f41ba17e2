package train

import (
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
)

// planGridConfig is a tiny network for the plan-vs-measured grid.
func planGridConfig(size, batch int, up, norm string) config.Config {
	c := config.Default()
	c.Model.Base, c.Model.Depth, c.Model.Classes, c.Model.Up, c.Model.Norm, c.Model.Groups = 4, 2, 3, up, norm, 2
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
		row.Config, row.Samples = config.Config{}, 0
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
