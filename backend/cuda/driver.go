package cuda

import (
	"errors"
	"time"
	"unsafe"
)

// Driver is what the backend needs of a CUDA device: memory, copies and
// kernel launches on its compute stream (the default stream), offload
// copies on its copy stream, and events to order the two. Pointers are
// device addresses. The real one is backend/cuda/driverapi's (the gpu build);
// backend/cuda/emu runs the same kernels on the host, to test the backend
// where there is no GPU.
type Driver interface {
	// Name is the device, e.g. "cuda:0".
	Name() string
	// Alloc returns bytes of device memory; an error wrapping
	// ErrDeviceFull when the device has not that much free.
	Alloc(bytes int64) (uintptr, error)
	Free(p uintptr) error
	// AllocHost returns bytes of pinned host memory (cuMemHostAlloc), which
	// the device copies to and from directly; FreeHost gives it back.
	AllocHost(bytes int64) (unsafe.Pointer, error)
	FreeHost(p unsafe.Pointer) error
	// Launch runs kernel k on gx*gy blocks of BlockThreads threads, each
	// argument 64 bits (pointers, int64, float64 bits).
	Launch(k Kernel, gx, gy int, args []uint64) error
	MemsetD32(p uintptr, v uint32, n int64) error
	MemsetD16(p uintptr, v uint16, n int64) error
	CopyHtoD(dst uintptr, src []byte) error
	CopyDtoH(dst []byte, src uintptr) error
	CopyDtoD(dst, src uintptr, n int64) error
	// CopyToDeviceAsync and CopyToHostAsync copy n bytes between device
	// memory and pinned host memory (AllocHost's) on the copy stream: they
	// return at once, and the copy runs when the copy stream reaches it.
	CopyToDeviceAsync(dst uintptr, src unsafe.Pointer, n int64) error
	CopyToHostAsync(dst unsafe.Pointer, src uintptr, n int64) error
	// Record returns an event that happens once the work issued on stream
	// s so far has finished (cuEventRecord).
	Record(s Stream) (Event, error)
	// WaitEvent makes the work issued on stream s from now on wait until
	// e has happened (cuStreamWaitEvent); the host does not wait.
	WaitEvent(s Stream, e Event) error
	// EventDone reports whether e has happened, without waiting.
	EventDone(e Event) (bool, error)
	// EventSync waits on the host until e has happened.
	EventSync(e Event) error
	// EventTime is the device's time from event from to event to, waiting
	// until both have happened (cuEventElapsedTime).
	EventTime(from, to Event) (time.Duration, error)
	// ReleaseEvent gives e back (it still happens, if it has not).
	ReleaseEvent(e Event) error
	// Sync waits for everything issued, on both streams.
	Sync() error
	// MemInfo is the device's free and total memory (cuMemGetInfo).
	MemInfo() (free, total int64, err error)
}

// Stream is one of a device's two queues of work: each runs its work in
// the order issued, and only events order one against the other.
type Stream uint8

const (
	// ComputeStream runs the kernels, memsets and synchronous copies (the
	// default stream).
	ComputeStream Stream = iota
	// CopyStream runs the offload copies, beside the compute stream.
	CopyStream
)

func (s Stream) String() string {
	if s == CopyStream {
		return "copy stream"
	}
	return "compute stream"
}

// Event marks a point in one stream's work (Driver.Record): it happens
// once the work issued on that stream before it has finished.
type Event uintptr

// Pager is a Driver whose device maps memory page by page (CUDA's virtual
// memory management: cuMemAddressReserve, cuMemCreate, cuMemMap): the
// caching pool then keeps one heap of address space and backs only the
// pages it uses (memory.Pager).
type Pager interface {
	// Granularity is the page in bytes (cuMemGetAllocationGranularity),
	// 0 when the device cannot map pages.
	Granularity() int64
	// Reserve takes bytes of address space, aligned to a page.
	Reserve(bytes int64) (uintptr, error)
	// Map backs [p, p+bytes), whole pages, with device memory, all or
	// nothing: an error wrapping ErrDeviceFull when the device has not that
	// much free.
	Map(p uintptr, bytes int64) error
	// Unmap gives the pages' memory back, once the device has finished
	// everything issued (a queued kernel may still read them).
	Unmap(p uintptr, bytes int64) error
	// Release gives back address space Reserve took, nothing of it mapped.
	Release(p uintptr, bytes int64) error
}

// ErrDeviceFull is wrapped by Driver.Alloc's error when the device is out
// of memory.
var ErrDeviceFull = errors.New("device memory exhausted")

// BlockThreads is every kernel's block size (ops.cu's RED_THREADS, gemm.cu's
// 256 threads per 64x64 tile).
const BlockThreads = 256
