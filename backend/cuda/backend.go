package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// scratch layout: the backend's own device memory for reductions: in its
// first MiB, the step record and queue (record.go, queue.go) in the first
// 64 KiB, then the confusion counts (K*K uint64, K <= 256) or the loss
// gradient's coefficients; in its second,
// the segmented sums' partials (reduce.go: at most maxPartials of 16
// bytes; a loss's at most lossItems of 32, with a bad-target value per
// sample right after) and the coefficients their finish kernels leave for
// the pass that applies them (at most maxCoefs float32).
const (
	scratchBytes   = 2 << 20
	maxSamples     = 8192
	countsOffset   = 64 << 10
	maxCountsBytes = 1<<20 - countsOffset
	partialsOffset = 1 << 20
	maxPartials    = 1 << 15
	lossItems      = (16*maxPartials - 4*maxSamples) / 32
	coefOffset     = partialsOffset + 16*maxPartials
	maxCoefs       = (scratchBytes - coefOffset) / 4
)

// Backend is one CUDA device: see the package doc.
type Backend struct {
	drv           Driver
	scratch       uintptr
	overheadBytes atomic.Int64 // the context's: New's, and what a library keeps (library.go)
	syncLaunches  atomic.Bool
	tf32          atomic.Bool
	reduceGrid    atomic.Int64 // norm_sums's blocks; 0: defaultReduceGrid
	// What the host asked of the device (Counts): kernels launched,
	// blocking copies to the host, waits for all work.
	launched, copiesToHost, blockingUploads, syncs atomic.Int64

	mu       sync.Mutex
	err      error // the first error the device reported, returned by Sync and every call after it
	launches launchRing
	pending  []pendingCopy // copies on the copy stream the compute stream has not waited for
	conv     ConvProvider  // what cuda.conv resolved to (conv.go)

	lib convLibrary // the library computing the convolutions, if any (library.go)

	// The step queue's window (queue.go): the step count its bias
	// corrections start after, and how many it holds.
	queueBase, queueRows atomic.Int64

	staging staging // pinned buffers uploads pass through (upload.go)
}

var _ backend.Backend = (*Backend)(nil)

// New makes the backend of a device: it allocates the scratch area and
// records the device memory then in use as the context's overhead.
func New(drv Driver) (*Backend, error) {
	b := &Backend{drv: drv}
	b.syncLaunches.Store(os.Getenv(SyncLaunchesEnv) == "1")
	b.tf32.Store(true)
	var err error
	if b.scratch, err = drv.Alloc(scratchBytes); err != nil {
		return nil, fmt.Errorf("%s: allocating %d bytes of scratch: %w", drv.Name(), scratchBytes, err)
	}
	free, total, err := drv.MemInfo()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", drv.Name(), err)
	}
	b.overheadBytes.Store(total - free)
	return b, nil
}

// Name is the device, "cuda:N".
func (b *Backend) Name() string { return b.drv.Name() }

// Describe names the device (its name, compute capability, memory and
// driver, where the driver says them).
func (b *Backend) Describe() string {
	if d, ok := b.drv.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return b.drv.Name()
}

// DeviceMemory is the device's own view of its memory (cuMemGetInfo, as
// nvidia-smi reports it): bytes in use by every process, and in all.
func (b *Backend) DeviceMemory() (used, total int64, err error) {
	free, total, err := b.drv.MemInfo()
	return total - free, total, err
}

// ContextOverhead is the device memory in use once the backend was made,
// before any pool allocation: the context, memunet's modules and scratch,
// and whatever other processes held then; and what a convolution library
// keeps (OpenConvLibrary: cuDNN's handle and the kernels its Find loads).
func (b *Backend) ContextOverhead() int64 { return b.overheadBytes.Load() }

// Allocator is the device's memory.
func (b *Backend) Allocator() memory.Allocator { return Allocator{b} }

// SetSyncLaunches makes the backend wait for the device after every kernel
// launch (config key cuda.sync_launches, or MEMUNET_CUDA_SYNC=1), so that
// a fault is reported by the kernel that caused it rather than by a later
// operation; slower, for finding faults.
func (b *Backend) SetSyncLaunches(on bool) { b.syncLaunches.Store(on) }

// SetTF32 chooses how fp32 convolutions multiply (config key cuda.tf32):
// on the tensor cores with operands rounded to TF32 (10 mantissa bits),
// as PyTorch's cuDNN convolutions do by default, or, off, exactly in fp32
// on the CUDA cores (slower). On by default.
func (b *Backend) SetTF32(on bool) { b.tf32.Store(on) }

// ConvTF32 reports whether fp32 convolutions round their operands to TF32
// (SetTF32), for tests that hold them to TF32's tolerance.
func (b *Backend) ConvTF32() bool { return b.tf32.Load() }

// Counts are the kernels launched, the blocking copies to the host, the
// uploads that were not staged (upload.go) and the waits for all work
// (Sync) since the backend was made; a step's are the difference.
func (b *Backend) Counts() backend.WorkCounts {
	return backend.WorkCounts{Launches: b.launched.Load(), CopiesToHost: b.copiesToHost.Load(),
		BlockingUploads: b.blockingUploads.Load(), Syncs: b.syncs.Load()}
}

