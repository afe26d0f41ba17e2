package memory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// testPager is a Pager over pages of Go memory made at Map and dropped at
// Unmap, so that a pool which unmaps a page a live buffer touches, or
// reads one it never mapped, is caught: every access goes through at,
// which panics on an unmapped page, and a page mapped again comes back
// filled with garbage.
type testPager struct {
	mu    sync.Mutex
	page  int64
	heaps int  // reservations not yet released
	full  bool // Map fails with ErrExhausted
	maps  int  // Map calls
}

// testHeap is a reservation: its pages by index, present while mapped.
type testHeap struct {
	size     int64
	pages    map[int64][]byte
	released bool
}

// testRange is the Storage of a testPager: bytes [off, off+size) of a heap.
type testRange struct {
	heap      *testHeap
	off, size int64
	pager     *testPager
}

func newTestPager(page int64) *testPager { return &testPager{page: page} }

func (a *testPager) Name() string    { return "test-pager" }
func (a *testPager) PageSize() int64 { return a.page }

// Alloc is a reservation mapped whole (the arena's block).
func (a *testPager) Alloc(n int64) (Storage, error) {
	s, _ := a.Reserve((n + a.page - 1) / a.page * a.page)
	r := s.(*testRange)
	r.size = n
	return r, a.Map(s, 0, (n+a.page-1)/a.page*a.page)
}

func (a *testPager) Free(s Storage) {}

func (a *testPager) Slice(s Storage, off, n int64) Storage {
	r := s.(*testRange)
	if off+n > r.size {
		panic(fmt.Sprintf("slice [%d, %d) of %d bytes", off, off+n, r.size))
	}
	return &testRange{r.heap, r.off + off, n, a}
}

func (a *testPager) Reserve(n int64) (Storage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n%a.page != 0 {
		panic(fmt.Sprintf("reservation of %d bytes, not whole pages", n))
	}
	a.heaps++
	return &testRange{&testHeap{size: n, pages: map[int64][]byte{}}, 0, n, a}, nil
}

// pagesOf checks that [off, off+n) of s is whole pages inside it.
func (a *testPager) pagesOf(s Storage, off, n int64) (*testHeap, int64, int64) {
	r := s.(*testRange)
	if r.off != 0 || off%a.page != 0 || n%a.page != 0 || n <= 0 || off+n > r.heap.size || r.heap.released {
		panic(fmt.Sprintf("bad page range [%d, %d) of a %d-byte heap", off, off+n, r.heap.size))
	}
	return r.heap, off / a.page, (off + n) / a.page
}

func (a *testPager) Map(s Storage, off, n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, lo, hi := a.pagesOf(s, off, n)
	if a.full {
		return fmt.Errorf("test pager: %w", ErrExhausted)
	}
	a.maps++
	for i := lo; i < hi; i++ {
		if h.pages[i] != nil {
			panic(fmt.Sprintf("page %d mapped twice", i))
		}
		h.pages[i] = make([]byte, a.page)
		for j := range h.pages[i] {
			h.pages[i][j] = 0xA5
		}
	}
	return nil
}

func (a *testPager) Unmap(s Storage, off, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, lo, hi := a.pagesOf(s, off, n)
	for i := lo; i < hi; i++ {
		if h.pages[i] == nil {
			panic(fmt.Sprintf("page %d unmapped but not mapped", i))
		}
		delete(h.pages, i)
	}
}

func (a *testPager) Release(s Storage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := s.(*testRange).heap
	if len(h.pages) != 0 || h.released {
		panic(fmt.Sprintf("released a heap with %d pages mapped (released before: %v)", len(h.pages), h.released))
	}
	h.released = true
	a.heaps--
}

// mapped is the pages mapped in all heaps of the pool's segments.
func (a *testPager) mapped(p *Pool) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for _, seg := range p.segments {
		n += int64(len(seg.store.(*testRange).heap.pages))
	}
	return n
}

