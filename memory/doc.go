// Package memory is memunet's accounted caching allocator: the source of
// every buffer the trainer touches, on whatever memory it runs.
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
//     pool's, byte for byte).
//   - A freed buffer's block goes back to the pool's cache (still "reserved")
//     and is reused by the next allocation of the same rounded size.
//     EmptyCache gives cached blocks back to the allocator, so reserved falls
//     back to allocated.
//   - With a capacity, reserved bytes never exceed it: a cache miss that would
//     pass it first empties the cache and retries (as PyTorch does), then
//     fails with *OutOfMemoryError. An allocator that runs out itself
//     (ErrExhausted) gets the same retry and the same error, with its Cause.
//   - Freeing a buffer twice, or a buffer from another pool, returns an error
//     and changes nothing.
//
// Ownership: whoever calls Alloc owns the Buffer and must Free it exactly
// once. A Buffer is an opaque handle: its contents are undefined after Alloc
// and only the backend that owns its allocator's kind of memory reads or
// writes them, through Storage (backend/cpu for host memory). A Pool is safe
// for concurrent use.
package memory
