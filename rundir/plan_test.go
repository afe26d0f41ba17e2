package rundir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/train"
)

// Plan and memory.fit against what whole runs measure.

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
					rows, _, err := train.Plan(base, train.VariantNames(), 0)
					if err != nil {
						t.Fatal(err)
					}
					for _, row := range rows {
						checkPlanMatchesRun(t, fmt.Sprintf("%dpx/b%d/%s/%s/%s", size, batch, up, norm, row.Name), row)
					}
				}
			}
		}
	}
}

// TestCapacityFailsExactlyWhenPlanned: under a capacity one byte below a
// variant's planned peak reserved bytes (what the device gives up: the
// arena, or the caching pool's segments), Run refuses before it starts (a
// *train.FitError naming plan's recommendation; nothing is written), and a
// trainer that tries anyway runs out of memory; at the planned peak the run
// succeeds.
func TestCapacityFailsExactlyWhenPlanned(t *testing.T) {
	base := planGridConfig(32, 8, "bilinear", "batch")
	for _, name := range []string{"baseline", "all", "baseline/caching", "all/caching"} {
		variant, allocator, _ := strings.Cut(name, "/")
		vc, err := train.DeriveVariant(base, variant)
		if allocator != "" {
			vc.Memory.Allocator = allocator
		}
		if err != nil {
			t.Fatal(err)
		}
		row, err := train.PlanConfig(vc)
		if err != nil {
			t.Fatal(err)
		}
		vc.Memory.Capacity = config.ByteSize(row.PeakReservedBytes - 1)
		dir := filepath.Join(t.TempDir(), "run")
		_, err = Run(context.Background(), vc, Options{OutDir: dir})
		var fe *train.FitError
		if !errors.As(err, &fe) || !fe.Capacity || fe.Need != row.PeakReservedBytes {
			t.Fatalf("%s at capacity peak-1: want a *train.FitError for the planned peak, got %v", name, err)
		}
		if variant == "baseline" && !strings.Contains(err.Error(), "plan recommends the") {
			t.Errorf("%s: the error does not name plan's recommendation: %v", name, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: a refused run made its directory (%v)", name, err)
		}
		// A trainer that tries anyway runs out: the arena while building,
		// the caching pool in the plan's steps.
		tr, err := train.NewTrainer(vc, train.Placement{})
		if err == nil {
			for i := 0; i < 4 && err == nil; i++ {
				if _, err = tr.Step(); err == nil && i%2 == 1 {
					_, err = tr.Validate()
				}
			}
			tr.Close()
		}
		var oom *memory.OutOfMemoryError
		if !errors.As(err, &oom) {
			t.Fatalf("%s at capacity peak-1: want an out-of-memory error, got %v", name, err)
		}
		vc.Memory.Capacity = config.ByteSize(row.PeakReservedBytes)
		if _, err := Run(context.Background(), vc, Options{OutDir: t.TempDir()}); err != nil {
			t.Errorf("%s at capacity = planned peak: %v", name, err)
		}
	}
}

// TestFitAutoPicksFittingVariant: under a capacity the configured baseline
// cannot meet, memory.fit: auto trains a variant whose planned peak fits,
// with the same effective batch, and the run stays under the capacity.
func TestFitAutoPicksFittingVariant(t *testing.T) {
	base := planGridConfig(32, 8, "bilinear", "batch")
	full, err := train.PlanConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, frac := range []float64{0.9, 0.6, 0.35} {
		c := base
		c.Memory.Capacity = config.ByteSize(float64(full.PeakReservedBytes) * frac)
		c.Memory.Fit = "auto"
		sum, err := Run(context.Background(), c, Options{OutDir: t.TempDir()})
		if err != nil {
			t.Fatalf("capacity %.0f%% of baseline: %v", 100*frac, err)
		}
		if sum.MicroBatch*sum.Accumulate != 8 {
			t.Errorf("capacity %.0f%%: effective batch %d x %d, want 8", 100*frac, sum.MicroBatch, sum.Accumulate)
		}
		if sum.PeakReservedBytes > int64(c.Memory.Capacity) {
			t.Errorf("capacity %.0f%%: peak reserved %d over capacity %d", 100*frac, sum.PeakReservedBytes, c.Memory.Capacity)
		}
		if len(sum.Fit) != 1 || !strings.Contains(sum.Fit[0], "fits memory.capacity") || !strings.Contains(sum.Fit[0], "did not fit: as configured") ||
			!strings.Contains(sum.Fit[0], "model.checkpoint: all") {
			t.Errorf("capacity %.0f%%: fit log %q", 100*frac, sum.Fit)
		}
		t.Logf("capacity %.0f%%: %s", 100*frac, sum.Fit[0])
	}
	// Far too small: a clear error naming what was tried.
	c := base
	c.Memory.Capacity, c.Memory.Fit = 4096, "auto"
	_, err = Run(context.Background(), c, Options{OutDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "nothing fits") || !strings.Contains(err.Error(), "as configured") {
		t.Errorf("capacity 4 KiB: %v", err)
	}
}

// planGridConfig is a tiny network for the plan-vs-measured grid (train's
// tests have the same one).
func planGridConfig(size, batch int, up, norm string) config.Config {
	c := config.Default()
	c.Model.Base, c.Model.Depth, c.Model.Classes, c.Model.Up, c.Model.Norm, c.Model.Groups = 4, 2, 3, model.UpMode(up), model.NormKind(norm), 2
	c.Data.Size, c.Data.Count, c.Data.ValFraction = size, 3*batch, 0.25
	c.Train.BatchSize, c.Train.Steps, c.Train.ValEvery = batch, 4, 2 // as plan's dry run
	c.Output.Progress = "none"
	return c
}

// TestPlanMatchesMeasuredPeak3D is TestPlanMatchesMeasuredPeak for 3D
// UNets on synthetic volumes of 16^3 to 48^3: each variant's planned peak
// allocated and reserved bytes, and the split at the peak, are those the
// run measures, byte for byte, with both allocators, both up-samplings and
// every norm, anisotropic pooling and capped widths (every variant at
// 16^3, each again at a larger size).
func TestPlanMatchesMeasuredPeak3D(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 26 small 3D trainings")
	}
	type tweak func(c *config.Config)
	every := append([]string{"config", "offload"}, train.VariantNames()...)
	// Every variant at 16^3 (both allocators); at the larger sizes, each
	// variant in some config, so the suite stays short.
	cases := []struct {
		size, batch int
		up, norm    string
		tweak       tweak
		variants    []string
	}{
		{16, 2, "bilinear", "batch", nil, every},
		{16, 4, "transpose", "group", func(c *config.Config) { c.Memory.Allocator = "caching" }, every},
		{24, 2, "transpose", "batch", func(c *config.Config) { c.Model.Checkpoint = config.Checkpoint{Levels: []int{0}} }, []string{"config", "fp16", "accum4"}},
		{32, 2, "bilinear", "group", func(c *config.Config) { c.Model.PoolKernels = [][3]int{{1, 2, 2}, {2, 2, 2}} }, []string{"checkpoint", "bf16", "offload"}},
		{32, 4, "bilinear", "none", func(c *config.Config) { c.Model.MaxChannels = 6 }, []string{"baseline", "all"}},
		{48, 2, "transpose", "batch", func(c *config.Config) { c.Memory.Allocator = "caching"; c.Memory.EmptyCache = config.EmptyStep }, []string{"config", "all"}},
	}
	for _, tc := range cases {
		base := planGridConfig(tc.size, tc.batch, tc.up, tc.norm)
		base.Model.Dims = 3
		base.Train.Accumulate = 4 / tc.batch // accum4 and all need an effective batch of 4
		if tc.tweak != nil {
			tc.tweak(&base)
		}
		start := time.Now()
		rows, _, err := train.Plan(base, tc.variants, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			checkPlanMatchesRun(t, fmt.Sprintf("%d^3/b%d/%s/%s/%s", tc.size, tc.batch, tc.up, tc.norm, row.Name), row)
		}
		t.Logf("%d^3: %v", tc.size, time.Since(start))
	}
}

// checkPlanMatchesRun trains row's configuration and holds its measured
// peaks (allocated, reserved, and the split at the peak) to the plan's.
func checkPlanMatchesRun(t *testing.T, name string, row train.PlanRow) {
	t.Helper()
	if row.Error != "" {
		t.Errorf("%s: %s", name, row.Error)
		return
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