// chunks calls f with r's bytes page by page; it panics on an unmapped page.
func (r *testRange) chunks(f func([]byte)) {
	r.pager.mu.Lock()
	defer r.pager.mu.Unlock()
	pg := r.pager.page
	for off := r.off; off < r.off+r.size; {
		page := r.heap.pages[off/pg]
		if page == nil {
			panic(fmt.Sprintf("access to byte %d of an unmapped page", off))
		}
		end := min(r.off+r.size, (off/pg+1)*pg)
		f(page[off%pg : off%pg+end-off])
		off = end
	}
}

// TestPagedScript follows a paged pool (1 KiB pages) call by call:
// allocated, reserved (the mapped pages), pages mapped and unmapped, hits.
func TestPagedScript(t *testing.T) {
	pager := newTestPager(kib)
	p := NewPool(pager, Options{})
	bufs := map[string]*Buffer{}
	type want struct{ alloc, res, mapped, unmapped, hits int64 }
	for i, st := range []struct {
		op   string // "alloc name n", "free name", "empty"
		name string
		n    int64
		want want
	}{
		{"alloc", "a", 512, want{512, kib, 1, 0, 0}},             // [0, 512): page 0
		{"alloc", "b", kib, want{1536, 2 * kib, 2, 0, 0}},        // [512, 1536): pages 0-1
		{"free", "a", 0, want{kib, 2 * kib, 2, 0, 0}},            // page 0 still touched by b
		{"alloc", "c", 2 * kib, want{3 * kib, 4 * kib, 4, 0, 0}}, // [1536, 3584): pages 1-3; a's 512 is too small
		{"free", "b", 0, want{2 * kib, 4 * kib, 4, 0, 0}},        // [0, 1536) free: page 0 wholly free, cached
		// [3584, 7680): pages 3-7, four to back: page 0 moves, three are new.
		{"alloc", "d", 4 * kib, want{6 * kib, 7 * kib, 8, 1, 0}},
		{"alloc", "e", 512, want{6656, 8 * kib, 9, 1, 0}}, // [0, 512): page 0 again, nothing to move
		{"free", "c", 0, want{4608, 8 * kib, 9, 1, 0}},
		{"free", "d", 0, want{512, 8 * kib, 9, 1, 0}},
		{"alloc", "f", kib, want{1536, 8 * kib, 9, 1, 1}}, // [512, 1536): pages 0-1, backed: a hit
		{"empty", "", 0, want{1536, 2 * kib, 9, 7, 1}},    // pages 2-7 unmapped
		{"free", "e", 0, want{kib, 2 * kib, 9, 7, 1}},
		{"free", "f", 0, want{0, 2 * kib, 9, 7, 1}},
		{"empty", "", 0, want{0, 0, 9, 9, 1}}, // pages 0-1 unmapped, the heap released
	} {
		switch st.op {
		case "alloc":
			b, err := p.Alloc(Activations, st.n)
			if err != nil {
				t.Fatalf("step %d: %v", i+1, err)
			}
			bufs[st.name] = b
		case "free":
			p.MustFree(bufs[st.name])
		case "empty":
			p.EmptyCache()
		}
		s := p.Stats()
		got := want{s.Allocated.Current, s.Reserved.Current, s.PagesMapped, s.PagesUnmapped, s.CacheHits}
		if got != st.want {
			t.Errorf("step %d (%s %s): got %+v, want %+v", i+1, st.op, st.name, got, st.want)
		}
		if m := pager.mapped(p) * kib; m != s.Reserved.Current {
			t.Errorf("step %d: %d bytes mapped, reserved %d", i+1, m, s.Reserved.Current)
		}
		checkInvariants(t, fmt.Sprintf("step %d", i+1), s)
	}
	s := p.Stats()
	if s.SegmentAllocs != 1 || s.Reserved.Peak != 8*kib || s.Allocated.Peak != 6656 || s.PageBytes != kib || pager.heaps != 0 || len(p.segments) != 0 {
		t.Errorf("at the end: %+v; %d heaps reserved, %d segments", s, pager.heaps, len(p.segments))
	}
}

