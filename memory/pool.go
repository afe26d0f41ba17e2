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
	store Storage // the allocator's block; nil once freed (and always in a virtual pool)
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
}

// Event is one point of the timeline: the pool's state right after an
// allocation (Delta > 0) or a free (Delta < 0).
type Event struct {
	At        time.Duration // since the pool was made
	Category  Category
	Delta     int64
	Allocated int64
	Reserved  int64
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
}

// Pool is a thread-safe caching allocator with exact accounting.
type Pool struct {
	mu        sync.Mutex
	allocator Allocator
	opts      Options
	start     time.Time
	nextID    uint64
	live      map[uint64]*Buffer
	cache     map[int64][]Storage // rounded size -> free blocks
	cached    int64               // bytes in cache
	stats     Stats
	timeline  []Event
}

// NewPool makes an empty pool over a: every block comes from a.Alloc and,
// once EmptyCache drops it, goes back through a.Free.
func NewPool(a Allocator, opts Options) *Pool {
	if opts.Capacity < 0 {
		panic("memory: negative capacity")
	}
	if a == nil {
		panic("memory: nil allocator")
	}
	return &Pool{
		allocator: a,
		opts:      opts,
		start:     time.Now(),
		live:      make(map[uint64]*Buffer),
		cache:     make(map[int64][]Storage),
		stats:     Stats{Capacity: opts.Capacity},
	}
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
	var store Storage
	if free := p.cache[size]; len(free) > 0 {
		store = free[len(free)-1]
		free[len(free)-1] = nil
		p.cache[size] = free[:len(free)-1]
		p.cached -= size
		p.stats.CacheHits++
	} else {
		if p.opts.Capacity > 0 && p.stats.Reserved.Current+size > p.opts.Capacity {
			p.flushLocked()
			if p.stats.Reserved.Current+size > p.opts.Capacity {
				p.stats.NumOOMs++
				return nil, &OutOfMemoryError{
					Requested:           size,
					Category:            cat,
					Capacity:            p.opts.Capacity,
					Free:                p.opts.Capacity - p.stats.Reserved.Current,
					Allocated:           p.stats.Allocated.Current,
					ReservedUnallocated: p.stats.Reserved.Current - p.stats.Allocated.Current,
				}
			}
		}
		var err error
		store, err = p.allocator.Alloc(size)
		if errors.Is(err, ErrExhausted) && p.cached > 0 {
			p.flushLocked()
			store, err = p.allocator.Alloc(size)
		}
		if errors.Is(err, ErrExhausted) {
			p.stats.NumOOMs++
			return nil, &OutOfMemoryError{
				Requested: size, Category: cat, Capacity: p.opts.Capacity,
				Free:      max(0, p.opts.Capacity-p.stats.Reserved.Current),
				Allocated: p.stats.Allocated.Current, ReservedUnallocated: p.stats.Reserved.Current - p.stats.Allocated.Current,
				Cause: fmt.Errorf("%s: %w", p.allocator.Name(), err),
			}
		}
		if err != nil {
			return nil, fmt.Errorf("memory: %s: allocating %s (%s): %w", p.allocator.Name(), FormatBytes(size), cat, err)
		}
		p.stats.Reserved.add(size)
	}
	p.nextID++
	b := &Buffer{pool: p, id: p.nextID, cat: cat, size: size, req: req, store: store, live: true}
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
	delete(p.live, b.id)
	p.cache[b.size] = append(p.cache[b.size], b.store)
	p.cached += b.size
	b.store, b.live = nil, false
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
// to allocated.
func (p *Pool) EmptyCache() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.emptyCacheLocked()
}

// flushLocked empties the cache to make room, counting it.
func (p *Pool) flushLocked() {
	if p.cached > 0 {
		p.stats.CacheFlushes++
	}
	p.emptyCacheLocked()
}

func (p *Pool) emptyCacheLocked() {
	if p.cached == 0 {
		return
	}
	for _, blocks := range p.cache {
		for _, s := range blocks {
			p.allocator.Free(s)
		}
	}
	clear(p.cache)
	p.stats.Reserved.add(-p.cached)
	p.cached = 0
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
		Allocated: p.stats.Allocated.Current, Reserved: p.stats.Reserved.Current,
	})
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
