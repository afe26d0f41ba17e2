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

// ErrExhausted is wrapped by an Allocator's error when its memory is full.
var ErrExhausted = errors.New("memory exhausted")

// Virtual is the allocator of no memory: every block is nil. A pool over it
// keeps the exact statistics of the same sequence of allocations on real
// memory, which is how a step is planned without running it.
type Virtual struct{}

// Name is "virtual".
func (Virtual) Name() string { return "virtual" }

// Alloc returns a nil block.
func (Virtual) Alloc(bytes int64) (Storage, error) { return nil, nil }

// Free does nothing.
func (Virtual) Free(Storage) {}

// Slice is nil, as the block is.
func (Virtual) Slice(Storage, int64, int64) Storage { return nil }
