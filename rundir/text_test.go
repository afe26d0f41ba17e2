package rundir

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/runfiles"
)

// ranks is a data-parallel world of n processes as the banner sees it.
type ranks struct {
	dist.Single
	n int
}

func (r ranks) Size() int    { return r.n }
func (r ranks) Name() string { return "MPI (test)" }

// TestBanner: the start line names the version, data, size, variant,
// device and folder, and the ranks of a data-parallel run with its
// effective batch.
func TestBanner(t *testing.T) {
	cfg := config.Default()
	cfg.Data.Size = 32
	one := Banner("1.2", cfg, "cpu", dist.Single{}, "runs/x")
	if want := "memunet 1.2: training on synthetic data 32x32, " + cfg.Variant().String() + ", on cpu; writing to runs/x"; one != want {
		t.Errorf("banner %q, want %q", one, want)
	}
	four := Banner("1.2", cfg, "cpu", ranks{n: 4}, "runs/x")
	if want := ", on cpu, x 4 ranks (MPI (test), effective batch 32); "; !strings.Contains(four, want) {
		t.Errorf("banner %q lacks %q", four, want)
	}
}

// TestSummaryPrint: the end of a run says which part of a resumed run its
// times cover, the allocator's counts for each kind of pool, the device's
// view where there is one, and lists curves.png only where it was written.
func TestSummaryPrint(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		sum    Summary
		curves bool
		want   []string // lines (or their starts) the text holds
		absent []string
	}{
		{"fresh, caching", Summary{Steps: 4, WallSeconds: 1.5, StepMSMedian: 12.25, Allocator: "caching", SegmentAllocs: 3, LastCheckpoint: "ck"}, false,
			[]string{"done: 4 steps in 1.5s (median 12.2 ms/step)  final loss", "allocator: caching; 3 allocator calls, 0 cache flushes",
				"files: " + filepath.Join(dir, "config.yaml") + ", " + filepath.Join(dir, "metrics.jsonl") + ", " + filepath.Join(dir, runfiles.Summary) + ", ck"},
			[]string{"device:", runfiles.Curves}},
		{"resumed, arena, gpu", Summary{Steps: 8, PartSteps: 4, PartFromStep: 4, PartWallSeconds: 1, WallSeconds: 3, ResumedFrom: "x",
			ArenaBytes: 2 << 20, SegmentAllocs: 1, Device: "cuda:0", DeviceUsedPeakBytes: 3 << 20, DeviceTotalBytes: 8 << 20}, true,
			[]string{"done: 8 steps, 4 of them in this part (from step 4) in 1.0s, 3.0s in all parts",
				"allocator: arena of 2.00 MiB, every buffer at its planned place; 1 allocator call(s), 0 allocation(s) outside the plan",
				"device: cuda:0: peak in use 3.00 MiB of 8.00 MiB", runfiles.Curves}, nil},
		{"pages", Summary{Allocator: "caching", PageBytes: 2 << 20, PagesMapped: 5, PagesUnmapped: 1}, false,
			[]string{"allocator: caching over 2.00 MiB pages; 5 pages mapped, 1 moved or given back, 0 cache flushes"}, nil},
	} {
		os.Remove(filepath.Join(dir, runfiles.Curves))
		if c.curves {
			os.WriteFile(filepath.Join(dir, runfiles.Curves), nil, 0o644)
		}
		var b bytes.Buffer
		c.sum.Print(&b, dir)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: the text lacks %q:\n%s", c.name, w, b.String())
			}
		}
		for _, w := range c.absent {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s: the text has %q:\n%s", c.name, w, b.String())
			}
		}
	}
}