// TestPagedCapacity: under a capacity, an allocation fits by moving cached
// pages where mapping new ones would pass it, and fails with the pool's
// figures when even that is not enough.
func TestPagedCapacity(t *testing.T) {
	p := NewPool(newTestPager(kib), Options{Capacity: 3 * kib})
	a, _ := p.Alloc(Params, kib)   // [0, 1024): page 0
	_, _ = p.Alloc(Params, 512)    // page 1
	_, _ = p.Alloc(Params, 512)    // page 1
	p.MustFree(a)                  // page 0 cached
	d, err := p.Alloc(Grads, 1536) // [2048, 3584): pages 2-3; page 0 moves there
	if err != nil {
		t.Fatalf("an allocation that fits by moving a cached page: %v", err)
	}
	if s := p.Stats(); s.Reserved.Current != 3*kib || s.PagesUnmapped != 1 || s.NumOOMs != 0 {
		t.Errorf("after moving a page: %+v", s)
	}
	_, err = p.Alloc(Activations, kib) // [0, 1024) again: page 0, with nothing cached to move
	var oom *OutOfMemoryError
	want := OutOfMemoryError{Requested: kib, Category: Activations, Capacity: 3 * kib, Free: 0, Allocated: 2560, ReservedUnallocated: 512}
	if !errors.As(err, &oom) || *oom != want {
		t.Fatalf("want %+v, got %v", want, err)
	}
	if s := p.Stats(); s.Reserved.Current != 3*kib || s.Allocated.Current != 2560 || s.NumOOMs != 1 {
		t.Errorf("after the failure: %+v", s)
	}
	p.MustFree(d) // its two pages cached: two pages fit again
	if _, err := p.Alloc(Activations, 2*kib); err != nil {
		t.Errorf("two pages after freeing two: %v", err)
	}
	if s := p.Stats(); s.Reserved.Current != 3*kib || s.NumOOMs != 1 {
		t.Errorf("at the end: %+v", s)
	}
}

// TestPagedExhausted: when the memory itself runs out, the pool unmaps
// every wholly free page and tries once more, then fails naming the cause;
// an allocation on backed pages still succeeds.
func TestPagedExhausted(t *testing.T) {
	pager := newTestPager(kib)
	p := NewPool(pager, Options{})
	a, _ := p.Alloc(Params, 4*kib) // [0, 4096): pages 0-3
	s1, _ := p.Alloc(Params, 512)  // [4096, 4608): page 4
	a2, _ := p.Alloc(Params, 2560) // [4608, 7168): pages 4-6
	s2, _ := p.Alloc(Params, 512)  // [7168, 7680): page 7
	p.MustFree(a)                  // pages 0-3 cached
	p.MustFree(a2)                 // pages 5-6 cached
	pager.full = true
	// [7680, 12288): pages 8-11 to back. Pages 6, 5, 3 and 2 are moved,
	// mapping fails, the rest of the cache (pages 0-1) is given back, and
	// mapping fails again.
	_, err := p.Alloc(Activations, 4608)
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || !errors.Is(err, ErrExhausted) || oom.Requested != 4608 {
		t.Fatalf("want an out-of-memory error caused by the exhausted pager, got %v", err)
	}
	if s := p.Stats(); s.CacheFlushes != 1 || s.Reserved.Current != 2*kib || s.PagesUnmapped != 6 || s.NumOOMs != 1 {
		t.Errorf("after the failure: %+v", s)
	}
	c, err := p.Alloc(Grads, 512) // a2's place, on page 4
	if err != nil {
		t.Fatalf("an allocation on a backed page: %v", err)
	}
	for _, buf := range []*Buffer{s1, c, s2} {
		p.MustFree(buf)
	}
	p.EmptyCache()
	if s := p.Stats(); s.Reserved.Current != 0 || pager.heaps != 0 {
		t.Errorf("after freeing all: %+v, %d heaps", s, pager.heaps)
	}
}

