// Package memory is memunet's accounted allocator, caching or planned: the
// source of every buffer the trainer touches, on whatever memory it runs.
//
// Two layers, as in ggml (buffer type under gallocr) and tinygrad (an LRU
// cache over _alloc): an Allocator gives out and takes back raw blocks of
// one kind of memory (the CPU backend's host memory, a GPU's device memory,
// or Virtual: no memory at all, for planning); a Pool above it does
// everything else, the same for every kind. Each allocation names a Category
// (params, grads, optimizer, activations, workspace) so that statistics can
// be split the way a user reasons about a training step.
//
// Invariants:
//   - Sizes are rounded up to a multiple of BlockRound bytes, like PyTorch's
//     caching allocator; "allocated" counts rounded sizes, so every statistic
//     is an exact, deterministic function of the sequence of Alloc and Free
//     calls, whatever the allocator (a Virtual pool's statistics are a real
//     pool's, byte for byte). CountRepeats adds the counts of calls a
//     planner skipped because they would repeat a sequence exactly.
//   - A freed buffer's block stays cached, free, merged with free
//     neighbours; an allocation takes the smallest free block that holds it
//     and splits off the rest (Allocator.Slice).
//   - Over memory that pages (a Pager: a GPU's virtual memory, the host's
//     mmap), blocks lie in one heap of address space and reserved is the
//     bytes of its mapped pages. An allocation over unmapped pages first
//     moves the wholly free pages it needs (the highest first), then maps
//     new ones for the rest: reserved peaks at the most pages live buffers
//     touch at once, whatever the fragmentation. EmptyCache unmaps every
//     wholly free page.
//   - Over other memory, blocks lie in segments taken from the allocator.
//     A miss first gives back the wholly free segments (all too small for
//     it), then takes a segment of its size. EmptyCache gives back every
//     wholly free segment.
//   - With an ArenaPlan (Options.Arena, made by PlanArena from a dry run's
//     Trace), the pool takes one block of the plan's size at its first
//     allocation and places each planned allocation of the build and of each
//     phase (BeginPhase) at its offset, after checking that the range is not
//     in use; anything else goes to the caching pool, counted in
//     ArenaMisses.
//   - With a capacity, reserved bytes never exceed it: an allocation that
//     would pass it fails with *OutOfMemoryError (the wholly free segments
//     were given back, or the wholly free pages moved, first). An allocator
//     that runs out itself (ErrExhausted) gives the same error, with its
//     Cause, after the pool gave back what it had cached and tried again.
//   - Freeing a buffer twice, or a buffer from another pool, returns an error
//     and changes nothing.
//
// Ownership: whoever calls Alloc owns the Buffer and must Free it exactly
// once. A Buffer is an opaque handle: its contents are undefined after Alloc
// and only the backend that owns its allocator's kind of memory reads or
// writes them, through Storage (backend/cpu for host memory). A Pool is safe
// for concurrent use.
package memory