// Sync waits for every operation issued so far and returns the first error
// the device reported (a *FaultError).
func (b *Backend) Sync() error {
	if err := b.failed(); err != nil {
		return err
	}
	b.syncs.Add(1)
	b.finish("Sync", b.drv.Sync())
	if b.failed() == nil {
		b.mu.Lock()
		done := b.pending
		b.pending = nil
		b.mu.Unlock()
		for _, c := range done {
			b.fail("cuEventDestroy", b.drv.ReleaseEvent(c.done))
		}
		b.staging.forget(b)
	}
	return b.failed()
}

// failed is the first error the device reported, nil while there is none.
func (b *Backend) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// finish records the outcome of a call that waits for the device's work:
// every launch before it finished, or the first error (see fail).
func (b *Backend) finish(what string, err error) {
	if err == nil {
		b.mu.Lock()
		b.launches.finished = b.launches.issued
		b.mu.Unlock()
		return
	}
	b.fail(what, err)
}

// fail keeps the first error the device reports, with the launches it had
// not finished then (a CUDA context is unusable after a fault: every later
// call returns it, and the backend issues nothing more).
func (b *Backend) fail(what string, err error) {
	if err != nil {
		b.record(&FaultError{Device: b.Name(), Op: what, Err: err})
	}
}

// record keeps f if it is the first error; one that does not name its
// kernel gets the launches the device had not finished.
func (b *Backend) record(f *FaultError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return
	}
	if f.Kernel == "" {
		f.Pending, f.Unlisted = b.launches.pending()
	}
	b.err = f
}

// Allocator gives out device memory.
type Allocator struct{ b *Backend }

// deviceBlock is the Storage of a device buffer; its type is this package's
// own, so only the CUDA backend sees inside a buffer.
type deviceBlock struct {
	ptr   uintptr
	bytes int64
}

// Name is the device, "cuda:N".
func (a Allocator) Name() string { return a.b.Name() }

// Alloc is the driver's (cuMemAlloc); a full device's error wraps
// memory.ErrExhausted, so the pool empties its cache and retries, then
// reports its out-of-memory error with this cause.
func (a Allocator) Alloc(bytes int64) (memory.Storage, error) {
	p, err := a.b.drv.Alloc(bytes)
	if err != nil {
		if errors.Is(err, ErrDeviceFull) {
			free, total, _ := a.b.drv.MemInfo()
			return nil, fmt.Errorf("cuMemAlloc of %s on %s (%s free of %s): %w", memory.FormatBytes(bytes), a.b.Name(),
				memory.FormatBytes(free), memory.FormatBytes(total), memory.ErrExhausted)
		}
		return nil, fmt.Errorf("cuMemAlloc of %s on %s: %w", memory.FormatBytes(bytes), a.b.Name(), err)
	}
	return &deviceBlock{ptr: p, bytes: bytes}, nil
}

// Free is the driver's (cuMemFree), once no copy on the copy stream uses
// the memory any more.
func (a Allocator) Free(s memory.Storage) {
	blk := s.(*deviceBlock)
	a.b.awaitCopies(devicePtr{blk.ptr, blk.bytes})
	a.b.fail("cuMemFree", a.b.drv.Free(blk.ptr))
}

var _ memory.Pager = Allocator{}

// PageSize is the driver's page where it maps pages (Pager), else 0: the
// pool then takes segments (cuMemAlloc).
func (a Allocator) PageSize() int64 {
	if pg, ok := a.b.drv.(Pager); ok {
		return pg.Granularity()
	}
	return 0
}

// Reserve is the driver's (cuMemAddressReserve).
func (a Allocator) Reserve(bytes int64) (memory.Storage, error) {
	p, err := a.b.drv.(Pager).Reserve(bytes)
	if err != nil {
		return nil, fmt.Errorf("cuMemAddressReserve of %s on %s: %w", memory.FormatBytes(bytes), a.b.Name(), err)
	}
	return &deviceBlock{ptr: p, bytes: bytes}, nil
}

// Map is the driver's (cuMemCreate and cuMemMap); a full device's error
// wraps memory.ErrExhausted, as Alloc's does.
func (a Allocator) Map(s memory.Storage, off, bytes int64) error {
	err := a.b.drv.(Pager).Map(s.(*deviceBlock).ptr+uintptr(off), bytes)
	if errors.Is(err, ErrDeviceFull) {
		free, total, _ := a.b.drv.MemInfo()
		return fmt.Errorf("cuMemCreate of %s on %s (%s free of %s): %w", memory.FormatBytes(bytes), a.b.Name(),
			memory.FormatBytes(free), memory.FormatBytes(total), memory.ErrExhausted)
	}
	if err != nil {
		return fmt.Errorf("cuMemMap of %s on %s: %w", memory.FormatBytes(bytes), a.b.Name(), err)
	}
	return nil
}

// Unmap is the driver's (cuMemUnmap, after the device finished its work).
func (a Allocator) Unmap(s memory.Storage, off, bytes int64) {
	a.b.fail("cuMemUnmap", a.b.drv.(Pager).Unmap(s.(*deviceBlock).ptr+uintptr(off), bytes))
}

