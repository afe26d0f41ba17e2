package memory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// op is one step of a scripted sequence of pool calls.
type op int

const (
	opF32   op = iota // Alloc(cat, 4n): n float32 values
	opU16             // Alloc(cat, 2n): n 16-bit values
	opBytes           // Alloc(cat, n)
	opFree            // Free(buffers[name])
	opEmpty           // EmptyCache()
	opReset           // ResetPeak()
)

// step is one scripted call and the pool's state right after it.
type step struct {
	op   op
	name string // buffer to create (alloc ops) or free (opFree)
	cat  Category
	n    int

	size int64             // alloc ops: expected Buffer.Size()
	oom  *OutOfMemoryError // alloc ops: the expected error, nil if it must succeed

	// Expected right after the step.
	alloc, res, hits int64
}

func alloc(p *Pool, o op, cat Category, n int) (*Buffer, error) {
	switch o {
	case opF32:
		return p.Alloc(cat, 4*int64(n))
	case opU16:
		return p.Alloc(cat, 2*int64(n))
	case opBytes:
		return p.Alloc(cat, int64(n))
	}
	panic(fmt.Sprintf("not an alloc op: %d", o))
}

// testAllocator hands out byte blocks and keeps count, so that tests see
// what the pool asks of its allocator.
type testAllocator struct {
	mu          sync.Mutex
	live, freed int
	full        bool // Alloc fails with ErrExhausted
}

// testBlock is a testAllocator block.
type testBlock struct{ bytes []byte }

func (a *testAllocator) Name() string { return "test" }

func (a *testAllocator) Alloc(n int64) (Storage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n%BlockRound != 0 {
		panic(fmt.Sprintf("unrounded block of %d bytes", n))
	}
	if a.full {
		return nil, fmt.Errorf("test device: %w", ErrExhausted)
	}
	a.live++
	return &testBlock{make([]byte, n)}, nil
}

func (a *testAllocator) Free(s Storage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.(*testBlock).bytes == nil {
		panic("block freed twice")
	}
	s.(*testBlock).bytes = nil
	a.live--
	a.freed++
}

func (a *testAllocator) Slice(s Storage, off, n int64) Storage {
	return &testBlock{s.(*testBlock).bytes[off : off+n : off+n]}
}

func newTestPool(opts Options) *Pool { return NewPool(&testAllocator{}, opts) }

// bytesOf is b's block as the test allocator made it.
func bytesOf(b *Buffer) []byte { return b.Storage().(*testBlock).bytes }

// checkInvariants asserts what must hold for every snapshot of every pool.
func checkInvariants(t *testing.T, where string, s Stats) {
	t.Helper()
	var sumCur, sumAtPeak int64
	for c := range NumCategories {
		bc := s.ByCategory[c]
		sumCur += bc.Current
		sumAtPeak += s.AtPeak[c]
		if bc.Current < 0 || bc.Current > bc.Peak {
			t.Errorf("%s: ByCategory[%s] = %+v: want 0 <= current <= peak", where, Category(c), bc)
		}
		if s.AtPeak[c] < 0 || s.AtPeak[c] > bc.Peak {
			t.Errorf("%s: AtPeak[%s] = %d, ByCategory peak %d", where, Category(c), s.AtPeak[c], bc.Peak)
		}
	}
	if sumCur != s.Allocated.Current {
		t.Errorf("%s: sum of ByCategory current = %d, Allocated.Current = %d", where, sumCur, s.Allocated.Current)
	}
	if sumAtPeak != s.Allocated.Peak {
		t.Errorf("%s: sum of AtPeak = %d, Allocated.Peak = %d", where, sumAtPeak, s.Allocated.Peak)
	}
	if s.Allocated.Current > s.Reserved.Current || s.Allocated.Peak > s.Reserved.Peak {
		t.Errorf("%s: allocated %+v exceeds reserved %+v", where, s.Allocated, s.Reserved)
	}
	if s.Allocated.Current > s.Allocated.Peak || s.Reserved.Current > s.Reserved.Peak {
		t.Errorf("%s: current above peak: allocated %+v reserved %+v", where, s.Allocated, s.Reserved)
	}
	if s.Capacity > 0 && s.Reserved.Peak > s.Capacity {
		t.Errorf("%s: reserved peak %d exceeds capacity %d", where, s.Reserved.Peak, s.Capacity)
	}
	if s.ActiveBuffers != s.NumAllocs-s.NumFrees {
		t.Errorf("%s: ActiveBuffers = %d, NumAllocs-NumFrees = %d", where, s.ActiveBuffers, s.NumAllocs-s.NumFrees)
	}
	if s.Allocated.Current%BlockRound != 0 || s.Reserved.Current%BlockRound != 0 {
		t.Errorf("%s: allocated %d / reserved %d not multiples of %d", where, s.Allocated.Current, s.Reserved.Current, BlockRound)
	}
}

