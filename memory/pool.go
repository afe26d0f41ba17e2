package memory

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// BlockRound is the granularity of every allocation, in bytes (PyTorch rounds
// CUDA allocations to 512 bytes as well).
const BlockRound = 512

// Category says what an allocation is for; statistics are kept per category.
type Category uint8

const (
	Params Category = iota
	Grads
	Optimizer
	Activations
	Workspace
	NumCategories int = iota
)

var categoryNames = [NumCategories]string{"params", "grads", "optimizer", "activations", "workspace"}

func (c Category) String() string {
	if int(c) < NumCategories {
		return categoryNames[c]
	}
	return fmt.Sprintf("category(%d)", uint8(c))
}

// Categories lists every category in order.
func Categories() []Category {
	return []Category{Params, Grads, Optimizer, Activations, Workspace}
}

// RoundSize is the number of bytes an allocation of n bytes takes from the pool.
func RoundSize(n int64) int64 {
	if n <= 0 {
		return BlockRound
	}
	return (n + BlockRound - 1) / BlockRound * BlockRound
}

// Buffer is one allocation from a Pool: an opaque handle to a block of the
// pool's allocator. Only the backend that owns that kind of memory looks
// inside it (through Storage).
type Buffer struct {
	pool  *Pool
	id    uint64
	cat   Category
	size  int64   // rounded bytes, what the pool accounts
	req   int64   // requested bytes
	store Storage // its part of the allocator's block; nil once freed (and always in a virtual pool)
	blk   *block  // the pool's block it occupies (in the arena: its planned range)
	arena bool    // placed by the arena plan
	live  bool
}

// Category is what the buffer was allocated for.
func (b *Buffer) Category() Category { return b.cat }

// Size is the rounded number of bytes the buffer takes from its pool.
func (b *Buffer) Size() int64 { return b.size }

// Len is the number of bytes requested: the usable length of the buffer.
func (b *Buffer) Len() int64 { return b.req }

// Storage is the allocator's block behind the buffer (a block of Size()
// bytes), for the backend that owns this kind of memory; nil in a virtual
// pool. It panics once the buffer is freed.
func (b *Buffer) Storage() Storage {
	if !b.live {
		panic("memory: use of a freed buffer")
	}
	return b.store
}

// Allocator names the kind of memory the buffer lives in.
func (b *Buffer) Allocator() Allocator { return b.pool.allocator }

// Options configures a Pool. The zero value is an unlimited pool without timeline.
type Options struct {
	// Capacity is the device size in bytes; 0 means unlimited.
	Capacity int64
	// Timeline records an Event for every allocation and free.
	Timeline bool
	// Trace records every allocation, free and phase mark (Pool.Trace), for
	// PlanArena.
	Trace bool
	// Arena, if set, places the allocations it planned in one block of its
	// Size, taken from the allocator at the first allocation; any other
	// goes to the caching pool (counted in Stats.ArenaMisses).
	Arena *ArenaPlan
	// OnFree, if set, sees every buffer just before it is freed (a debug
	// hook: the trainer poisons freed memory with it).
	OnFree func(*Buffer)
}

// Event is one point of the timeline: the pool's state right after an
// allocation (Delta > 0) or a free (Delta < 0), or the start of a phase of
// the work (Delta 0; see TimelinePhase).
type Event struct {
	At        time.Duration // since the pool was made
	Category  Category
	Delta     int64
	Allocated int64
	Reserved  int64
	// Phase is the part of the work the event fell in, as the pool's user
	// last named it with TimelinePhase (train: forward, backward,
	// optimizer); "" outside any.
	Phase string
}

// Stat is a current value and its peak in the current peak window.
type Stat struct {
	Current int64 `json:"current"`
	Peak    int64 `json:"peak"`
}

func (s *Stat) add(n int64) {
	s.Current += n
	if s.Current > s.Peak {
		s.Peak = s.Current
	}
}

