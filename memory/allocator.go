package memory

import "errors"

// Storage is one block of an allocator's memory, opaque to everything but
// the backend that owns that kind of memory: a host backend's Go memory, a
// device pointer, or nil for the Virtual allocator.
type Storage any

// Allocator gives out and takes back raw blocks of one kind of memory. The
// Pool above it does the rest (rounding, caching, categories, statistics,
// capacity), so a new kind of memory writes only these methods.
type Allocator interface {
	// Name says which memory, e.g. "host", "virtual", "cuda:0".
	Name() string
	// Alloc returns a block of exactly bytes bytes (a multiple of
	// BlockRound, already rounded by the pool), contents undefined. When the
	// memory is exhausted the error wraps ErrExhausted: the pool then gives
	// its cached blocks back and tries once more.
	Alloc(bytes int64) (Storage, error)
	// Free gives back a block Alloc returned; the pool calls it once per
	// block, and only for blocks no buffer uses.
	Free(s Storage)
	// Slice is bytes bytes of block s from offset off (both multiples of
	// BlockRound, within s): the pool's buffers in part of a block.
	Slice(s Storage, off, bytes int64) Storage
}

// Pager is an Allocator whose memory can also be taken as address space
// first and backed page by page later, as CUDA's virtual memory management
// does (cuMemAddressReserve, then cuMemCreate and cuMemMap per page) and a
// host's mmap and mprotect. A pool over a Pager keeps one contiguous heap
// per reservation and backs only the pages its live buffers and cache need,
// so a freed range stops costing memory once its pages are wholly free,
// whatever its neighbours: see Pool.
type Pager interface {
	Allocator
	// PageSize is the granularity of Map and Unmap in bytes, a multiple of
	// BlockRound; 0 when this memory cannot be paged after all (the pool
	// then takes segments through Alloc).
	PageSize() int64
	// Reserve takes bytes of address space (a multiple of PageSize) with
	// no memory behind it: a block to Slice, Map and Unmap.
	Reserve(bytes int64) (Storage, error)
	// Map backs bytes bytes of s from off (both multiples of PageSize,
	// within s, not backed) with memory, contents undefined. When the
	// memory is exhausted the error wraps ErrExhausted.
	Map(s Storage, off, bytes int64) error
	// Unmap gives the memory behind a backed range of s back.
	Unmap(s Storage, off, bytes int64)
	// Release gives back address space Reserve took, nothing of it backed.
	Release(s Storage)
}

// ErrExhausted is wrapped by an Allocator's error when its memory is full.
var ErrExhausted = errors.New("memory exhausted")

// Virtual is the allocator of no memory: every block is nil. A pool over it
// keeps the exact statistics of the same sequence of allocations on real
// memory, which is how a step is planned without running it. With Page set
// it is a Pager of that page size, for planning on memory that pages (the
// planned device's PageSize); without, it takes segments.
type Virtual struct {
	Page int64
}

// Name is "virtual".
func (Virtual) Name() string { return "virtual" }

// Alloc returns a nil block.
func (Virtual) Alloc(bytes int64) (Storage, error) { return nil, nil }

// Free does nothing.
func (Virtual) Free(Storage) {}

// Slice is nil, as the block is.
func (Virtual) Slice(Storage, int64, int64) Storage { return nil }

// PageSize is v.Page: 0 for segments.
func (v Virtual) PageSize() int64 { return v.Page }

// Reserve returns a nil block.
func (Virtual) Reserve(int64) (Storage, error) { return nil, nil }

// Map does nothing.
func (Virtual) Map(Storage, int64, int64) error { return nil }

// Unmap does nothing.
func (Virtual) Unmap(Storage, int64, int64) {}

// Release does nothing.
func (Virtual) Release(Storage) {}
