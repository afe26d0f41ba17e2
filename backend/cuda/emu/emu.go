//go:build cudaemu

// Package emu runs backend/cuda's kernels on the host, as a sanitizer: the
// .cu sources compiled as C++ against a small CUDA shim (cudashim.h), and
// device memory as host memory (C.malloc; a reservation of pages is host
// address space mapped page by page, so a kernel that touches an unmapped
// page faults). It is a Driver, so the CUDA backend's Go code and its
// kernels' arithmetic and indexing are tested, with the backend
// conformance suite, on a machine without a GPU; and it finds what a GPU
// would only sometimes show:
//   - a launch's blocks start in a shuffled order (seeded: MEMUNET_EMU_SEED,
//     default 1, and the launch's number), two at a time
//     (MEMUNET_EMU_WORKERS), each block's 256 threads as fibers on one OS
//     thread, switching at __syncthreads;
//   - every global access is checked against the extent of the launch
//     argument it derives from (the view, not the buffer around it), and a
//     byte written by one block and written or read by another in the same
//     launch is a race (atomics excepted);
//   - every shared word records its last writer and readers since the last
//     __syncthreads: a read of a word another thread wrote, two writes, a
//     write after another thread's read, and a read of a word never
//     written are races.
//
// Each violation is reported with the kernel, block, thread and offset,
// and, as a GPU's fault is, the error is sticky: the launch returns, and
// every later launch, copy and Sync returns it. The tests' planted kernels
// (planted.cpp) show each check at work.
//
// It is for tests only (go test -tags cudaemu ./backend/cuda/emu: cgo and
// g++ with C++20; no CUDA toolkit, no driver). Its own tag, not gpu: a gpu
// build's device is the real one.
package emu