// Stats mirror torch.cuda.memory_stats: bytes allocated (live buffers) and
// reserved (live plus cached), current and peak, per category, and counts.
type Stats struct {
	Allocated Stat `json:"allocated_bytes"`
	Reserved  Stat `json:"reserved_bytes"`
	// ByCategory is allocated bytes per category, each with its own peak.
	ByCategory [NumCategories]Stat `json:"allocated_bytes_by_category"`
	// AtPeak is the split by category of Allocated at the moment of its peak, so
	// that it adds up to Allocated.Peak.
	AtPeak [NumCategories]int64 `json:"allocated_at_peak_by_category"`
	// ActiveBuffers is the number of live buffers.
	ActiveBuffers int64 `json:"active_buffers"`
	// NumAllocs and NumFrees count calls since the pool was made.
	NumAllocs int64 `json:"num_allocs"`
	NumFrees  int64 `json:"num_frees"`
	// CacheHits counts allocations served from cached blocks.
	CacheHits int64 `json:"cache_hits"`
	// NumOOMs counts allocations that failed for lack of capacity.
	NumOOMs int64 `json:"num_ooms"`
	// CacheFlushes counts the times the pool gave its cached blocks back to
	// make room (capacity reached, or the allocator exhausted), not counting
	// EmptyCache calls.
	CacheFlushes int64 `json:"cache_flushes"`
	// Capacity is the pool's capacity, 0 if unlimited.
	Capacity int64 `json:"capacity"`
	// SegmentAllocs counts the allocator's Alloc and Reserve calls
	// (segments, heaps and the arena): zero per step is a steady state.
	SegmentAllocs int64 `json:"segment_allocs"`
	// PageBytes is the page size of a paged pool (0: segments);
	// PagesMapped and PagesUnmapped count the pages it backed with memory
	// and gave back, its Map and Unmap traffic.
	PageBytes     int64 `json:"page_bytes,omitempty"`
	PagesMapped   int64 `json:"pages_mapped,omitempty"`
	PagesUnmapped int64 `json:"pages_unmapped,omitempty"`
	// ArenaBytes is the arena's size once taken (0 without an arena);
	// ArenaMisses the allocations the plan did not foresee, served by the
	// caching pool instead.
	ArenaBytes  int64 `json:"arena_bytes,omitempty"`
	ArenaMisses int64 `json:"arena_misses,omitempty"`
}

// Pool is a thread-safe caching allocator with exact accounting, in the
// manner of PyTorch's CUDA caching allocator. A freed buffer's block stays
// cached, free, and merges with free neighbours; an allocation takes the
// smallest free block that holds it (best fit, ties to the oldest segment
// and lowest offset), split when the rest is at least BlockRound.
//
// Over an allocator that pages (a Pager with a page size), as PyTorch's
// expandable segments: blocks lie in one heap of reserved address space
// (HeapBytes, or more for a larger allocation; where address space is
// short, a heap per allocation that finds no room), and reserved is the bytes
// of its pages backed with memory. An allocation over pages not backed
// first moves the pages it needs from the cache: it unmaps wholly free
// pages, the highest first, and only maps new memory for the rest. So
// reserved is at most the pages live buffers touch at their peak, however
// the free space is cut. EmptyCache unmaps every wholly free page and
// releases the wholly free heaps.
//
// Over any other allocator: memory comes in segments, one per allocation
// the free blocks could not serve, of that allocation's size, and reserved
// is the segments' bytes; a miss first gives back the segments that are
// wholly free (all too small for it), and so does EmptyCache.
type Pool struct {
	mu        sync.Mutex
	allocator Allocator
	pager     Pager // the allocator, when it pages
	page      int64 // its page size
	opts      Options
	start     time.Time
	nextID    uint64
	nextSeg   uint64
	live      map[uint64]*Buffer
	segments  []*segment // in the order they were made
	free      []*block   // free blocks by (size, segment, offset)
	stats     Stats
	timeline  []Event
	phase     string // the timeline's current phase (TimelinePhase)
	trace     []TraceEvent
	arena     *arenaState
}

// arenaState is an arena pool's progress through its plan.
type arenaState struct {
	plan     *ArenaPlan
	seg      *segment // the arena block; nil until taken
	built    bool     // the first phase began: the build program is over
	phase    string   // the phase in progress ("" between phases)
	cursor   int      // the next slot of the current program
	fallback bool     // this program instance missed: the rest goes to the caching pool
	live     []span   // the arena ranges of live buffers
	miss     string   // the first miss, for the report
}

// span is a live arena range.
type span struct{ off, end int64 }

// program is the plan's slots for what runs now (nil: none).
func (a *arenaState) program() []Slot {
	switch {
	case !a.built:
		return a.plan.Build
	case a.phase != "":
		return a.plan.Phases[a.phase]
	}
	return nil
}

