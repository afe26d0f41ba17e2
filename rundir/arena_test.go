package rundir

import (
	"context"
	"errors"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/train"
)

// TestArenaCapacity: with memory.capacity set to its planned arena, every
// variant trains with memory.allocator: arena, its summary showing the
// arena as the whole reservation, one allocator call, no misses and no
// cache flushes; the caching pool at the same capacity needs more than
// that (plan refuses it: its reserved peak is above the capacity) for
// every variant where the caching pool reserves more than the arena.
func TestArenaCapacity(t *testing.T) {
	base := planGridConfig(32, 8, "bilinear", "batch")
	for _, name := range train.VariantNames() {
		t.Run(name, func(t *testing.T) {
			vc, err := train.DeriveVariant(base, name)
			if err != nil {
				t.Fatal(err)
			}
			vc.Memory.Allocator = "caching" // the arena is the default
			arena := vc
			arena.Memory.Allocator = "arena"
			row, err := train.PlanConfig(arena)
			if err != nil {
				t.Fatal(err)
			}
			caching, err := train.PlanConfig(vc)
			if err != nil {
				t.Fatal(err)
			}
			arena.Memory.Capacity = config.ByteSize(row.ArenaBytes)
			sum, err := Run(context.Background(), arena, Options{OutDir: t.TempDir()})
			if err != nil {
				t.Fatalf("arena at capacity = arena: %v", err)
			}
			if sum.Allocator != "arena" || sum.ArenaBytes != row.ArenaBytes || sum.PeakReservedBytes != row.ArenaBytes ||
				sum.SegmentAllocs != 1 || sum.ArenaMisses != 0 || sum.CacheFlushes != 0 {
				t.Errorf("arena run: allocator %s, arena %d (planned %d), reserved peak %d, %d allocator calls, %d misses, %d flushes",
					sum.Allocator, sum.ArenaBytes, row.ArenaBytes, sum.PeakReservedBytes, sum.SegmentAllocs, sum.ArenaMisses, sum.CacheFlushes)
			}
			t.Logf("%s: allocated peak %d, arena %d (%.3fx), caching reserved %d (%.3fx)", name, row.PeakAllocatedBytes,
				row.ArenaBytes, float64(row.ArenaBytes)/float64(row.PeakAllocatedBytes),
				caching.PeakReservedBytes, float64(caching.PeakReservedBytes)/float64(row.PeakAllocatedBytes))
			if caching.PeakReservedBytes <= row.ArenaBytes {
				return
			}
			vc.Memory.Capacity = arena.Memory.Capacity
			_, err = Run(context.Background(), vc, Options{OutDir: t.TempDir()})
			var fe *train.FitError
			if !errors.As(err, &fe) || fe.Need != caching.PeakReservedBytes {
				t.Errorf("caching at the arena's capacity: want a *train.FitError for %d bytes, got %v", caching.PeakReservedBytes, err)
			}
		})
	}
}
