// Package memory is memunet's accounted caching allocator: the stand-in for a
// device's memory, and the source of every buffer the trainer touches.
//
// A Pool hands out Buffers of float32, 16-bit or byte storage. Each allocation
// names a Category (params, grads, optimizer, activations, workspace) so that
// statistics can be split the way a user reasons about a training step.
//
// Invariants:
//   - Sizes are rounded up to a multiple of BlockRound bytes, like PyTorch's
//     caching allocator; "allocated" counts rounded sizes, so every statistic is an
//     exact, deterministic function of the sequence of Alloc and Free calls.
//   - A freed buffer's block goes back to the pool's cache (still "reserved") and
//     is reused by the next allocation of the same rounded size. EmptyCache drops
//     cached blocks, so reserved falls back to allocated.
//   - With a capacity, reserved bytes never exceed it: a cache miss that would
//     pass it first empties the cache and retries (as PyTorch does), then fails
//     with *OutOfMemoryError.
//   - Freeing a buffer twice, or a buffer from another pool, returns an error and
//     changes nothing.
//
// Ownership: whoever calls Alloc owns the Buffer and must Free it exactly once.
// A Buffer's contents are undefined after Alloc (use AllocZeroed for zeros) and
// its slices must not be used after Free. A Pool is safe for concurrent use.
package memory