// overlaps reports a live arena buffer in [off, off+size).
func (a *arenaState) overlaps(off, size int64) bool {
	for _, l := range a.live {
		if l.off < off+size && off < l.end {
			return true
		}
	}
	return false
}

// HeapBytes is the address space a paged pool reserves at a time: one
// reservation serves any run, and costs no memory until its pages are
// mapped.
const HeapBytes = 64 << 30

// segment is one block from the allocator, tiled by the pool's blocks: a
// segment, or a paged pool's heap (pages set).
type segment struct {
	id     uint64
	store  Storage
	size   int64
	first  *block // the block at offset 0
	paged  bool
	mapped []pageRun // a heap's backed pages, by index, apart
}

// pageRun is the pages [lo, hi) of a heap.
type pageRun struct{ lo, hi int64 }

// pageSpan is a run of pages of one heap.
type pageSpan struct {
	seg *segment
	pageRun
}

// block is a range of a segment: a live buffer's or free.
type block struct {
	seg        *segment
	off, size  int64
	free       bool
	prev, next *block // the neighbours in the segment, by offset
}

// NewPool makes an empty pool over a: every segment comes from a.Alloc and,
// once EmptyCache drops it, goes back through a.Free.
func NewPool(a Allocator, opts Options) *Pool {
	if opts.Capacity < 0 {
		panic("memory: negative capacity")
	}
	if a == nil {
		panic("memory: nil allocator")
	}
	p := &Pool{
		allocator: a,
		opts:      opts,
		start:     time.Now(),
		live:      make(map[uint64]*Buffer),
		stats:     Stats{Capacity: opts.Capacity},
	}
	if opts.Arena != nil {
		p.arena = &arenaState{plan: opts.Arena}
	}
	if pg, ok := a.(Pager); ok && pg.PageSize() > 0 {
		if pg.PageSize()%BlockRound != 0 {
			panic(fmt.Sprintf("memory: page size %d is not a multiple of %d", pg.PageSize(), BlockRound))
		}
		p.pager, p.page = pg, pg.PageSize()
		p.stats.PageBytes = p.page
	}
	return p
}

// BeginPhase starts a phase of the run ("step", "validate"): an arena
// pool follows that phase's plan from its first slot; a tracing pool
// records the mark. Phases do not nest; EndPhase ends one.
func (p *Pool) BeginPhase(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opts.Trace {
		p.trace = append(p.trace, TraceEvent{Phase: name, Mark: true})
	}
	if a := p.arena; a != nil {
		a.built, a.phase, a.cursor, a.fallback = true, name, 0, false
	}
}

// EndPhase ends the phase BeginPhase started.
func (p *Pool) EndPhase() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opts.Trace {
		p.trace = append(p.trace, TraceEvent{Mark: true})
	}
	if a := p.arena; a != nil {
		a.built, a.phase, a.cursor, a.fallback = true, "", 0, false
	}
}

// Trace returns what Options.Trace recorded.
func (p *Pool) Trace() Trace {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Trace{Events: slices.Clone(p.trace)}
}

// ArenaMiss is the first allocation the arena plan did not foresee ("" if
// none): what fell back to the caching pool, and where.
func (p *Pool) ArenaMiss() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.arena == nil {
		return ""
	}
	return p.arena.miss
}

// arenaAlloc places an allocation by the plan; nil when the plan has no
// matching slot here (the caller falls back to the caching pool), or an
// error when the arena itself cannot be taken.
func (p *Pool) arenaAlloc(cat Category, size int64) (*block, error) {
	a := p.arena
	if a.fallback {
		return nil, nil
	}
	prog := a.program()
	where := "after the build, outside any phase"
	if a.phase != "" {
		where = "in phase " + a.phase
	} else if !a.built {
		where = "while building"
	}
	var why string
	switch {
	case a.cursor >= len(prog):
		why = fmt.Sprintf("allocation %d of %s (%s) %s: the plan has %d", a.cursor+1, FormatBytes(size), cat, where, len(prog))
	case prog[a.cursor].Size != size || prog[a.cursor].Cat != cat:
		why = fmt.Sprintf("allocation %d %s is %s (%s), the plan's %s (%s)", a.cursor+1, where, FormatBytes(size), cat,
			FormatBytes(prog[a.cursor].Size), prog[a.cursor].Cat)
	case a.overlaps(prog[a.cursor].Off, size):
		why = fmt.Sprintf("allocation %d %s: its planned range is still in use (a buffer freed later than planned)", a.cursor+1, where)
	}
	if why != "" {
		a.fallback = true
		p.stats.ArenaMisses++
		if a.miss == "" {
			a.miss = why
		}
		return nil, nil
	}
	if a.seg == nil {
		size := a.plan.Size
		var oom *OutOfMemoryError
		if p.opts.Capacity > 0 && p.stats.Reserved.Current+size > p.opts.Capacity {
			oom = p.oom(cat, size, nil)
		} else if store, err := p.allocator.Alloc(max(size, BlockRound)); err != nil {
			oom = p.oom(cat, size, err)
		} else {
			a.seg = p.newSegment(store, max(size, BlockRound), false)
			p.stats.Reserved.add(a.seg.size)
			p.stats.ArenaBytes = a.seg.size
		}
		if oom != nil {
			p.stats.NumOOMs++
			oom.Arena = true
			return nil, oom
		}
	}
	s := prog[a.cursor]
	a.cursor++
	a.live = append(a.live, span{s.Off, s.Off + size})
	return &block{seg: a.seg, off: s.Off, size: size}, nil
}