/*
#cgo CXXFLAGS: -std=c++20 -O2 -Wno-unused-function
#cgo LDFLAGS: -lstdc++ -lpthread -lm
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef struct {
	uint64_t addr;
	int64_t bytes;
	int arg;
} emu_extent;
void emu_ops(int k, const uint64_t *a);
void emu_gemm(int k, const uint64_t *a);
void emu_tc(int k, const uint64_t *a);
void emu_planted(int k, const uint64_t *a);
long long emu_run(void (*kernel)(int, const uint64_t *), int k, const char *name, const uint64_t *args,
		  const emu_extent *extents, int nextents, int checked, int gx, int gy, uint64_t seed, int workers,
		  char *out, int outlen);
// The dispatch of each kernel file (cuda.ModuleName), in order, then the planted kernels'.
static void (*const emu_modules[])(int, const uint64_t *) = {emu_ops, emu_gemm, emu_tc, emu_planted};
enum { EMU_MODULES = 3, EMU_PLANTED = 3 };
static long long emu_launch(int module, int k, const char *name, const uint64_t *args, const emu_extent *extents,
			    int nextents, int checked, int gx, int gy, uint64_t seed, int workers, char *out, int outlen) {
	return emu_run(emu_modules[module], k, name, args, extents, nextents, checked, gx, gy, seed, workers, out, outlen);
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/memunet/memunet/backend/cuda"
)

// Device is an emulated GPU with total bytes of memory and, when page is
// set, virtual memory management in pages of that size (cuda.Pager).
type Device struct {
	total   int64
	page    int64
	seed    uint64
	workers int

	mu       sync.Mutex
	used     int64
	blocks   map[uintptr]block
	heaps    map[uintptr]*heap
	launches uint64
	fault    error // the first violation: every later launch, copy and Sync returns it
	planted  map[cuda.Kernel]Planted
	streams  streams
}

// block is one allocation: C memory, so it never moves.
type block struct {
	p     unsafe.Pointer
	bytes int64
}

var _ cuda.Driver = (*Device)(nil)

// Page is an emulated device's page: 2 MiB, the CUDA driver's mapping
// granularity on every GPU so far.
const Page = 2 << 20

// New returns an emulated device of total bytes, mapping pages of Page.
func New(total int64) *Device { return NewPaged(total, Page) }

// NewPaged returns an emulated device of total bytes mapping pages of page
// bytes, or none when page is 0 (the pool then takes segments).
func NewPaged(total, page int64) *Device {
	return &Device{total: total, page: page, seed: envInt("MEMUNET_EMU_SEED", 1), workers: int(envInt("MEMUNET_EMU_WORKERS", 2)),
		blocks: map[uintptr]block{}, heaps: map[uintptr]*heap{}, planted: map[cuda.Kernel]Planted{}}
}

// envInt is the environment's value of name as an integer, else def.
func envInt(name string, def uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

// SetWorkers sets how many blocks run at once (at least 1; the emulator's
// worker threads are the most any device asked for). With one, a launch
// runs the same way every time for a seed.
func (d *Device) SetWorkers(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.workers = max(1, n)
}

// SetSeed sets the seed of the blocks' and threads' order (the same seed,
// the same order).
func (d *Device) SetSeed(seed uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seed = seed
}

// Backend is cuda.New on an emulated device of total bytes.
func Backend(total int64) (*cuda.Backend, error) { return cuda.New(New(total)) }

func (d *Device) Name() string     { return "cuda:emu" }
func (d *Device) Describe() string { return "cuda:emu (memunet's kernels on the host)" }

func (d *Device) Alloc(bytes int64) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.used+bytes > d.total {
		return 0, fmt.Errorf("emulated device: %d bytes in use of %d: %w", d.used, d.total, cuda.ErrDeviceFull)
	}
	p := C.malloc(C.size_t(max(bytes, 1)))
	if p == nil {
		return 0, fmt.Errorf("emulated device: malloc of %d bytes failed", bytes)
	}
	d.used += bytes
	d.blocks[uintptr(p)] = block{p, bytes}
	return uintptr(p), nil
}

func (d *Device) Free(p uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.blocks[p]
	if !ok {
		return fmt.Errorf("emulated device: free of %#x, which is not allocated", p)
	}
	d.freeLocked("cuMemFree", p, b.bytes, false)
	delete(d.blocks, p)
	d.used -= b.bytes
	C.free(b.p)
	return nil
}

// Launch runs kernel k without extents: its pointers are not checked.
func (d *Device) Launch(k cuda.Kernel, gx, gy int, args []uint64) error {
	return d.LaunchChecked(k, gx, gy, args, nil)
}

var _ cuda.CheckedLauncher = (*Device)(nil)

// LaunchChecked runs kernel k on gx*gy blocks, checking every access
// through pointer argument i against extents[i]; each extent must lie in
// one allocation. A violation becomes the device's sticky fault.
func (d *Device) LaunchChecked(k cuda.Kernel, gx, gy int, args []uint64, extents []cuda.Extent) error {
	module, index, name := k.Module(), int(k), k.String()
	d.mu.Lock()
	p, ok := d.planted[k]
	d.mu.Unlock()
	if ok {
		module, index, name = C.EMU_PLANTED, int(p), p.String()+" (in place of "+k.String()+")"
		if p.tensorCore() {
			if k < cuda.KTcConvTf32 || k > cuda.KTcWgrad16 {
				return fmt.Errorf("emulated device: planted bug %s runs in place of a tensor-core kernel, not %s", p, k)
			}
			index |= int(k-cuda.KTcConvTf32) << 8 // planted.cpp's planted_tc::run
		}
	}
	return d.run(module, index, name, gx, gy, args, extents)
}

// run is one launch of kernel index of module.
func (d *Device) run(module, index int, name string, gx, gy int, args []uint64, extents []cuda.Extent) error {
	d.mu.Lock()
	if d.fault != nil {
		defer d.mu.Unlock()
		return d.fault
	}
	d.launches++
	seed, launch, workers := d.seed, d.launches, d.workers
	var ext []C.emu_extent
	for i, e := range extents {
		if e.Bytes <= 0 {
			continue
		}
		if _, err := d.pointerLocked(e.Addr, e.Bytes); err != nil {
			d.fault = fmt.Errorf("emulated device: kernel %s, argument %d: %w", name, i, err)
			d.mu.Unlock()
			return nil // a GPU reports it later, as an illegal address
		}
		d.raceLocked(fmt.Sprintf("kernel %s, argument %d,", name, i), e.Addr, e.Bytes)
		ext = append(ext, C.emu_extent{addr: C.uint64_t(e.Addr), bytes: C.int64_t(e.Bytes), arg: C.int(i)})
	}
	if d.fault != nil {
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var out [4096]C.char
	var argp *C.uint64_t
	if len(args) > 0 {
		argp = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	var extp *C.emu_extent
	if len(ext) > 0 {
		extp = &ext[0]
	}
	checked := C.int(0)
	if extents != nil {
		checked = 1
	}
	n := C.emu_launch(C.int(module), C.int(index), cname, argp, extp, C.int(len(ext)), checked, C.int(gx), C.int(gy),
		C.uint64_t(mixSeed(seed, launch)), C.int(workers), &out[0], C.int(len(out)))
	if n > 0 {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.fault == nil {
			d.fault = fmt.Errorf("emulated device: %d violation(s) in launch %d (MEMUNET_EMU_SEED=%d): %s", int64(n), launch, seed,
				strings.ReplaceAll(strings.TrimSpace(C.GoString(&out[0])), "\n", "; "))
		}
	}
	return nil
}

// The emulator dispatches to each kernel file (emu_modules): all of them.
var _ [C.EMU_MODULES - cuda.NumModules]int
var _ [cuda.NumModules - C.EMU_MODULES]int

// plantedModule is planted.cpp's dispatch, for planted.go (cgo's names are
// only this file's).
const plantedModule = C.EMU_PLANTED

// mixSeed is launch number n's seed from the device's (splitmix64).
func mixSeed(seed, n uint64) uint64 {
	x := seed*0x9e3779b97f4a7c15 + n
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// failed is the device's sticky fault, nil while there is none.
func (d *Device) failed() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fault
}

// pointer is the address p of the block that holds [p, p+n), as a pointer
// derived from the block's own.
func (d *Device) pointer(p uintptr, n int64) (unsafe.Pointer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fault != nil {
		return nil, d.fault
	}
	return d.pointerLocked(p, n)
}

// pointerLocked is pointer with d.mu held.
func (d *Device) pointerLocked(p uintptr, n int64) (unsafe.Pointer, error) {
	for base, b := range d.blocks {
		if p >= base && int64(p-base)+n <= b.bytes {
			return unsafe.Add(b.p, p-base), nil
		}
	}
	if q, ok := d.heapPointer(p, n); ok {
		return q, nil
	}
	return nil, fmt.Errorf("emulated device: %d bytes at %#x are not in one allocation", n, p)
}

// compute is pointer for work on the compute stream named what: the
// streams race where a queued copy uses the bytes.
func (d *Device) compute(what string, p uintptr, n int64) (unsafe.Pointer, error) {
	d.mu.Lock()
	d.raceLocked(what, p, n)
	d.mu.Unlock()
	return d.pointer(p, n)
}

// computeMem is mem for work on the compute stream (compute).
func (d *Device) computeMem(what string, p uintptr, n int64) ([]byte, error) {
	q, err := d.compute(what, p, n)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(q), n), nil
}

// mem is n bytes of emulated device memory at p.
func (d *Device) mem(p uintptr, n int64) ([]byte, error) {
	q, err := d.pointer(p, n)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(q), n), nil
}

func (d *Device) MemsetD32(p uintptr, v uint32, n int64) error {
	q, err := d.compute("cuMemsetD32", p, 4*n)
	if err != nil {
		return err
	}
	ws := unsafe.Slice((*uint32)(q), n)
	for i := range ws {
		ws[i] = v
	}
	return nil
}

func (d *Device) MemsetD16(p uintptr, v uint16, n int64) error {
	q, err := d.compute("cuMemsetD16", p, 2*n)
	if err != nil {
		return err
	}
	ws := unsafe.Slice((*uint16)(q), n)
	for i := range ws {
		ws[i] = v
	}
	return nil
}

func (d *Device) CopyHtoD(dst uintptr, src []byte) error {
	m, err := d.computeMem("cuMemcpyHtoD", dst, int64(len(src)))
	if err == nil {
		copy(m, src)
	}
	return err
}

func (d *Device) CopyDtoH(dst []byte, src uintptr) error {
	m, err := d.computeMem("cuMemcpyDtoH", src, int64(len(dst)))
	if err == nil {
		copy(dst, m)
	}
	return err
}

func (d *Device) CopyDtoD(dst, src uintptr, n int64) error {
	to, err := d.computeMem("cuMemcpyDtoD", dst, n)
	if err != nil {
		return err
	}
	from, err := d.computeMem("cuMemcpyDtoD", src, n)
	if err == nil {
		copy(to, from)
	}
	return err
}

// Sync runs the copy stream's queue and returns the device's fault, if it
// has one (launches run to their end before Launch returns).
func (d *Device) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runCopiesLocked(0)
	return d.fault
}

func (d *Device) MemInfo() (free, total int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total - d.used, d.total, nil
}

// AllocHost is malloc: the emulator's host and device memory are the same.
func (d *Device) AllocHost(bytes int64) (unsafe.Pointer, error) {
	p := C.malloc(C.size_t(max(bytes, 1)))
	if p == nil {
		return nil, fmt.Errorf("emulated device: malloc of %d bytes of host memory failed", bytes)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.streams.host == nil {
		d.streams.host = map[uintptr]int64{}
	}
	d.streams.host[uintptr(p)] = bytes
	return p, nil
}

// FreeHost is free; freeing memory a queued copy uses is a fault.
func (d *Device) FreeHost(p unsafe.Pointer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	bytes, ok := d.streams.host[uintptr(p)]
	if !ok {
		return fmt.Errorf("emulated device: cuMemFreeHost of %p, which is not pinned memory", p)
	}
	d.freeLocked("cuMemFreeHost", uintptr(p), bytes, true)
	if d.fault != nil {
		return nil // leaked: a queued copy may still use it
	}
	delete(d.streams.host, uintptr(p))
	C.free(p)
	return nil
}
