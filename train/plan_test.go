package train

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
)

// planGridConfig is a tiny network for the plan-vs-measured grid.
func planGridConfig(size, batch int, up, norm string) config.Config {
	c := config.Default()
	c.Model.Base, c.Model.Depth, c.Model.Classes, c.Model.Up, c.Model.Norm, c.Model.Groups = 4, 2, 3, up, norm, 2
	c.Data.Size, c.Data.Count, c.Data.ValFraction = size, 3*batch, 0.25
	c.Train.BatchSize, c.Train.Steps, c.Train.ValEvery = batch, 2, 0
	c.Output.Progress = "none"
	return c
}

// TestPlanMatchesMeasuredPeak holds plan's prediction to the peak a real run
// measures (train.Run's summary: two optimizer steps and validation) for 3
// image sizes x 2 batch sizes x every variant x both up modes x both norms.
// The prediction is a dry run of the same allocations, so it must be exact.
func TestPlanMatchesMeasuredPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 144 small trainings")
	}
	for _, size := range []int{16, 24, 32} {
		for _, batch := range []int{4, 8} {
			for _, up := range []string{"bilinear", "transpose"} {
				for _, norm := range []string{"batch", "group"} {
					base := planGridConfig(size, batch, up, norm)
					rows, _, err := Plan(base, VariantNames(), 0)
					if err != nil {
						t.Fatal(err)
					}
					for _, row := range rows {
						name := fmt.Sprintf("%dpx/b%d/%s/%s/%s", size, batch, up, norm, row.Name)
						if row.Error != "" {
							t.Errorf("%s: %s", name, row.Error)
							continue
						}
						sum, err := Run(context.Background(), row.Config, Options{OutDir: t.TempDir()})
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if sum.PeakAllocatedBytes != row.PeakAllocatedBytes {
							t.Errorf("%s: planned peak %d, measured %d", name, row.PeakAllocatedBytes, sum.PeakAllocatedBytes)
						}
						for cat, v := range row.PeakByCategory {
							if sum.PeakAllocatedByCategory[cat] != v {
								t.Errorf("%s: planned %s %d at the peak, measured %d", name, cat, v, sum.PeakAllocatedByCategory[cat])
							}
						}
						if sum.PeakReservedBytes != row.PeakReservedBytes {
							t.Errorf("%s: planned reserved peak %d, measured %d", name, row.PeakReservedBytes, sum.PeakReservedBytes)
						}
					}
				}
			}
		}
	}
}

// TestCapacityFailsExactlyWhenPlanned: a capacity one byte below a variant's
// planned peak fails with the out-of-memory error, which names plan's
// recommendation; at the planned peak the run succeeds.
func TestCapacityFailsExactlyWhenPlanned(t *testing.T) {
	base := planGridConfig(32, 8, "bilinear", "batch")
	for _, name := range []string{"baseline", "all"} {
		vc, err := DeriveVariant(base, name)
		if err != nil {
			t.Fatal(err)
		}
		row, err := PlanConfig(vc)
		if err != nil {
			t.Fatal(err)
		}
		vc.Memory.Capacity = config.ByteSize(row.PeakAllocatedBytes - 1)
		_, err = Run(context.Background(), vc, Options{OutDir: t.TempDir()})
		var oom *memory.OutOfMemoryError
		if !errors.As(err, &oom) {
			t.Fatalf("%s at capacity peak-1: want an out-of-memory error, got %v", name, err)
		}
		if name == "baseline" && !strings.Contains(err.Error(), "plan recommends the") {
			t.Errorf("%s: the error does not name plan's recommendation: %v", name, err)
		}
		vc.Memory.Capacity = config.ByteSize(row.PeakAllocatedBytes)
		if _, err := Run(context.Background(), vc, Options{OutDir: t.TempDir()}); err != nil {
			t.Errorf("%s at capacity = planned peak: %v", name, err)
		}
	}
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
		peak[r.Name] = r.PeakAllocatedBytes
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
		if *r.Fits != (r.PeakAllocatedBytes <= capacity) {
			t.Errorf("%s: fits=%v with peak %d and capacity %d", r.Name, *r.Fits, r.PeakAllocatedBytes, capacity)
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