// Allocator is the allocator the pool's blocks come from.
func (p *Pool) Allocator() Allocator { return p.allocator }

// Virtual reports whether the pool only accounts, without memory (its
// allocator is Virtual).
func (p *Pool) Virtual() bool {
	_, ok := p.allocator.(Virtual)
	return ok
}

// Capacity is the pool's capacity in bytes (0: unlimited).
func (p *Pool) Capacity() int64 { return p.opts.Capacity }

// Alloc allocates n bytes for cat. Contents are undefined.
func (p *Pool) Alloc(cat Category, n int64) (*Buffer, error) {
	req := n
	if int(cat) >= NumCategories {
		panic(fmt.Sprintf("memory: unknown category %d", cat))
	}
	if req < 0 {
		panic(fmt.Sprintf("memory: negative allocation of %d bytes", req))
	}
	size := RoundSize(req)
	p.mu.Lock()
	defer p.mu.Unlock()
	var blk *block
	inArena := false
	if p.arena != nil {
		var err error
		if blk, err = p.arenaAlloc(cat, size); err != nil {
			return nil, err
		}
		inArena = blk != nil
	}
	if !inArena {
		var err error
		if p.pager != nil {
			blk, err = p.heapAlloc(cat, size)
		} else {
			blk, err = p.segmentAlloc(cat, size)
		}
		if err != nil {
			return nil, err
		}
	}
	store := blk.seg.store
	if blk.size != blk.seg.size {
		store = p.allocator.Slice(store, blk.off, blk.size)
	}
	p.nextID++
	b := &Buffer{pool: p, id: p.nextID, cat: cat, size: size, req: req, store: store, blk: blk, arena: inArena, live: true}
	if p.opts.Trace {
		p.trace = append(p.trace, TraceEvent{ID: b.id, Size: size, Cat: cat})
	}
	p.live[b.id] = b
	p.stats.NumAllocs++
	p.stats.ActiveBuffers++
	p.stats.ByCategory[cat].add(size)
	before := p.stats.Allocated.Peak
	p.stats.Allocated.add(size)
	if p.stats.Allocated.Peak > before {
		for c := range p.stats.AtPeak {
			p.stats.AtPeak[c] = p.stats.ByCategory[c].Current
		}
	}
	p.record(cat, size)
	return b, nil
}

// segmentAlloc takes a block of size bytes from the segments: a cached one
// or, on a miss, a new segment.
func (p *Pool) segmentAlloc(cat Category, size int64) (*block, error) {
	if blk := p.takeFree(size); blk != nil {
		p.stats.CacheHits++
		return blk, nil
	}
	// Nothing free is large enough: give back the wholly free segments (all
	// smaller than size) before taking a new one, so that reserved memory
	// holds only what can still be used.
	p.flushLocked()
	if p.opts.Capacity > 0 && p.stats.Reserved.Current+size > p.opts.Capacity {
		p.stats.NumOOMs++
		return nil, p.oom(cat, size, nil)
	}
	store, err := p.allocator.Alloc(size)
	if errors.Is(err, ErrExhausted) {
		p.stats.NumOOMs++
		return nil, p.oom(cat, size, err)
	}
	if err != nil {
		return nil, fmt.Errorf("memory: %s: allocating %s (%s): %w", p.allocator.Name(), FormatBytes(size), cat, err)
	}
	seg := p.newSegment(store, size, false)
	seg.first = &block{seg: seg, size: size}
	p.segments = append(p.segments, seg)
	p.stats.Reserved.add(size)
	return seg.first, nil
}