// runScript plays steps on a fresh pool, checking every step, and returns
// the pool and its live buffers.
func runScript(t *testing.T, opts Options, steps []step) (*Pool, map[string]*Buffer) {
	t.Helper()
	p := newTestPool(opts)
	bufs := map[string]*Buffer{}
	for i, st := range steps {
		where := fmt.Sprintf("step %d (%q)", i+1, st.name)
		switch st.op {
		case opF32, opU16, opBytes:
			b, err := alloc(p, st.op, st.cat, st.n)
			if st.oom != nil {
				var oe *OutOfMemoryError
				if !errors.As(err, &oe) {
					t.Fatalf("%s: err = %v, want *OutOfMemoryError", where, err)
				}
				if *oe != *st.oom {
					t.Errorf("%s: OutOfMemoryError = %+v, want %+v", where, *oe, *st.oom)
				}
				if b != nil {
					t.Errorf("%s: got a buffer along with the error", where)
				}
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if b.Size() != st.size {
				t.Errorf("%s: Size() = %d, want %d", where, b.Size(), st.size)
			}
			if b.Category() != st.cat {
				t.Errorf("%s: Category() = %v, want %v", where, b.Category(), st.cat)
			}
			bufs[st.name] = b
		case opFree:
			if err := p.Free(bufs[st.name]); err != nil {
				t.Fatalf("%s: Free: %v", where, err)
			}
			delete(bufs, st.name)
		case opEmpty:
			p.EmptyCache()
		case opReset:
			p.ResetPeak()
		}
		s := p.Stats()
		if s.Allocated.Current != st.alloc || s.Reserved.Current != st.res || s.CacheHits != st.hits {
			t.Errorf("%s: allocated %d, reserved %d, hits %d; want %d, %d, %d",
				where, s.Allocated.Current, s.Reserved.Current, s.CacheHits, st.alloc, st.res, st.hits)
		}
		checkInvariants(t, where, s)
	}
	return p, bufs
}

func TestScripts(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		steps []step
		want  Stats
	}{
		{
			name: "mixed types sizes and categories",
			steps: []step{
				{op: opF32, name: "a", cat: Params, n: 100, size: 512, alloc: 512, res: 512},               // 400 B
				{op: opU16, name: "b", cat: Grads, n: 300, size: 1024, alloc: 1536, res: 1536},             // 600 B
				{op: opBytes, name: "c", cat: Activations, n: 1, size: 512, alloc: 2048, res: 2048},        // 1 B
				{op: opBytes, name: "d", cat: Workspace, n: 0, size: 512, alloc: 2560, res: 2560},          // 0 B still takes a block
				{op: opFree, name: "c", alloc: 2048, res: 2560},                                            // 512 cached
				{op: opF32, name: "e", cat: Optimizer, n: 128, size: 512, alloc: 2560, res: 2560, hits: 1}, // reuses c's block
				{op: opF32, name: "f", cat: Activations, n: 257, size: 1536, alloc: 4096, res: 4096, hits: 1},
				{op: opFree, name: "b", alloc: 3072, res: 4096, hits: 1},
				{op: opFree, name: "f", alloc: 1536, res: 4096, hits: 1},
				{op: opU16, name: "g", cat: Grads, n: 512, size: 1024, alloc: 2560, res: 4096, hits: 2}, // reuses b's block
			},
			want: Stats{
				Allocated: Stat{2560, 4096},
				Reserved:  Stat{4096, 4096},
				ByCategory: [NumCategories]Stat{
					Params: {512, 512}, Grads: {1024, 1024}, Optimizer: {512, 512},
					Activations: {0, 1536}, Workspace: {512, 512},
				},
				AtPeak:        [NumCategories]int64{Params: 512, Grads: 1024, Optimizer: 512, Activations: 1536, Workspace: 512},
				ActiveBuffers: 4, NumAllocs: 7, NumFrees: 3, CacheHits: 2,
			},
		},
		{
			name: "best fit: a larger free block is split, a block too small given back",
			steps: []step{
				{op: opBytes, name: "a", cat: Workspace, n: 513, size: 1024, alloc: 1024, res: 1024},
				{op: opFree, name: "a", alloc: 0, res: 1024},
				{op: opF32, name: "b", cat: Params, n: 250, size: 1024, alloc: 1024, res: 1024, hits: 1}, // 1000 B -> 1024
				{op: opFree, name: "b", alloc: 0, res: 1024, hits: 1},
				// Nothing free holds 1536: the wholly free 1024 is given back first.
				{op: opBytes, name: "c", cat: Grads, n: 1025, size: 1536, alloc: 1536, res: 1536, hits: 1},
				{op: opFree, name: "c", alloc: 0, res: 1536, hits: 1},
				{op: opU16, name: "d", cat: Optimizer, n: 512, size: 1024, alloc: 1024, res: 1536, hits: 2},    // 1536 split: 1024 + 512 free
				{op: opU16, name: "e", cat: Optimizer, n: 768, size: 1536, alloc: 2560, res: 3072, hits: 2},    // the 512 is too small; d's segment is not free
				{op: opBytes, name: "f", cat: Activations, n: 512, size: 512, alloc: 3072, res: 3072, hits: 3}, // the split-off 512
			},
			want: Stats{
				Allocated: Stat{3072, 3072},
				Reserved:  Stat{3072, 3072},
				ByCategory: [NumCategories]Stat{
					Params: {0, 1024}, Grads: {0, 1536}, Optimizer: {2560, 2560},
					Activations: {512, 512}, Workspace: {0, 1024},
				},
				AtPeak:        [NumCategories]int64{Optimizer: 2560, Activations: 512},
				ActiveBuffers: 3, NumAllocs: 6, NumFrees: 3, CacheHits: 3, CacheFlushes: 1,
			},
		},
		{
			name: "split blocks merge back with their free neighbours",
			steps: []step{
				{op: opBytes, name: "a", cat: Activations, n: 4096, size: 4096, alloc: 4096, res: 4096},
				{op: opFree, name: "a", alloc: 0, res: 4096},
				{op: opBytes, name: "b", cat: Activations, n: 1024, size: 1024, alloc: 1024, res: 4096, hits: 1},
				{op: opBytes, name: "c", cat: Activations, n: 1024, size: 1024, alloc: 2048, res: 4096, hits: 2},
				{op: opBytes, name: "d", cat: Activations, n: 1024, size: 1024, alloc: 3072, res: 4096, hits: 3},
				{op: opFree, name: "b", alloc: 2048, res: 4096, hits: 3},
				{op: opFree, name: "d", alloc: 1024, res: 4096, hits: 3}, // merges with the free tail
				{op: opFree, name: "c", alloc: 0, res: 4096, hits: 3},    // merges both ways: the segment is whole again
				{op: opBytes, name: "e", cat: Grads, n: 4096, size: 4096, alloc: 4096, res: 4096, hits: 4},
			},
			want: Stats{
				Allocated:     Stat{4096, 4096},
				Reserved:      Stat{4096, 4096},
				ByCategory:    [NumCategories]Stat{Grads: {4096, 4096}, Activations: {0, 4096}},
				AtPeak:        [NumCategories]int64{Activations: 4096},
				ActiveBuffers: 1, NumAllocs: 5, NumFrees: 4, CacheHits: 4,
			},
		},
		{
			name: "peak is kept at its first moment on a tie",
			steps: []step{
				{op: opF32, name: "a", cat: Params, n: 256, size: 1024, alloc: 1024, res: 1024},
				{op: opF32, name: "b", cat: Grads, n: 256, size: 1024, alloc: 2048, res: 2048},
				{op: opFree, name: "b", alloc: 1024, res: 2048},
				{op: opF32, name: "c", cat: Activations, n: 256, size: 1024, alloc: 2048, res: 2048, hits: 1}, // equals the peak
			},
			want: Stats{
				Allocated: Stat{2048, 2048},
				Reserved:  Stat{2048, 2048},
				ByCategory: [NumCategories]Stat{
					Params: {1024, 1024}, Grads: {0, 1024}, Activations: {1024, 1024},
				},
				AtPeak:        [NumCategories]int64{Params: 1024, Grads: 1024},
				ActiveBuffers: 2, NumAllocs: 3, NumFrees: 1, CacheHits: 1,
			},
		},
		{
			name: "ResetPeak then EmptyCache",
			steps: []step{
				{op: opF32, name: "a", cat: Params, n: 1024, size: 4096, alloc: 4096, res: 4096},
				{op: opF32, name: "b", cat: Activations, n: 2048, size: 8192, alloc: 12288, res: 12288},
				{op: opFree, name: "b", alloc: 4096, res: 12288},
				{op: opReset, alloc: 4096, res: 12288},
				{op: opF32, name: "c", cat: Grads, n: 256, size: 1024, alloc: 5120, res: 12288, hits: 1}, // split from b's block
				{op: opFree, name: "c", alloc: 4096, res: 12288, hits: 1},                                // merged back
				{op: opEmpty, alloc: 4096, res: 4096, hits: 1},
				{op: opEmpty, alloc: 4096, res: 4096, hits: 1},                                                   // nothing left to drop
				{op: opF32, name: "d", cat: Activations, n: 2048, size: 8192, alloc: 12288, res: 12288, hits: 1}, // cache gone: miss
			},
			want: Stats{
				Allocated: Stat{12288, 12288},
				Reserved:  Stat{12288, 12288},
				ByCategory: [NumCategories]Stat{
					Params: {4096, 4096}, Grads: {0, 1024}, Activations: {8192, 8192},
				},
				AtPeak:        [NumCategories]int64{Params: 4096, Activations: 8192},
				ActiveBuffers: 2, NumAllocs: 4, NumFrees: 2, CacheHits: 1,
			},
		},
		{
			name: "float32 counts round up to blocks",
			steps: []step{
				{op: opF32, name: "a", cat: Workspace, n: 129, size: 1024, alloc: 1024, res: 1024},
				{op: opFree, name: "a", alloc: 0, res: 1024},
				{op: opF32, name: "b", cat: Workspace, n: 200, size: 1024, alloc: 1024, res: 1024, hits: 1},
			},
			want: Stats{
				Allocated:     Stat{1024, 1024},
				Reserved:      Stat{1024, 1024},
				ByCategory:    [NumCategories]Stat{Workspace: {1024, 1024}},
				AtPeak:        [NumCategories]int64{Workspace: 1024},
				ActiveBuffers: 1, NumAllocs: 2, NumFrees: 1, CacheHits: 1,
			},
		},
		{
			name: "capacity: emptying the cache makes room",
			opts: Options{Capacity: 4096},
			steps: []step{
				{op: opF32, name: "a", cat: Params, n: 512, size: 2048, alloc: 2048, res: 2048},
				{op: opF32, name: "b", cat: Grads, n: 256, size: 1024, alloc: 3072, res: 3072},
				{op: opFree, name: "b", alloc: 2048, res: 3072},
				// 3072+2048 > 4096: the 1024 cached bytes are released, then it fits.
				{op: opF32, name: "c", cat: Activations, n: 512, size: 2048, alloc: 4096, res: 4096},
			},
			want: Stats{
				Allocated: Stat{4096, 4096},
				Reserved:  Stat{4096, 4096},
				ByCategory: [NumCategories]Stat{
					Params: {2048, 2048}, Grads: {0, 1024}, Activations: {2048, 2048},
				},
				AtPeak:        [NumCategories]int64{Params: 2048, Activations: 2048},
				ActiveBuffers: 2, NumAllocs: 3, NumFrees: 1,
				CacheFlushes: 1, Capacity: 4096,
			},
		},
		{
			name: "capacity: a free block too small is given back even with room",
			opts: Options{Capacity: 4096},
			steps: []step{
				{op: opF32, name: "a", cat: Params, n: 256, size: 1024, alloc: 1024, res: 1024},
				{op: opFree, name: "a", alloc: 0, res: 1024},
				{op: opF32, name: "b", cat: Grads, n: 512, size: 2048, alloc: 2048, res: 2048},
				{op: opF32, name: "c", cat: Activations, n: 256, size: 1024, alloc: 3072, res: 3072},
			},
			want: Stats{
				Allocated: Stat{3072, 3072},
				Reserved:  Stat{3072, 3072},
				ByCategory: [NumCategories]Stat{
					Params: {0, 1024}, Grads: {2048, 2048}, Activations: {1024, 1024},
				},
				AtPeak:        [NumCategories]int64{Grads: 2048, Activations: 1024},
				ActiveBuffers: 2, NumAllocs: 3, NumFrees: 1, CacheFlushes: 1,
				Capacity: 4096,
			},
		},
		{
			name: "capacity: 32 MiB that does not fit even after emptying the cache",
			opts: Options{Capacity: 48 * mib},
			steps: []step{
				{op: opF32, name: "a", cat: Params, n: int(6 * mib), size: 24 * mib, alloc: 24 * mib, res: 24 * mib},
				{op: opF32, name: "b", cat: Grads, n: int(2 * mib), size: 8 * mib, alloc: 32 * mib, res: 32 * mib},
				{op: opFree, name: "b", alloc: 24 * mib, res: 32 * mib},
				{op: opF32, name: "c", cat: Activations, n: int(8 * mib), alloc: 24 * mib, res: 24 * mib,
					oom: &OutOfMemoryError{
						Requested: 32 * mib, Category: Activations, Capacity: 48 * mib,
						Free: 24 * mib, Allocated: 24 * mib, ReservedUnallocated: 0,
					}},
			},
			want: Stats{
				Allocated:     Stat{24 * mib, 32 * mib},
				Reserved:      Stat{24 * mib, 32 * mib},
				ByCategory:    [NumCategories]Stat{Params: {24 * mib, 24 * mib}, Grads: {0, 8 * mib}},
				AtPeak:        [NumCategories]int64{Params: 24 * mib, Grads: 8 * mib},
				ActiveBuffers: 1, NumAllocs: 2, NumFrees: 1, NumOOMs: 1,
				CacheFlushes: 1, Capacity: 48 * mib,
			},
		},
		{
			name: "capacity: exact fit, one block over, cache hit at capacity",
			opts: Options{Capacity: 1024},
			steps: []step{
				{op: opBytes, name: "a", cat: Params, n: 1024, size: 1024, alloc: 1024, res: 1024},
				{op: opBytes, name: "b", cat: Grads, n: 1, alloc: 1024, res: 1024,
					oom: &OutOfMemoryError{Requested: 512, Category: Grads, Capacity: 1024, Free: 0, Allocated: 1024}},
				{op: opFree, name: "a", alloc: 0, res: 1024},
				{op: opBytes, name: "c", cat: Activations, n: 600, size: 1024, alloc: 1024, res: 1024, hits: 1},
				{op: opFree, name: "c", alloc: 0, res: 1024, hits: 1},
				{op: opBytes, name: "d", cat: Workspace, n: 100, size: 512, alloc: 512, res: 1024, hits: 2}, // split
			},
			want: Stats{
				Allocated: Stat{512, 1024},
				Reserved:  Stat{1024, 1024},
				ByCategory: [NumCategories]Stat{
					Params: {0, 1024}, Activations: {0, 1024}, Workspace: {512, 512},
				},
				AtPeak:        [NumCategories]int64{Params: 1024},
				ActiveBuffers: 1, NumAllocs: 3, NumFrees: 2, CacheHits: 2, NumOOMs: 1,
				Capacity: 1024,
			},
		},
		{
			name: "capacity: larger than the whole pool, twice",
			opts: Options{Capacity: mib},
			steps: []step{
				{op: opF32, name: "a", cat: Params, n: int(mib/4) + 1,
					oom: &OutOfMemoryError{Requested: mib + 512, Category: Params, Capacity: mib, Free: mib}},
				{op: opU16, name: "b", cat: Optimizer, n: int(mib),
					oom: &OutOfMemoryError{Requested: 2 * mib, Category: Optimizer, Capacity: mib, Free: mib}},
			},
			want: Stats{NumOOMs: 2, Capacity: mib},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := runScript(t, tt.opts, tt.steps)
			// Every allocation the free blocks did not serve took a segment.
			tt.want.SegmentAllocs = tt.want.NumAllocs - tt.want.CacheHits
			if got := p.Stats(); got != tt.want {
				t.Errorf("final stats:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCacheReuseSharesBlock(t *testing.T) {
	al := &testAllocator{}
	p := NewPool(al, Options{})
	a, err := p.Alloc(Params, 4*128)
	if err != nil {
		t.Fatal(err)
	}
	block := a.Storage()
	p.MustFree(a)
	before := p.Stats()

	b, err := p.Alloc(Grads, 300) // rounds to the same 512 bytes
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Storage(); got != block {
		t.Errorf("same rounded size: got block %p, want the cached %p", got, block)
	}
	if al.live != 1 {
		t.Errorf("allocator has %d live blocks, want 1", al.live)
	}
	after := p.Stats()
	if after.CacheHits != before.CacheHits+1 || after.Reserved != before.Reserved {
		t.Errorf("hit: CacheHits %d->%d, Reserved %+v->%+v", before.CacheHits, after.CacheHits, before.Reserved, after.Reserved)
	}

	p.MustFree(b)
	c, err := p.Alloc(Grads, 513) // 1024: the 512-byte block is too small, and given back
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Storage(); got == block {
		t.Errorf("different rounded size reused the cached block")
	}
	if len(bytesOf(c)) != 1024 {
		t.Errorf("block of %d bytes, want 1024", len(bytesOf(c)))
	}
	s := p.Stats()
	if s.CacheHits != after.CacheHits || s.Reserved.Current != 1024 || al.live != 1 || al.freed != 1 {
		t.Errorf("miss: CacheHits %d, Reserved %d, allocator %d live %d freed; want %d, 1024, 1, 1", s.CacheHits, s.Reserved.Current, al.live, al.freed, after.CacheHits)
	}
}

func TestOutOfMemoryError(t *testing.T) {
	p := newTestPool(Options{Capacity: 48 * mib})
	a, err := p.Alloc(Params, 24*mib)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Alloc(Grads, 8*mib)
	if err != nil {
		t.Fatal(err)
	}
	p.MustFree(b)
	before := p.Stats()
	_, err = p.Alloc(Activations, 32*mib)
	err = fmt.Errorf("forward: %w", err) // errors.As must see through wrapping

	var oe *OutOfMemoryError
	if !errors.As(err, &oe) {
		t.Fatalf("err = %v, want a wrapped *OutOfMemoryError", err)
	}
	msg := oe.Error()
	const want = "out of memory: tried to allocate 32.00 MiB (activations). " +
		"The pool has a total capacity of 48.00 MiB of which 24.00 MiB is free. " +
		"Of the allocated memory 24.00 MiB is allocated by memunet, and 0 bytes is reserved by memunet but unallocated."
	if msg != want {
		t.Errorf("message:\n got %q\nwant %q", msg, want)
	}
	for _, sub := range []string{
		"tried to allocate 32.00 MiB", "total capacity of", "is free",
		"allocated by memunet", "reserved by memunet but unallocated",
	} {
		if !strings.Contains(msg, sub) {
			t.Errorf("message %q lacks %q", msg, sub)
		}
	}
	oe.Hint = "Set Options.Checkpoint to recompute activations."
	if got := oe.Error(); got != want+" Set Options.Checkpoint to recompute activations." {
		t.Errorf("with hint: %q", got)
	}

	after := p.Stats()
	if after.NumOOMs != before.NumOOMs+1 || after.NumAllocs != before.NumAllocs || after.ActiveBuffers != 1 {
		t.Errorf("after OOM: %+v", after)
	}
	// The pool still works after an OOM.
	c, err := p.Alloc(Activations, 24*mib)
	if err != nil {
		t.Fatalf("24 MiB into 24 MiB free: %v", err)
	}
	p.MustFree(c)
	p.MustFree(a)
	if s := p.Stats(); s.Allocated.Current != 0 || s.NumOOMs != 1 {
		t.Errorf("final: %+v", s)
	}
}

func TestOutOfMemoryErrorConstructed(t *testing.T) {
	tests := []struct {
		e    OutOfMemoryError
		want string
	}{
		{
			OutOfMemoryError{Requested: 2 * gib, Category: Optimizer, Capacity: 6 * gib, Free: 1536 * mib,
				Allocated: 4 * gib, ReservedUnallocated: 512 * mib},
			"out of memory: tried to allocate 2.00 GiB (optimizer). " +
				"The pool has a total capacity of 6.00 GiB of which 1.50 GiB is free. " +
				"Of the allocated memory 4.00 GiB is allocated by memunet, and 512.00 MiB is reserved by memunet but unallocated.",
		},
		{
			OutOfMemoryError{Requested: 512, Category: Workspace, Capacity: 1024, Free: 0, Allocated: 1024, Hint: "hint."},
			"out of memory: tried to allocate 512 bytes (workspace). " +
				"The pool has a total capacity of 1.00 KiB of which 0 bytes is free. " +
				"Of the allocated memory 1.00 KiB is allocated by memunet, and 0 bytes is reserved by memunet but unallocated. hint.",
		},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error():\n got %q\nwant %q", got, tt.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"},
		{1, "1 bytes"},
		{512, "512 bytes"},
		{1023, "1023 bytes"},
		{1024, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{mib, "1.00 MiB"},
		{32 * mib, "32.00 MiB"},
		{mib + 512, "1.00 MiB"},
		{6 * gib, "6.00 GiB"},
		{1 << 40, "1.00 TiB"},
		{1 << 50, "1024.00 TiB"},
		{-1023, "-1023 bytes"},
		{-2048, "-2.00 KiB"},
	}
	for _, tt := range tests {
		if got := FormatBytes(tt.n); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestRoundSize(t *testing.T) {
	tests := []struct{ n, want int64 }{
		{-7, 512}, {0, 512}, {1, 512}, {511, 512}, {512, 512}, {513, 1024},
		{1000, 1024}, {1025, 1536}, {mib, mib}, {mib + 1, mib + 512},
	}
	for _, tt := range tests {
		if got := RoundSize(tt.n); got != tt.want {
			t.Errorf("RoundSize(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestCategories(t *testing.T) {
	want := []string{"params", "grads", "optimizer", "activations", "workspace"}
	cats := Categories()
	if len(cats) != NumCategories || len(want) != NumCategories {
		t.Fatalf("Categories() has %d, NumCategories = %d", len(cats), NumCategories)
	}
	for i, c := range cats {
		if int(c) != i || c.String() != want[i] {
			t.Errorf("Categories()[%d] = %d %q, want %d %q", i, c, c, i, want[i])
		}
	}
	if got := Category(9).String(); got != "category(9)" {
		t.Errorf("Category(9) = %q", got)
	}
}

// mustPanic runs f and returns the panic's message, failing if it did not panic.
func mustPanic(t *testing.T, what string, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Errorf("%s: did not panic", what)
			return
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

func TestPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"negative capacity", func() { newTestPool(Options{Capacity: -1}) }},
		{"nil allocator", func() { NewPool(nil, Options{}) }},
		{"unknown category", func() { newTestPool(Options{}).Alloc(Category(NumCategories), 1) }},
		{"negative byte count", func() { newTestPool(Options{}).Alloc(Params, -1) }},
	}
	for _, tt := range tests {
		msg := mustPanic(t, tt.name, tt.f)
		if !strings.HasPrefix(msg, "memory:") {
			t.Errorf("%s: panic %q does not start with \"memory:\"", tt.name, msg)
		}
	}
}

func TestFreeMisuse(t *testing.T) {
	p := newTestPool(Options{Timeline: true})
	other := newTestPool(Options{})
	a, _ := p.Alloc(Params, 400)
	keep, _ := p.Alloc(Grads, 2000)
	foreign, _ := other.Alloc(Params, 400)
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	// a's block is now cached; reuse it so that a double free would hit a live block.
	reused, _ := p.Alloc(Activations, 512)
	bytesOf(reused)[0] = 42
	p.Timeline()

	tests := []struct {
		name string
		b    *Buffer
		want error // nil: Free must return nil
	}{
		{"nil", nil, nil},
		{"double free", a, ErrDoubleFree},
		{"double free again", a, ErrDoubleFree},
		{"buffer of another pool", foreign, ErrForeignBuffer},
		{"zero Buffer", &Buffer{}, ErrForeignBuffer},
	}
	for _, tt := range tests {
		before := p.Stats()
		otherBefore := other.Stats()
		err := p.Free(tt.b)
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("%s: Free = %v, want nil", tt.name, err)
		case tt.want != nil && !errors.Is(err, tt.want):
			t.Errorf("%s: Free = %v, want an error wrapping %v", tt.name, err, tt.want)
		}
		if got := p.Stats(); got != before {
			t.Errorf("%s: stats changed:\n got %+v\nwant %+v", tt.name, got, before)
		}
		if got := other.Stats(); got != otherBefore {
			t.Errorf("%s: other pool's stats changed", tt.name)
		}
		if ev := p.Timeline(); len(ev) != 0 {
			t.Errorf("%s: recorded %d events", tt.name, len(ev))
		}
	}
	if bytesOf(reused)[0] != 42 {
		t.Errorf("double free disturbed the block's new owner")
	}
	// The foreign buffer is still live in its own pool.
	bytesOf(foreign)[0] = 1
	if err := other.Free(foreign); err != nil {
		t.Errorf("freeing in its own pool: %v", err)
	}
	mustPanic(t, "MustFree of a double free", func() { p.MustFree(a) })
	p.MustFree(reused)
	p.MustFree(keep)
	if s := p.Stats(); s.Allocated.Current != 0 || s.NumFrees != 3 || s.NumAllocs != 3 {
		t.Errorf("final: %+v", s)
	}
}

func TestUseAfterFreePanics(t *testing.T) {
	p := newTestPool(Options{})
	b, _ := p.Alloc(Params, 24)
	p.MustFree(b)
	uses := []struct {
		name string
		f    func()
	}{
		{"Storage", func() { _ = b.Storage() }},
	}
	for _, u := range uses {
		msg := mustPanic(t, u.name, u.f)
		if !strings.HasPrefix(msg, "memory:") {
			t.Errorf("%s after Free: panic %q does not start with \"memory:\"", u.name, msg)
		}
	}
	// Size and Category stay readable.
	if b.Size() != 512 || b.Category() != Params {
		t.Errorf("freed buffer: Size %d Category %v", b.Size(), b.Category())
	}
}

// TestEmptyCacheFreesThroughAllocator: cached blocks go back to the
// allocator on EmptyCache, live ones stay.
func TestEmptyCacheFreesThroughAllocator(t *testing.T) {
	al := &testAllocator{}
	p := NewPool(al, Options{})
	a, _ := p.Alloc(Params, 100)
	b, _ := p.Alloc(Grads, 600)
	c, _ := p.Alloc(Activations, 600)
	p.MustFree(b)
	p.MustFree(c)
	if al.live != 3 || al.freed != 0 {
		t.Fatalf("before EmptyCache: %d live, %d freed; want 3, 0", al.live, al.freed)
	}
	p.EmptyCache()
	if al.live != 1 || al.freed != 2 {
		t.Errorf("after EmptyCache: %d live, %d freed; want 1, 2", al.live, al.freed)
	}
	if len(bytesOf(a)) != 512 {
		t.Errorf("the live buffer lost its block")
	}
}

// TestAllocatorExhausted: an allocator asked for a new segment has the
// pool's wholly free segments back first; if it still fails, the error is the pool's
// *OutOfMemoryError with the allocator's cause.
func TestAllocatorExhausted(t *testing.T) {
	al := &testAllocator{}
	p := NewPool(al, Options{})
	a, _ := p.Alloc(Params, 1000)
	b, _ := p.Alloc(Activations, 5000)
	p.MustFree(b)
	al.full = true
	_, err := p.Alloc(Activations, 6000) // the free 5120 is too small
	var oe *OutOfMemoryError
	if !errors.As(err, &oe) || !errors.Is(err, ErrExhausted) {
		t.Fatalf("err = %v, want an *OutOfMemoryError wrapping ErrExhausted", err)
	}
	if al.freed != 1 {
		t.Errorf("the cached block was not given back before the retry (%d freed)", al.freed)
	}
	want := "out of memory: tried to allocate 6.00 KiB (activations). " +
		"The memory itself is full (test: test device: memory exhausted), after the pool gave back its cached blocks. " +
		"Of the allocated memory 1.00 KiB is allocated by memunet, and 0 bytes is reserved by memunet but unallocated."
	if err.Error() != want {
		t.Errorf("message:\n got %q\nwant %q", err.Error(), want)
	}
	if s := p.Stats(); s.NumOOMs != 1 || s.Reserved.Current != 1024 || s.Allocated.Current != 1024 {
		t.Errorf("stats after the failure: %+v", s)
	}
	al.full = false
	c, err := p.Alloc(Activations, 3000)
	if err != nil {
		t.Fatal(err)
	}
	p.MustFree(c)
	p.MustFree(a)
}

// TestVirtualPool: a pool over Virtual keeps the statistics of the same
// calls on real memory, with no block behind any buffer.
func TestVirtualPool(t *testing.T) {
	real, virt := newTestPool(Options{Capacity: 8 * kib}), NewPool(Virtual{}, Options{Capacity: 8 * kib})
	if real.Virtual() || !virt.Virtual() {
		t.Fatalf("Virtual() = %v, %v", real.Virtual(), virt.Virtual())
	}
	for _, p := range []*Pool{real, virt} {
		a, _ := p.Alloc(Params, 3000)
		b, _ := p.Alloc(Grads, 100)
		p.MustFree(b)
		if _, err := p.Alloc(Activations, 6000); err == nil {
			t.Fatal("no out-of-memory error")
		}
		c, _ := p.Alloc(Activations, 200)
		if p == virt && (a.Storage() != nil || c.Storage() != nil) {
			t.Errorf("a virtual buffer has storage")
		}
	}
	if real.Stats() != virt.Stats() {
		t.Errorf("virtual stats\n%+v\nreal\n%+v", virt.Stats(), real.Stats())
	}
}

func TestTimeline(t *testing.T) {
	p := newTestPool(Options{Timeline: true, Capacity: 4096})
	a, _ := p.Alloc(Params, 512)    // 512
	b, _ := p.Alloc(Grads, 1024)    // 1024
	p.MustFree(a)                   //
	c, _ := p.Alloc(Activations, 1) // 512, cache hit
	if _, err := p.Alloc(Workspace, 8192); err == nil {
		t.Fatal("8 KiB into 4 KiB: no error")
	}
	want := []Event{
		{Category: Params, Delta: 512, Allocated: 512, Reserved: 512},
		{Category: Grads, Delta: 1024, Allocated: 1536, Reserved: 1536},
		{Category: Params, Delta: -512, Allocated: 1024, Reserved: 1536},
		{Category: Activations, Delta: 512, Allocated: 1536, Reserved: 1536},
	}
	checkEvents(t, "first", p.Timeline(), want)
	if ev := p.Timeline(); len(ev) != 0 {
		t.Errorf("Timeline did not drain: %d events left", len(ev))
	}

	p.MustFree(c)
	p.EmptyCache() // records nothing, but the next event sees reserved drop
	p.MustFree(b)
	want = []Event{
		{Category: Activations, Delta: -512, Allocated: 1024, Reserved: 1536},
		{Category: Grads, Delta: -1024, Allocated: 0, Reserved: 1024},
	}
	checkEvents(t, "second", p.Timeline(), want)

	q := newTestPool(Options{})
	d, _ := q.Alloc(Params, 40)
	q.MustFree(d)
	if ev := q.Timeline(); ev != nil {
		t.Errorf("without Options.Timeline: %d events, want nil", len(ev))
	}
}

// TestTimelinePhase: a named phase is a mark (Delta 0) in the timeline and
// labels the events after it; naming the same phase again records nothing,
// and neither does a pool without a timeline. The byte counts are those of
// a timeline without phases.
func TestTimelinePhase(t *testing.T) {
	p := newTestPool(Options{Timeline: true})
	p.TimelinePhase("forward")
	a, _ := p.Alloc(Activations, 512)
	p.TimelinePhase("forward")
	p.TimelinePhase("backward")
	p.MustFree(a)
	p.TimelinePhase("")
	want := []Event{
		{Phase: "forward"},
		{Category: Activations, Delta: 512, Allocated: 512, Reserved: 512, Phase: "forward"},
		{Allocated: 512, Reserved: 512, Phase: "backward"},
		{Category: Activations, Delta: -512, Allocated: 0, Reserved: 512, Phase: "backward"},
		{Reserved: 512},
	}
	checkEvents(t, "phases", p.Timeline(), want)

	q := newTestPool(Options{})
	q.TimelinePhase("forward")
	b, _ := q.Alloc(Activations, 512)
	q.MustFree(b)
	if ev := q.Timeline(); ev != nil {
		t.Errorf("without Options.Timeline: %d events, want nil", len(ev))
	}
	if q.Stats() != p.Stats() {
		t.Errorf("phases changed the counts: %+v, without %+v", p.Stats(), q.Stats())
	}
}

func checkEvents(t *testing.T, where string, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d: %+v", where, len(got), len(want), got)
	}
	for i := range got {
		if got[i].At < 0 || i > 0 && got[i].At < got[i-1].At {
			t.Errorf("%s: event %d At %v not monotonic", where, i, got[i].At)
		}
		g := got[i]
		g.At = 0
		if g != want[i] {
			t.Errorf("%s: event %d = %+v, want %+v", where, i, g, want[i])
		}
	}
}

func TestConcurrent(t *testing.T) {
	const (
		workers = 16
		iters   = 300
		hold    = 3 // buffers each worker holds at once
	)
	sizes := []int{1, 100, 128, 129, 1000, 4096}
	tests := []struct {
		name string
		opts Options
	}{
		{"unlimited", Options{Timeline: true}},
		{"tight capacity", Options{Capacity: 64 * kib}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPool(tt.opts)
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				oomCount int64
				okCount  int64
			)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var held []*Buffer
					var ooms, oks int64
					for i := range iters {
						cat := Category((w + i) % NumCategories)
						n := sizes[(w*7+i)%len(sizes)]
						var b *Buffer
						var err error
						b, err = p.Alloc(cat, int64(n*(1+i%3)))
						var oe *OutOfMemoryError
						switch {
						case errors.As(err, &oe):
							ooms++
						case err != nil:
							t.Error(err)
							return
						default:
							oks++
							by := bytesOf(b)[:b.Len()]
							for j := range by {
								by[j] = byte(w)
							}
							held = append(held, b)
						}
						if len(held) == hold || i == iters-1 {
							for _, h := range held {
								for _, v := range bytesOf(h)[:h.Len()] {
									if v != byte(w) {
										t.Errorf("worker %d: buffer clobbered by another goroutine", w)
										break
									}
								}
								if err := p.Free(h); err != nil {
									t.Error(err)
								}
							}
							held = held[:0]
						}
						if i%50 == 0 {
							checkInvariants(t, "concurrent snapshot", p.Stats())
							p.Timeline()
						}
						if i%97 == 0 {
							p.EmptyCache()
						}
					}
					mu.Lock()
					oomCount += ooms
					okCount += oks
					mu.Unlock()
				}()
			}
			wg.Wait()

			s := p.Stats()
			checkInvariants(t, "final", s)
			if s.Allocated.Current != 0 || s.ActiveBuffers != 0 {
				t.Errorf("allocated %d, active %d; want 0", s.Allocated.Current, s.ActiveBuffers)
			}
			for c, bc := range s.ByCategory {
				if bc.Current != 0 {
					t.Errorf("ByCategory[%s].Current = %d", Category(c), bc.Current)
				}
			}
			if s.NumAllocs != okCount || s.NumFrees != okCount || s.NumOOMs != oomCount {
				t.Errorf("NumAllocs %d NumFrees %d NumOOMs %d; want %d %d %d",
					s.NumAllocs, s.NumFrees, s.NumOOMs, okCount, okCount, oomCount)
			}
			t.Logf("%d allocations, %d OOMs, %d cache hits", okCount, oomCount, s.CacheHits)
			if okCount+oomCount != workers*iters {
				t.Errorf("%d results for %d calls", okCount+oomCount, workers*iters)
			}
			if most := int64(workers * hold * 3 * 4096); s.Allocated.Peak > most {
				t.Errorf("Allocated.Peak %d above the most ever live, %d", s.Allocated.Peak, most)
			}
			p.EmptyCache()
			if s := p.Stats(); s.Reserved.Current != 0 {
				t.Errorf("after EmptyCache with nothing live: reserved %d", s.Reserved.Current)
			}
		})
	}
}

// TestSplitMergeRandom: a random sequence of allocations and frees; every
// live buffer holds its own byte pattern, so two buffers sharing memory
// would show; the accounting and the allocator agree throughout; and once
// all is freed, EmptyCache gives every segment back.
func TestSplitMergeRandom(t *testing.T) {
	al := &testAllocator{}
	p := NewPool(al, Options{})
	rng := rand.New(rand.NewPCG(17, 18))
	type live struct {
		b   *Buffer
		tag byte
	}
	var bufs []live
	check := func(step int) {
		for _, l := range bufs {
			for i, v := range bytesOf(l.b) {
				if v != l.tag {
					t.Fatalf("step %d: buffer %d's byte %d is %d, want %d: two buffers share memory", step, l.b.id, i, v, l.tag)
				}
			}
		}
		s := p.Stats()
		var alloc int64
		for _, l := range bufs {
			alloc += l.b.Size()
		}
		if s.Allocated.Current != alloc {
			t.Fatalf("step %d: allocated %d, live buffers %d", step, s.Allocated.Current, alloc)
		}
		var segs, free int64
		for _, seg := range p.segments {
			segs += seg.size
			off := int64(0)
			for b := seg.first; b != nil; b = b.next {
				if b.off != off || (b.next != nil && b.next.prev != b) {
					t.Fatalf("step %d: segment %d's blocks do not tile it", step, seg.id)
				}
				if b.free && b.next != nil && b.next.free {
					t.Fatalf("step %d: two free neighbours not merged", step)
				}
				if b.free {
					free += b.size
				}
				off += b.size
			}
			if off != seg.size {
				t.Fatalf("step %d: segment %d tiled to %d of %d bytes", step, seg.id, off, seg.size)
			}
		}
		if segs != s.Reserved.Current || free != s.Reserved.Current-s.Allocated.Current || al.live != len(p.segments) {
			t.Fatalf("step %d: segments %d bytes (%d live in the allocator), free %d; stats %+v", step, segs, al.live, free, s)
		}
	}
	for step := range 3000 {
		if len(bufs) > 0 && rng.IntN(5) < 2 {
			i := rng.IntN(len(bufs))
			p.MustFree(bufs[i].b)
			bufs = append(bufs[:i], bufs[i+1:]...)
		} else {
			n := int64(rng.IntN(8)+1) * 512 * int64(1+rng.IntN(3)*rng.IntN(8))
			b, err := p.Alloc(Activations, n-int64(rng.IntN(512)))
			if err != nil {
				t.Fatal(err)
			}
			tag := byte(step%251 + 1)
			for i := range bytesOf(b) {
				bytesOf(b)[i] = tag
			}
			bufs = append(bufs, live{b, tag})
		}
		if step%50 == 0 {
			check(step)
		}
	}
	check(3000)
	if s := p.Stats(); s.CacheHits == 0 {
		t.Fatalf("no allocation reused a free block: %+v", s)
	}
	for _, l := range bufs {
		p.MustFree(l.b)
	}
	bufs = nil
	check(3001)
	p.EmptyCache()
	if s := p.Stats(); s.Reserved.Current != 0 || al.live != 0 {
		t.Errorf("after freeing all and EmptyCache: reserved %d, %d blocks live in the allocator", s.Reserved.Current, al.live)
	}
}
