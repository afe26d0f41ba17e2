// Package cpu is the host backend: buffers are host memory (HostAllocator,
// whose block type only this package can see inside), and every operation
// runs on all cores before it returns, on the backend's kernels.Team.
//
// On 64-bit Linux host memory pages as a GPU's virtual memory does: the
// caching pool's heap is address space (mmap, no access) whose 2 MiB pages
// it maps (mprotect) and gives back to the kernel (a fresh PROT_NONE mapping),
// so the process holds what the pool reports as reserved. Elsewhere, and
// for the arena, blocks are Go memory.
//
// The convolutions are the kernels of backend/cpu/kernels (a packed,
// cache-blocked SGEMM over an implicit im2col, AVX2 and AVX-512 assembly
// with a pure-Go fallback), run one image at a time with one image's
// workspace. fp16 and bf16 tensors are taken as they are by every family
// (Stages is false): a convolution widens its input as it pads it and
// keeps float32 weights and one image's output in its workspace; the norms
// widen in registers (kernels.AffineHalf and friends); pooling, upsampling
// and Add widen bands of rows, and the losses chunks of pixels, into a
// worker's scratch, which the backend keeps between calls (spare) so none
// is allocated once warm.
// Each gives the bits of the float32 operation on widened copies, rounded
// once (TestHalfOpsMatchStaging, TestHalfConvsMatchStaging). ReLU,
// concat/split, the metrics and Convert read the bit patterns directly.
// The norms sum in float64 (16 interleaved chains); the loss sums per
// sample in float64.
//
// A virtual buffer (the planner's) given to any operation here panics: that
// is how the seam test catches code that touches memory outside a backend.
// Each fast kernel has its naive reference beside it (kernels), and the
// whole backend passes backend/backendtest.
package cpu