// newSegment numbers a block the allocator gave (a segment, a heap, the
// arena) and counts the call.
func (p *Pool) newSegment(store Storage, size int64, paged bool) *segment {
	p.stats.SegmentAllocs++
	p.nextSeg++
	return &segment{id: p.nextSeg, store: store, size: size, paged: paged}
}

// oom is the error for an allocation of size bytes that does not fit;
// cause is the allocator's error, if it ran out itself.
func (p *Pool) oom(cat Category, size int64, cause error) *OutOfMemoryError {
	e := &OutOfMemoryError{
		Requested: size, Category: cat, Capacity: p.opts.Capacity,
		Free:      max(0, p.opts.Capacity-p.stats.Reserved.Current),
		Allocated: p.stats.Allocated.Current, ReservedUnallocated: p.stats.Reserved.Current - p.stats.Allocated.Current,
	}
	if cause != nil {
		e.Cause = fmt.Errorf("%s: %w", p.allocator.Name(), cause)
	}
	return e
}

// heapAlloc takes a block of size bytes from the heaps (reserving another
// when none has room) and backs its pages.
func (p *Pool) heapAlloc(cat Category, size int64) (*block, error) {
	blk := p.takeFree(size)
	if blk == nil {
		store, n, err := p.reserveHeap(size)
		if err != nil {
			p.stats.NumOOMs++
			return nil, p.oom(cat, size, fmt.Errorf("reserving address space: %w (%w)", ErrExhausted, err))
		}
		seg := p.newSegment(store, n, true)
		seg.first = &block{seg: seg, size: n}
		p.segments = append(p.segments, seg)
		p.insertFree(seg.first)
		blk = p.takeFree(size) // the new heap's: nothing else held size
	}
	lo, hi := p.pagesOf(blk)
	need := hi - lo - blk.seg.mappedIn(lo, hi)
	if need == 0 {
		p.stats.CacheHits++
	} else if err := p.mapBlock(cat, blk, size, need); err != nil {
		p.release(blk)
		return nil, err
	}
	return blk, nil
}

// reserveHeap reserves a heap for an allocation of size bytes that no heap
// has room for: HeapBytes, or where address space is limited (ulimit -v, a
// 32-bit driver) a heap of just this allocation, after giving back the
// wholly free heaps; its storage and size.
func (p *Pool) reserveHeap(size int64) (Storage, int64, error) {
	roundPage := func(n int64) int64 { return (n + p.page - 1) / p.page * p.page }
	least := roundPage(size)
	heap := max(roundPage(HeapBytes), least)
	if store, err := p.pager.Reserve(heap); err == nil {
		return store, heap, nil
	}
	store, err := p.pager.Reserve(least)
	if heaps := len(p.segments); err != nil && (p.emptyCacheLocked() > 0 || len(p.segments) < heaps) {
		// Something was given back: pages, or wholly free heaps whose pages
		// were unmapped already.
		p.stats.CacheFlushes++
		store, err = p.pager.Reserve(least)
	}
	return store, least, err
}

// pagesOf is the pages [lo, hi) blk touches.
func (p *Pool) pagesOf(b *block) (lo, hi int64) {
	return b.off / p.page, (b.off+b.size-1)/p.page + 1
}

// mappedIn counts the backed pages in [lo, hi).
func (s *segment) mappedIn(lo, hi int64) int64 {
	var n int64
	for _, r := range s.mapped[s.firstRun(lo):] {
		if r.lo >= hi {
			break
		}
		n += min(r.hi, hi) - max(r.lo, lo)
	}
	return n
}

// firstRun is the index of the first run that ends after page lo.
func (s *segment) firstRun(lo int64) int {
	i, _ := slices.BinarySearchFunc(s.mapped, lo, func(r pageRun, lo int64) int { return cmp.Compare(r.hi, lo+1) })
	return i
}