// TestPagedRandom: random allocations and frees on a paged pool. Every live
// buffer keeps its bytes (a page unmapped under one, or two buffers
// sharing bytes, would show), the pager's mapped pages are the pool's
// reserved bytes, and the reserved peak is exactly the most pages live
// buffers touched at once: the pool never maps a page while a wholly free
// one is backed. A virtual pool of the same page follows byte for byte.
func TestPagedRandom(t *testing.T) {
	const page = 4 * kib
	pager := newTestPager(page)
	p := NewPool(pager, Options{})
	virt := NewPool(Virtual{Page: page}, Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	type live struct {
		b, v *Buffer
		tag  byte
	}
	var bufs []live
	touched := func() int64 {
		seen := map[int64]bool{}
		for _, l := range bufs {
			lo, hi := p.pagesOf(l.b.blk)
			for i := lo; i < hi; i++ {
				seen[i] = true
			}
		}
		return int64(len(seen))
	}
	var peakTouched int64
	check := func(step int) {
		for _, l := range bufs {
			if step%25 != 0 {
				break // the contents every 25 steps: they are most of the time
			}
			l.b.Storage().(*testRange).chunks(func(b []byte) {
				for _, v := range b {
					if v != l.tag {
						t.Fatalf("step %d: buffer %d holds %#x, want %#x", step, l.b.id, v, l.tag)
					}
				}
			})
		}
		s := p.Stats()
		if m := pager.mapped(p) * page; m != s.Reserved.Current {
			t.Fatalf("step %d: %d bytes mapped, reserved %d", step, m, s.Reserved.Current)
		}
		if s.Reserved.Peak != peakTouched*page {
			t.Fatalf("step %d: reserved peak %d, the most pages touched %d (%d bytes)", step, s.Reserved.Peak, peakTouched, peakTouched*page)
		}
		if vs := virt.Stats(); vs != s {
			t.Fatalf("step %d: virtual stats\n%+v\nreal\n%+v", step, vs, s)
		}
	}
	for step := range 4000 {
		if len(bufs) > 0 && rng.IntN(9) < 4 {
			i := rng.IntN(len(bufs))
			p.MustFree(bufs[i].b)
			virt.MustFree(bufs[i].v)
			bufs = append(bufs[:i], bufs[i+1:]...)
		} else {
			n := int64(rng.IntN(16)+1) * 512 * int64(1+rng.IntN(4)*rng.IntN(8))
			n -= int64(rng.IntN(512))
			b, err := p.Alloc(Activations, n)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := virt.Alloc(Activations, n)
			tag := byte(step%251 + 1)
			b.Storage().(*testRange).chunks(func(b []byte) {
				for i := range b {
					b[i] = tag
				}
			})
			bufs = append(bufs, live{b, v, tag})
			peakTouched = max(peakTouched, touched())
		}
		check(step)
	}
	check(4000)
	s := p.Stats()
	if s.PagesUnmapped == 0 || s.CacheHits == 0 || s.SegmentAllocs != 1 {
		t.Fatalf("the sequence never moved a page or reused one: %+v", s)
	}
	t.Logf("allocated peak %d, reserved peak %d (%.3fx); %d pages mapped, %d unmapped, %d Map calls",
		s.Allocated.Peak, s.Reserved.Peak, float64(s.Reserved.Peak)/float64(s.Allocated.Peak), s.PagesMapped, s.PagesUnmapped, pager.maps)
	for _, l := range bufs {
		p.MustFree(l.b)
	}
	p.EmptyCache()
	if s := p.Stats(); s.Reserved.Current != 0 || pager.heaps != 0 {
		t.Errorf("after freeing all and EmptyCache: reserved %d, %d heaps", s.Reserved.Current, pager.heaps)
	}
}

// limitedPager has limit bytes of address space in all.
type limitedPager struct {
	*testPager
	limit, reserved int64
}

func (a *limitedPager) Reserve(n int64) (Storage, error) {
	if a.reserved+n > a.limit {
		return nil, errors.New("address space limit")
	}
	a.reserved += n
	return a.testPager.Reserve(n)
}

func (a *limitedPager) Release(s Storage) {
	a.reserved -= s.(*testRange).heap.size
	a.testPager.Release(s)
}

// TestPagedReserveFallsBack: where a heap of HeapBytes cannot be reserved,
// the pool reserves one just large enough for each allocation that finds
// no room, and works on; past the limit it gives back its wholly free
// heaps and tries again, else fails out of memory, naming the reservation.
func TestPagedReserveFallsBack(t *testing.T) {
	pager := &limitedPager{testPager: newTestPager(kib), limit: 8 * kib}
	p := NewPool(pager, Options{})
	a, err := p.Alloc(Params, 3000) // a heap of 3 pages
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Alloc(Params, 2*kib) // no room left: another heap of 2
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.SegmentAllocs != 2 || s.Reserved.Current != 5*kib || pager.heaps != 2 {
		t.Errorf("two heaps: %+v, %d reserved", s, pager.heaps)
	}
	_, err = p.Alloc(Params, 9*kib)
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "reserving address space") {
		t.Errorf("past the limit: %v, want an out-of-memory error naming the reservation", err)
	}
	// Freed heaps hold address space until a reservation needs it: then
	// they are given back and the reservation tried again.
	p.MustFree(a)
	p.MustFree(b)
	c, err := p.Alloc(Grads, 6*kib)
	if err != nil {
		t.Fatalf("6 KiB with two wholly free heaps of 3 and 2 pages to give back: %v", err)
	}
	if s := p.Stats(); s.CacheFlushes != 1 || s.Reserved.Current != 6*kib || pager.heaps != 1 || s.NumOOMs != 1 {
		t.Errorf("after giving the free heaps back: %+v, %d heaps", s, pager.heaps)
	}
	p.MustFree(c)
	p.EmptyCache()
	if s := p.Stats(); s.Reserved.Current != 0 || pager.heaps != 0 {
		t.Errorf("after freeing all: %+v, %d heaps", s, pager.heaps)
	}
}

