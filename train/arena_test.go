package train

import (
	"errors"
	"math"
	"runtime/metrics"
	"slices"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	scores "github.com/memunet/memunet/metrics"
)

// TestArenaTrainsLikeTheCache: every variant trains to bit-identical
// losses, validation scores and weights with memory.allocator: arena (and
// freed buffers poisoned with NaN, so a buffer used after its planned life
// would show) as with the caching pool; every buffer has its planned place
// (no misses); after building, the steps make no allocator call at all and
// the arena is the whole reservation, within 5% of the allocated peak.
func TestArenaTrainsLikeTheCache(t *testing.T) {
	for _, name := range append(VariantNames(), "offload") {
		t.Run(name, func(t *testing.T) {
			base := tinyConfig()
			base.Train.Steps = 4
			base, err := DeriveVariant(base, name)
			if err != nil {
				t.Fatal(err)
			}
			base.Memory.Allocator = "caching" // the arena is the default
			arena := base
			arena.Memory.Allocator, arena.Memory.Poison = "arena", true
			run := func(c config.Config) ([]float64, scores.Validation, map[string][]float32, *Trainer) {
				tr := testTrainer(t, c)
				var losses []float64
				var v scores.Validation
				for i := range 4 {
					res, err := tr.Step()
					if err != nil {
						t.Fatal(err)
					}
					losses = append(losses, res.Loss)
					if i == 1 || i == 3 {
						if v, err = tr.Validate(); err != nil {
							t.Fatal(err)
						}
					}
				}
				return losses, v, paramsCopy(tr.Net), tr
			}
			wantLoss, wantVal, wantW, _ := run(base)
			gotLoss, gotVal, gotW, tr := run(arena)
			for i := range wantLoss {
				if math.Float64bits(gotLoss[i]) != math.Float64bits(wantLoss[i]) {
					t.Errorf("step %d: loss %v with the arena, %v with the cache", i+1, gotLoss[i], wantLoss[i])
				}
			}
			if gotVal.ValLoss != wantVal.ValLoss || gotVal.ValMIoU != wantVal.ValMIoU {
				t.Errorf("validation %+v with the arena, %+v with the cache", gotVal, wantVal)
			}
			for n, w := range wantW {
				if !equalBits(gotW[n], w) {
					t.Errorf("%s differs after 4 steps", n)
				}
			}
			st := tr.Pool().Stats()
			if st.ArenaMisses != 0 || st.SegmentAllocs != 1 || st.Reserved.Peak != st.ArenaBytes {
				t.Errorf("arena run: %d misses (%s), %d allocator calls, reserved peak %d, arena %d",
					st.ArenaMisses, tr.Pool().ArenaMiss(), st.SegmentAllocs, st.Reserved.Peak, st.ArenaBytes)
			}
			row, err := PlanConfig(arena)
			if err != nil {
				t.Fatal(err)
			}
			if row.ArenaBytes != st.ArenaBytes || row.PeakReservedBytes != st.ArenaBytes {
				t.Errorf("plan: arena %d, reserved %d; the run's arena %d", row.ArenaBytes, row.PeakReservedBytes, st.ArenaBytes)
			}
			t.Logf("arena %d bytes for an allocated peak of %d (%.3fx)", st.ArenaBytes, row.PeakAllocatedBytes, float64(st.ArenaBytes)/float64(row.PeakAllocatedBytes))
		})
	}
}

// TestArenaStepAllocatesNoTensorMemory: in the steady state an arena
// step calls the allocator not once (the backend's allocator is where
// tensor memory comes from), and the Go heap it takes is bookkeeping only
// (buffer handles, views, closures, the GEMM's per-call offsets): no
// object as large as the step's largest activation, 64 KiB here.
func TestArenaStepAllocatesNoTensorMemory(t *testing.T) {
	c := tinyConfig()
	c.Data.Size, c.Memory.Allocator = 32, "arena" // the input's first activation: 4x4x32x32 fp32 = 64 KiB
	tr := testTrainer(t, c)
	if _, err := tr.Step(); err != nil {
		t.Fatal(err)
	}
	before := tr.Pool().Stats()
	sample := []metrics.Sample{{Name: "/gc/heap/allocs-by-size:bytes"}}
	metrics.Read(sample)
	h0 := sample[0].Value.Float64Histogram()
	counts0 := slices.Clone(h0.Counts)
	const steps = 3
	for range steps {
		if _, err := tr.Step(); err != nil {
			t.Fatal(err)
		}
	}
	metrics.Read(sample)
	h1 := sample[0].Value.Float64Histogram()
	after := tr.Pool().Stats()
	if after.SegmentAllocs != before.SegmentAllocs || after.ArenaMisses != 0 {
		t.Errorf("steady-state steps called the allocator %d times (%d misses)", after.SegmentAllocs-before.SegmentAllocs, after.ArenaMisses)
	}
	var objects, large uint64
	largest := 0.0
	for i, n := range h1.Counts {
		d := n - counts0[i]
		objects += d
		if d > 0 {
			largest = max(largest, h1.Buckets[i])
			if h1.Buckets[i] >= 64<<10 {
				large += d
			}
		}
	}
	t.Logf("%d steps: %d Go heap objects, the largest in the bucket from %.0f bytes; %d pool allocations", steps, objects, largest, after.NumAllocs-before.NumAllocs)
	if large > 0 {
		t.Errorf("%d Go heap objects of 64 KiB or more in steady-state steps: tensor memory outside the arena", large)
	}
}

// TestSegmentsRetryAtArenaCapacity: at memory.capacity equal to the arena,
// the caching pool over memory that does not page (segments, as the pool
// was before pages) has to give its cache back to go on, or runs out, in
// every variant where its planned reserve is above the arena; the arena at
// that capacity trains with no flush (rundir's TestArenaCapacity).
func TestSegmentsRetryAtArenaCapacity(t *testing.T) {
	flushed := 0
	for _, name := range VariantNames() {
		c := tinyConfig()
		c.Data.Size, c.Train.BatchSize = 32, 8
		c, err := DeriveVariant(c, name)
		if err != nil {
			t.Fatal(err)
		}
		arena, err := PlanConfig(c) // the default allocator: the arena
		if err != nil {
			t.Fatal(err)
		}
		c.Memory.Allocator = "caching"
		segments, err := PlanConfigOn(c, unpagedCPU{cpu.New()})
		if err != nil {
			t.Fatal(err)
		}
		c.Memory.Capacity = config.ByteSize(arena.ArenaBytes)
		tr, err := NewTrainer(c, Placement{Backend: unpagedCPU{cpu.New()}})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4 && err == nil; i++ {
			if _, err = tr.Step(); err == nil && i%2 == 1 {
				_, err = tr.Validate()
			}
		}
		st := tr.Pool().Stats()
		tr.Close()
		var oom *memory.OutOfMemoryError
		if err != nil && !errors.As(err, &oom) {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: arena %d, segments plan %d: %d cache flushes, out of memory: %v", name, arena.ArenaBytes,
			segments.PeakReservedBytes, st.CacheFlushes, oom != nil)
		if segments.PeakReservedBytes > arena.ArenaBytes {
			if st.CacheFlushes == 0 && oom == nil {
				t.Errorf("%s: segments need %d bytes at the arena's %d, yet trained without a flush", name, segments.PeakReservedBytes, arena.ArenaBytes)
			}
			flushed++
		}
	}
	if flushed == 0 {
		t.Error("no variant's segments reserved more than its arena: the test shows nothing")
	}
}