// setMapped marks [lo, hi) backed (on) or not, keeping the runs apart.
func (s *segment) setMapped(lo, hi int64, on bool) {
	var out []pageRun
	i := s.firstRun(lo - 1) // a run ending at lo merges with [lo, hi)
	j := i
	for j < len(s.mapped) && s.mapped[j].lo <= hi {
		r := s.mapped[j]
		if on {
			lo, hi = min(lo, r.lo), max(hi, r.hi)
		} else {
			if r.lo < lo {
				out = append(out, pageRun{r.lo, lo})
			}
			if r.hi > hi {
				out = append(out, pageRun{hi, r.hi})
			}
		}
		j++
	}
	if on {
		out = append(out, pageRun{lo, hi})
	}
	s.mapped = slices.Replace(s.mapped, i, j, out...)
}

// mapBlock backs the need unmapped pages blk (taken for size bytes)
// touches: it first unmaps as many wholly free pages elsewhere (the
// highest first, so that the low addresses best fit prefers stay backed),
// then maps blk's. When the allocator is exhausted it unmaps every wholly
// free page and tries once more.
func (p *Pool) mapBlock(cat Category, blk *block, size, need int64) error {
	victims, n := p.freePages(need)
	if p.opts.Capacity > 0 && p.stats.Reserved.Current+(need-n)*p.page > p.opts.Capacity {
		p.stats.NumOOMs++
		return p.oom(cat, size, nil)
	}
	p.unmapPages(victims)
	err := p.mapPages(blk)
	if errors.Is(err, ErrExhausted) {
		if spans, _ := p.freePages(-1); len(spans) > 0 {
			p.unmapPages(spans)
			p.stats.CacheFlushes++
		}
		err = p.mapPages(blk)
	}
	if errors.Is(err, ErrExhausted) {
		p.stats.NumOOMs++
		return p.oom(cat, size, err)
	}
	if err != nil {
		return fmt.Errorf("memory: %s: mapping %s (%s): %w", p.allocator.Name(), FormatBytes(need*p.page), cat, err)
	}
	return nil
}

// freePages lists up to limit (all when negative) backed pages no live
// block touches, the newest heap and the highest pages first, and counts
// them. Such pages lie inside free blocks: a free block's neighbours are
// live, so the pages it shares with them are not wholly free.
func (p *Pool) freePages(limit int64) ([]pageSpan, int64) {
	var out []pageSpan
	var n int64
	for s := len(p.segments) - 1; s >= 0 && (limit < 0 || n < limit); s-- {
		seg := p.segments[s]
		if len(seg.mapped) == 0 {
			continue
		}
		start := len(out)
		for b := seg.first; b != nil; b = b.next {
			if !b.free {
				continue
			}
			lo, hi := (b.off+p.page-1)/p.page, (b.off+b.size)/p.page
			if lo >= hi {
				continue // no whole page
			}
			for _, r := range seg.mapped[seg.firstRun(lo):] {
				if r.lo >= hi {
					break
				}
				out = append(out, pageSpan{seg, pageRun{max(r.lo, lo), min(r.hi, hi)}})
			}
		}
		slices.Reverse(out[start:])
		for i := start; i < len(out); i++ {
			sp := &out[i]
			if limit >= 0 && n+sp.hi-sp.lo >= limit {
				sp.lo = sp.hi - (limit - n)
				n = limit
				out = out[:i+1]
				break
			}
			n += sp.hi - sp.lo
		}
	}
	return out, n
}

// unmapPages gives back the memory of spans, a call each.
func (p *Pool) unmapPages(spans []pageSpan) {
	for _, sp := range spans {
		p.pager.Unmap(sp.seg.store, sp.lo*p.page, (sp.hi-sp.lo)*p.page)
		sp.seg.setMapped(sp.lo, sp.hi, false)
		p.stats.PagesUnmapped += sp.hi - sp.lo
		p.stats.Reserved.add(-(sp.hi - sp.lo) * p.page)
	}
}

// mapPages backs blk's unmapped pages, a call per run of them.
func (p *Pool) mapPages(blk *block) error {
	seg := blk.seg
	lo, hi := p.pagesOf(blk)
	for lo < hi {
		gapHi := hi
		if i := seg.firstRun(lo); i < len(seg.mapped) && seg.mapped[i].lo < hi {
			if r := seg.mapped[i]; r.lo > lo {
				gapHi = r.lo
			} else {
				lo = r.hi // backed already
				continue
			}
		}
		if err := p.pager.Map(seg.store, lo*p.page, (gapHi-lo)*p.page); err != nil {
			return err
		}
		seg.setMapped(lo, gapHi, true)
		p.stats.PagesMapped += gapHi - lo
		p.stats.Reserved.add((gapHi - lo) * p.page)
		lo = gapHi
	}
	return nil
}