// Release is the driver's (cuMemAddressFree).
func (a Allocator) Release(s memory.Storage) {
	blk := s.(*deviceBlock)
	a.b.fail("cuMemAddressFree", a.b.drv.(Pager).Release(blk.ptr, blk.bytes))
}

// Slice is the device memory of s from byte off.
func (a Allocator) Slice(s memory.Storage, off, bytes int64) memory.Storage {
	blk := s.(*deviceBlock)
	if off < 0 || off+bytes > blk.bytes {
		panic(fmt.Sprintf("backend/cuda: slice [%d, %d) of a %d-byte block", off, off+bytes, blk.bytes))
	}
	return &deviceBlock{ptr: blk.ptr + uintptr(off), bytes: bytes}
}

// ptr is the device address of v's first value with v's extent (0 for
// none); it panics for a view of another kind of memory, of another type or
// out of bounds.
func ptr(v backend.View, dt backend.DType) devicePtr {
	if v.None() {
		return devicePtr{}
	}
	if v.DT != dt {
		panic(fmt.Sprintf("backend/cuda: %v where %s values are needed", v, dt))
	}
	return anyPtr(v)
}

// anyPtr is ptr for a view of any type.
func anyPtr(v backend.View) devicePtr {
	blk, ok := v.Buf.Storage().(*deviceBlock)
	if !ok {
		panic(fmt.Sprintf("backend/cuda: a buffer of %s memory is not on the GPU", v.Buf.Allocator().Name()))
	}
	return devicePtr{blk.ptr + uintptr(offset(v, blk.bytes)), int64(v.Bytes())}
}

// scratchPtr is bytes of the backend's scratch area from byte off.
func (b *Backend) scratchPtr(off, bytes int) devicePtr {
	return devicePtr{b.scratch + uintptr(off), int64(bytes)}
}

// offset is v's first byte in its buffer of bytes bytes; it panics for a
// view that does not lie inside.
func offset(v backend.View, bytes int64) int64 {
	size := int64(v.DT.Size())
	if v.Off < 0 || v.Len < 0 || (int64(v.Off)+int64(v.Len))*size > bytes {
		panic(fmt.Sprintf("backend/cuda: %v lies outside its buffer of %d bytes", v, bytes))
	}
	return int64(v.Off) * size
}

// floatPtr is the address of a view of any float type.
func floatPtr(v backend.View) devicePtr {
	if v.DT == backend.Uint8 {
		panic(fmt.Sprintf("backend/cuda: %v where float values are needed", v))
	}
	return anyPtr(v)
}

// launch runs k over n elements (grid-stride kernels: enough blocks for n,
// at most 1<<20).
func (b *Backend) launch(k Kernel, n int, args ...any) {
	if n <= 0 {
		return
	}
	b.launchGrid(k, min((n+BlockThreads-1)/BlockThreads, 1<<20), 1, args...)
}

// launchGrid runs k on gx*gy blocks, each argument as 64 bits (see
// launchArgs), and records the launch for a fault's report; with sync
// launches it waits for the kernel, so a fault names it. Nothing is
// launched once the device has reported an error.
func (b *Backend) launchGrid(k Kernel, gx, gy int, args ...any) {
	if gx <= 0 || gy <= 0 || b.failed() != nil {
		return
	}
	vals, extents := launchArgs(k, args)
	b.order(pointers(args)...)
	rec := launchRecord{kernel: k, gx: gx, gy: gy, args: args}
	runtime.Callers(2, rec.caller[:])
	b.mu.Lock()
	b.launches.add(rec)
	b.mu.Unlock()
	var err error
	if c, ok := b.drv.(CheckedLauncher); ok {
		err = c.LaunchChecked(k, gx, gy, vals, extents)
	} else {
		err = b.drv.Launch(k, gx, gy, vals)
	}
	if err == nil {
		b.launched.Add(1)
	}
	if err == nil && b.syncLaunches.Load() {
		if err = b.drv.Sync(); err != nil {
			b.record(&FaultError{Device: b.Name(), Op: k.String(), Kernel: rec.String(), Err: err})
			return
		}
		b.finish(k.String(), nil)
	}
	b.fail(k.String(), err)
}

// memsetD32 sets n 32-bit words at p.
func (b *Backend) memsetD32(p devicePtr, v uint32, n int) {
	if n > 0 && b.failed() == nil {
		b.order(p)
		b.fail("memset", b.drv.MemsetD32(p.addr, v, int64(n)))
	}
}

// fetch downloads n bytes at p, after the work before it: the device's
// first error instead where it has reported one (the bytes would be
// garbage).
func (b *Backend) fetch(p devicePtr, n int) ([]byte, error) {
	out := make([]byte, n)
	if n == 0 {
		return out, b.failed()
	}
	if err := b.failed(); err != nil {
		return nil, err
	}
	b.order(p)
	b.copiesToHost.Add(1)
	b.finish("reading a result", b.drv.CopyDtoH(out, p.addr))
	if err := b.failed(); err != nil {
		return nil, err
	}
	return out, nil
}
