package train

import (
	"testing"

	"github.com/memunet/memunet/config"
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