// ErrDoubleFree and ErrForeignBuffer are returned by Free for misuse.
var (
	ErrDoubleFree    = errors.New("memory: buffer freed twice")
	ErrForeignBuffer = errors.New("memory: buffer does not belong to this pool")
)

// Free returns b's block to the pool's cache. Freeing nil is a no-op.
func (p *Pool) Free(b *Buffer) error {
	if b == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.pool != p {
		return fmt.Errorf("%w (buffer of %d bytes, %s)", ErrForeignBuffer, b.size, b.cat)
	}
	if live, ok := p.live[b.id]; !ok || live != b {
		return fmt.Errorf("%w (buffer of %d bytes, %s)", ErrDoubleFree, b.size, b.cat)
	}
	if p.opts.OnFree != nil {
		p.opts.OnFree(b)
	}
	delete(p.live, b.id)
	if b.arena {
		a := p.arena
		i := slices.Index(a.live, span{b.blk.off, b.blk.off + b.size})
		a.live = slices.Delete(a.live, i, i+1)
	} else {
		p.release(b.blk)
	}
	if p.opts.Trace {
		p.trace = append(p.trace, TraceEvent{ID: b.id})
	}
	b.store, b.blk, b.live = nil, nil, false
	p.stats.NumFrees++
	p.stats.ActiveBuffers--
	p.stats.ByCategory[b.cat].add(-b.size)
	p.stats.Allocated.add(-b.size)
	p.record(b.cat, -b.size)
	return nil
}

// Mark is a point in a pool's allocation history (see FreeSince).
type Mark uint64

// Mark returns the current point in the allocation history.
func (p *Pool) Mark() Mark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Mark(p.nextID)
}

// FreeSince frees every live buffer of the given categories allocated after
// mark and returns how many it freed. It is for abandoning a failed step
// wholesale; the freed Buffers must not be used or freed again.
func (p *Pool) FreeSince(mark Mark, cats ...Category) int {
	p.mu.Lock()
	var doomed []*Buffer
	for id, b := range p.live {
		if id > uint64(mark) && slices.Contains(cats, b.cat) {
			doomed = append(doomed, b)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(doomed, func(a, b *Buffer) int { return cmp.Compare(a.id, b.id) })
	for _, b := range doomed {
		p.MustFree(b)
	}
	return len(doomed)
}

// MustFree frees b and panics on misuse; for code that owns b by construction.
func (p *Pool) MustFree(b *Buffer) {
	if err := p.Free(b); err != nil {
		panic(err)
	}
}

// EmptyCache gives every cached block back to the allocator: reserved drops
// to allocated (to the pages live buffers touch, when paged).
func (p *Pool) EmptyCache() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.emptyCacheLocked()
}

// Release gives back what EmptyCache does and the arena once no buffer
// lies in it: for an owner done with the pool (a trainer's Close). Memory
// mapped outside the Go heap (the CPU's arena and heaps) would otherwise
// wait for the garbage collector to find the pool unreachable, which a
// small Go heap may not ask of it before the next pool takes as much
// again. The pool stays usable: a later allocation takes memory anew.
func (p *Pool) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.emptyCacheLocked()
	if a := p.arena; a != nil && a.seg != nil && len(a.live) == 0 {
		p.allocator.Free(a.seg.store)
		p.stats.Reserved.add(-a.seg.size)
		a.seg = nil
	}
}

// flushLocked empties the cache to make room, counting it.
func (p *Pool) flushLocked() {
	if p.emptyCacheLocked() > 0 {
		p.stats.CacheFlushes++
	}
}

// emptyCacheLocked gives back every wholly free segment, or unmaps every
// wholly free page and releases the wholly free heaps, and returns the
// bytes given back.
func (p *Pool) emptyCacheLocked() int64 {
	var freed int64
	if p.pager != nil {
		spans, n := p.freePages(-1)
		p.unmapPages(spans)
		freed = n * p.page
	}
	kept := p.segments[:0]
	for _, seg := range p.segments {
		if b := seg.first; b.free && b.size == seg.size {
			p.removeFree(b)
			if seg.paged {
				p.pager.Release(seg.store)
				continue
			}
			p.allocator.Free(seg.store)
			freed += seg.size
			p.stats.Reserved.add(-seg.size)
			continue
		}
		kept = append(kept, seg)
	}
	clear(p.segments[len(kept):])
	p.segments = kept
	return freed
}

