package cpu

import (
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/memunet/memunet/memory"
)

// residentBytes is the process's resident memory (/proc/self/statm).
func residentBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// TestHostPages: a heap is address space only until mapped; mapped pages
// are memory the process holds, and an unmapped range gives it back and
// comes back zeroed when mapped again.
func TestHostPages(t *testing.T) {
	var a HostAllocator
	if a.PageSize() != hostPage {
		t.Skipf("host pages are %d bytes here", a.PageSize())
	}
	huge, err := a.Reserve(memory.HeapBytes)
	if err != nil {
		t.Fatalf("reserving a pool's heap: %v", err)
	}
	a.Release(huge)

	const size = 64 << 20
	s, err := a.Reserve(size)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(s)
	if addr := uintptrOf(s.(*hostBlock).words); addr%hostPage != 0 {
		t.Errorf("heap at %#x, not page-aligned", addr)
	}
	before := residentBytes(t)
	if err := a.Map(s, hostPage, size-2*hostPage); err != nil {
		t.Fatal(err)
	}
	w := a.Slice(s, hostPage, size-2*hostPage).(*hostBlock).words
	for i := range w {
		w[i] = float32(i%1000) + 1
	}
	mapped := residentBytes(t)
	if grew := mapped - before; grew < size/2 {
		t.Errorf("writing %d mapped bytes grew the resident memory by %d", size-2*hostPage, grew)
	}
	a.Unmap(s, 2*hostPage, size-4*hostPage)
	if shrank := mapped - residentBytes(t); shrank < size/2 {
		t.Errorf("unmapping %d bytes shrank the resident memory by %d", size-4*hostPage, shrank)
	}
	if w[0] != 1 || w[len(w)-1] != float32((len(w)-1)%1000)+1 {
		t.Errorf("the pages left mapped lost their contents: %v, %v", w[0], w[len(w)-1])
	}
	if err := a.Map(s, 2*hostPage, hostPage); err != nil {
		t.Fatal(err)
	}
	for i, v := range w[hostPage/4 : 2*hostPage/4] {
		if v != 0 {
			t.Fatalf("word %d of a page mapped again is %v, want 0", i, v)
		}
	}
}

// uintptrOf is the address of w's first word.
func uintptrOf(w []float32) uintptr { return uintptr(unsafe.Pointer(&w[0])) }

// TestHostPagedPool: a pool over host memory pages; random allocations and
// frees keep every live buffer's contents, reserved stays the pages live
// buffers touch at their most, and emptying the cache after freeing all
// leaves nothing reserved.
func TestHostPagedPool(t *testing.T) {
	p := memory.NewPool(HostAllocator{}, memory.Options{})
	if p.Stats().PageBytes != hostPage {
		t.Skip("host memory does not page here")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	type live struct {
		b   *memory.Buffer
		tag float32
	}
	var bufs []live
	for step := range 600 {
		if len(bufs) > 0 && rng.IntN(9) < 4 {
			i := rng.IntN(len(bufs))
			for _, v := range words(bufs[i].b) {
				if v != bufs[i].tag {
					t.Fatalf("step %d: a buffer holds %v, want %v", step, v, bufs[i].tag)
				}
			}
			p.MustFree(bufs[i].b)
			bufs = append(bufs[:i], bufs[i+1:]...)
			continue
		}
		b, err := p.Alloc(memory.Activations, int64(1+rng.IntN(64))*int64(1+rng.IntN(4)*rng.IntN(4))*8<<10)
		if err != nil {
			t.Fatal(err)
		}
		tag := float32(step + 1)
		w := words(b)
		for i := range w {
			w[i] = tag
		}
		bufs = append(bufs, live{b, tag})
	}
	s := p.Stats()
	if s.PagesUnmapped == 0 || s.Reserved.Peak > s.Allocated.Peak*5/4 {
		t.Errorf("pages never moved, or reserved peak %d far above allocated %d: %+v", s.Reserved.Peak, s.Allocated.Peak, s)
	}
	for _, l := range bufs {
		p.MustFree(l.b)
	}
	p.EmptyCache()
	if s := p.Stats(); s.Reserved.Current != 0 {
		t.Errorf("after freeing all and emptying the cache: reserved %d", s.Reserved.Current)
	}
}

// TestHostHeapCleanup: a heap nobody released (its pool dropped) is
// unmapped by the garbage collector once no block of it is reachable, and
// not while a block sliced from it still is: its written pages stay
// resident until then, and leave after.
func TestHostHeapCleanup(t *testing.T) {
	var a HostAllocator
	if a.PageSize() == 0 {
		t.Skip("host memory does not page here")
	}
	const size = 64 << 20
	s, err := a.Reserve(size)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Map(s, 0, size); err != nil {
		t.Fatal(err)
	}
	w := s.(*hostBlock).words
	for i := 0; i < len(w); i += 1024 {
		w[i] = 1
	}
	w = nil
	sub := a.Slice(s, hostPage, hostPage)
	debug.FreeOSMemory() // the Go heap's garbage gone first, so that only the heap's pages can move the figure
	written := residentBytes(t)
	s = nil
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if dropped := written - residentBytes(t); dropped > size/4 {
		t.Fatalf("%d resident bytes left while a block of the heap was reachable", dropped)
	}
	runtime.KeepAlive(sub)
	sub = nil
	for i := 0; i < 50 && written-residentBytes(t) < size/2; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if dropped := written - residentBytes(t); dropped < size/2 {
		t.Errorf("a dropped heap of %d written bytes gave back only %d", size, dropped)
	}
}

// TestAllocMapsLargeBlocks: a block of a page or more (the planned arena)
// is mapped outside Go's heap, whose collector would let the heap grow to
// about twice the arena: zeroed, writable, not in the heap's count, and
// Free gives its memory back; a small block is Go memory.
func TestAllocMapsLargeBlocks(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("32-bit: blocks are Go memory")
	}
	const bytes = 64 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := HostAllocator{}.Alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	w := s.(*hostBlock).words
	if len(w) != bytes/4 || s.(*hostBlock).heap == nil || !s.(*hostBlock).heap.whole {
		t.Fatalf("a %d-byte block: %d words, mapped %v", bytes, len(w), s.(*hostBlock).heap != nil)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > bytes/16 {
		t.Errorf("Go's heap grew by %d bytes for a mapped block of %d", grew, bytes)
	}
	for i := 0; i < len(w); i += 1 << 14 {
		if w[i] != 0 {
			t.Fatalf("word %d of a new block is %v", i, w[i])
		}
		w[i] = float32(i)
	}
	held := residentBytes(t)
	HostAllocator{}.Free(s)
	if freed := held - residentBytes(t); freed < bytes/2 {
		t.Errorf("Free gave back %d of a %d-byte block's resident bytes", freed, bytes)
	}
	small, err := HostAllocator{}.Alloc(4096)
	if err != nil || small.(*hostBlock).heap != nil {
		t.Errorf("a 4 KiB block: %v, mapped %v", err, small.(*hostBlock).heap != nil)
	}
}
