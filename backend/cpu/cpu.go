package cpu

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
	"github.com/memunet/memunet/memory"
)

// CPU is the host backend: buffers are Go memory, operations run on every
// core (on the backend's kernels.Team) and return when done.
type CPU struct {
	team *kernels.Team
	// spare holds the workers' fp32 scratch for widened 16-bit values
	// (*[]float32) between operations, so they allocate nothing once warm.
	spare *sync.Pool
}

var _ backend.Backend = CPU{}

// New returns the CPU backend with a team of workers of its own.
func New() CPU { return CPU{team: kernels.NewTeam(), spare: new(sync.Pool)} }

// Name is "cpu".
func (CPU) Name() string { return "cpu" }

// LoopWait is how long the calling thread has waited at the ends of the
// parallel loops for the team's other workers (kernels.Team.Waited).
func (c CPU) LoopWait() time.Duration { return c.team.Waited() }

// Allocator is host memory.
func (CPU) Allocator() memory.Allocator { return HostAllocator{} }

// Sync returns nil: every operation has finished when it returns.
func (CPU) Sync() error { return nil }

// Stages reports false: every family takes 16-bit tensors as they are. The
// norms widen them in registers, pooling, upsampling and Add in bands of
// rows, the losses in chunks of pixels, the convolutions as they pad their
// input (values, conv.go), each with the bits staging would give.
func (CPU) Stages(op backend.Op, dt backend.DType) bool { return false }

// HostAllocator gives out Go memory in blocks of float32 words (blocks are
// multiples of memory.BlockRound bytes), so every view of a block is
// aligned for its type.
type HostAllocator struct{}

// hostBlock is the Storage of a host buffer; its type is this package's
// own, so only the CPU backend sees inside a buffer. A block of a paged
// heap (Reserve) keeps its heap reachable, so the heap's cleanup cannot
// run while a buffer in it can still be used.
type hostBlock struct {
	words []float32
	heap  *hostHeap
}

var _ memory.Pager = HostAllocator{}

// Name is "host".
func (HostAllocator) Name() string { return "host" }

// Alloc makes a zeroed block (the pool promises no contents, and a cached
// block comes back dirty): a large one (the planned arena) mapped outside
// the Go heap where the host pages (allocMapped), since the garbage
// collector lets its heap grow to about twice what it holds live and a
// heap of little more than the arena would reach nearly twice the plan;
// a small one, or any on other systems, Go memory.
func (HostAllocator) Alloc(bytes int64) (memory.Storage, error) {
	if blk, ok, err := allocMapped(bytes); ok || err != nil {
		return blk, err
	}
	return &hostBlock{words: make([]float32, bytes/4)}, nil
}

// Free unmaps a mapped block, and leaves Go memory to the garbage
// collector.
func (HostAllocator) Free(s memory.Storage) {
	b := s.(*hostBlock)
	if b.heap != nil && b.heap.whole {
		freeMapped(b)
	}
	b.words = nil
}

// Slice is the words of s from byte off, sharing its memory.
func (HostAllocator) Slice(s memory.Storage, off, bytes int64) memory.Storage {
	h := s.(*hostBlock)
	return &hostBlock{words: h.words[off/4 : (off+bytes)/4 : (off+bytes)/4], heap: h.heap}
}

// words is b's memory; it panics for a buffer that is not host memory (a
// virtual pool's buffer given to the CPU backend, say).
func words(b *memory.Buffer) []float32 {
	h, ok := b.Storage().(*hostBlock)
	if !ok {
		panic(fmt.Sprintf("backend/cpu: a buffer of %s memory has no host memory to compute on", b.Allocator().Name()))
	}
	return h.words
}

func checkView(v backend.View, dt backend.DType) {
	if v.DT != dt {
		panic(fmt.Sprintf("backend/cpu: %v where %s values are needed", v, dt))
	}
	if v.Off < 0 || v.Len < 0 || int64(v.Off+v.Len)*int64(dt.Size()) > v.Buf.Len() {
		panic(fmt.Sprintf("backend/cpu: %v lies outside its buffer of %d bytes", v, v.Buf.Len()))
	}
}

// f32 is an fp32 view's values (nil for none).
func f32(v backend.View) []float32 {
	if v.None() {
		return nil
	}
	checkView(v, backend.Float32)
	return words(v.Buf)[v.Off : v.Off+v.Len]
}

// u16 is a 16-bit view's bit patterns.
func u16(v backend.View) []uint16 {
	if !v.DT.Half() {
		panic(fmt.Sprintf("backend/cpu: %v where 16-bit values are needed", v))
	}
	checkView(v, v.DT)
	w := words(v.Buf)
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(w))), 2*len(w))[v.Off : v.Off+v.Len]
}

// u8 is a byte view's values (nil for none).
func u8(v backend.View) []byte {
	if v.None() {
		return nil
	}
	checkView(v, backend.Uint8)
	return bytesOf(v)
}

// bytesOf is any view's memory as bytes.
func bytesOf(v backend.View) []byte {
	checkView(v, v.DT)
	w := words(v.Buf)
	size := v.DT.Size()
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 4*len(w))[v.Off*size : (v.Off+v.Len)*size]
}