// freeOrder orders free blocks for best fit.
func freeOrder(a, b *block) int {
	if c := cmp.Compare(a.size, b.size); c != 0 {
		return c
	}
	if c := cmp.Compare(a.seg.id, b.seg.id); c != 0 {
		return c
	}
	return cmp.Compare(a.off, b.off)
}

func (p *Pool) insertFree(b *block) {
	b.free = true
	i, _ := slices.BinarySearchFunc(p.free, b, freeOrder)
	p.free = slices.Insert(p.free, i, b)
}

func (p *Pool) removeFree(b *block) {
	i, ok := slices.BinarySearchFunc(p.free, b, freeOrder)
	if !ok || p.free[i] != b {
		panic("memory: free block not in the free list")
	}
	p.free = slices.Delete(p.free, i, i+1)
	b.free = false
}

// takeFree takes the smallest free block of at least size bytes, splitting
// off the rest as a free block; nil if none is large enough.
func (p *Pool) takeFree(size int64) *block {
	i, _ := slices.BinarySearchFunc(p.free, &block{size: size, seg: &segment{}}, freeOrder)
	if i == len(p.free) {
		return nil
	}
	b := p.free[i]
	p.free = slices.Delete(p.free, i, i+1)
	b.free = false
	if rest := b.size - size; rest >= BlockRound {
		r := &block{seg: b.seg, off: b.off + size, size: rest, prev: b, next: b.next}
		if b.next != nil {
			b.next.prev = r
		}
		b.next, b.size = r, size
		p.insertFree(r)
	}
	return b
}

// release frees a live buffer's block, merged with its free neighbours.
func (p *Pool) release(b *block) {
	if n := b.next; n != nil && n.free {
		p.removeFree(n)
		absorb(b, n)
	}
	if q := b.prev; q != nil && q.free {
		p.removeFree(q)
		absorb(q, b)
		b = q
	}
	p.insertFree(b)
}

// absorb grows a over its next neighbour n, which leaves the segment.
func absorb(a, n *block) {
	a.size += n.size
	a.next = n.next
	if n.next != nil {
		n.next.prev = a
	}
}

// ResetPeak starts a new peak window: every peak becomes its current value.
func (p *Pool) ResetPeak() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Allocated.Peak = p.stats.Allocated.Current
	p.stats.Reserved.Peak = p.stats.Reserved.Current
	for c := range p.stats.ByCategory {
		p.stats.ByCategory[c].Peak = p.stats.ByCategory[c].Current
		p.stats.AtPeak[c] = p.stats.ByCategory[c].Current
	}
}

// CountRepeats adds to the call counts (allocations, frees, cache hits)
// what times more repeats of the calls made between two of the pool's
// statistics, from and to, would have added: a planner that skips the
// repeats of a sequence which leaves the pool's blocks as it found them
// (validation's full batches) keeps the statistics a run's, to the byte.
func (p *Pool) CountRepeats(from, to Stats, times int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.NumAllocs += times * (to.NumAllocs - from.NumAllocs)
	p.stats.NumFrees += times * (to.NumFrees - from.NumFrees)
	p.stats.CacheHits += times * (to.CacheHits - from.CacheHits)
}

// Stats is a snapshot of the pool's statistics.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func (p *Pool) record(cat Category, delta int64) {
	if !p.opts.Timeline {
		return
	}
	p.timeline = append(p.timeline, Event{
		At: time.Since(p.start), Category: cat, Delta: delta,
		Allocated: p.stats.Allocated.Current, Reserved: p.stats.Reserved.Current, Phase: p.phase,
	})
}

// TimelinePhase says which part of the work comes next (train: forward,
// backward, optimizer; "" when it is over), so that a timeline can be read
// against it: a timeline pool records the moment as an Event with Delta 0,
// and the allocations and frees after it carry the name. It is a label
// only, apart from BeginPhase: nothing is allocated, placed or counted
// differently.
func (p *Pool) TimelinePhase(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.opts.Timeline || name == p.phase {
		return
	}
	p.phase = name
	p.record(0, 0)
}

// Timeline returns the recorded events (nil unless Options.Timeline) and
// starts a new, empty timeline.
func (p *Pool) Timeline() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.timeline
	p.timeline = nil
	return t
}