// TestPagedReserveReleasesEmptyHeaps: a heap left wholly free with no page
// mapped (its pages moved to another heap) holds only address space; a
// reservation that fails gives it back and tries again.
func TestPagedReserveReleasesEmptyHeaps(t *testing.T) {
	pager := &limitedPager{testPager: newTestPager(kib), limit: 8 * kib}
	p := NewPool(pager, Options{})
	a, _ := p.Alloc(Params, 3*kib) // heap 1: 3 pages
	p.MustFree(a)
	b, err := p.Alloc(Params, 4*kib) // heap 2: 4 pages, three moved from heap 1
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.PagesUnmapped != 3 || s.Reserved.Current != 4*kib || pager.heaps != 2 {
		t.Fatalf("heap 1's pages not moved: %+v, %d heaps", s, pager.heaps)
	}
	c, err := p.Alloc(Grads, 4*kib) // 7 KiB of address space taken: heap 1 must go
	if err != nil {
		t.Fatalf("4 KiB with a wholly free, unmapped heap of 3 to give back: %v", err)
	}
	if s := p.Stats(); s.CacheFlushes != 1 || s.Reserved.Current != 8*kib || pager.heaps != 2 {
		t.Errorf("after giving heap 1 back: %+v, %d heaps", s, pager.heaps)
	}
	p.MustFree(b)
	p.MustFree(c)
}

// TestPagedOddPage: a page that does not divide HeapBytes still gives
// reservations of whole pages.
func TestPagedOddPage(t *testing.T) {
	pager := newTestPager(1536)
	p := NewPool(pager, Options{})
	b, err := p.Alloc(Activations, 4000)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Reserved.Current != 3*1536 {
		t.Errorf("4000 bytes in pages of 1536: reserved %d", s.Reserved.Current)
	}
	p.MustFree(b)
}
