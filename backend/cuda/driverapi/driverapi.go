//go:build gpu

// Package driverapi is backend/cuda's Driver over the CUDA driver API
// (gorgonia.org/cu, cgo, libcuda.so.1): the real GPU. It is built with
// -tags gpu only. Open gives the CUDA backend of a device.
package driverapi

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <string.h>

// mu_prop is a page of device memory on dev.
static CUmemAllocationProp mu_prop(CUdevice dev) {
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	return prop;
}

// mu_granularity is dev's page: 0 without virtual memory management.
static size_t mu_granularity(CUdevice dev) {
	int vmm = 0;
	size_t g = 0;
	CUmemAllocationProp prop = mu_prop(dev);
	if (cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS || !vmm ||
	    cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) {
		return 0;
	}
	return g;
}

// mu_map backs n pages at p, each its own allocation, released at once
// (the mapping keeps the memory until it is unmapped), and makes them
// readable and writable from dev; on failure it unmaps what it mapped.
static CUresult mu_map(CUdevice dev, CUdeviceptr p, size_t page, size_t n) {
	CUmemAllocationProp prop = mu_prop(dev);
	CUresult r = CUDA_SUCCESS;
	size_t i;
	for (i = 0; i < n; i++) {
		CUmemGenericAllocationHandle h;
		if ((r = cuMemCreate(&h, page, &prop, 0)) != CUDA_SUCCESS) {
			break;
		}
		r = cuMemMap(p + i * page, page, 0, h, 0);
		cuMemRelease(h);
		if (r != CUDA_SUCCESS) {
			break;
		}
	}
	if (r == CUDA_SUCCESS) {
		CUmemAccessDesc access;
		memset(&access, 0, sizeof access);
		access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		access.location.id = dev;
		access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		if ((r = cuMemSetAccess(p, n * page, &access, 1)) == CUDA_SUCCESS) {
			return r;
		}
	}
	for (size_t j = 0; j < i; j++) {
		cuMemUnmap(p + j * page, page);
	}
	return r;
}

// mu_unmap unmaps n pages at p, a mapping each, and returns the first error.
static CUresult mu_unmap(CUdeviceptr p, size_t page, size_t n) {
	CUresult first = CUDA_SUCCESS;
	for (size_t i = 0; i < n; i++) {
		CUresult r = cuMemUnmap(p + i * page, page);
		if (first == CUDA_SUCCESS) {
			first = r;
		}
	}
	return first;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/probe"
	"github.com/memunet/memunet/memory"
	"gorgonia.org/cu"
)

// opened holds the backend of each device ordinal the process has opened:
// the driver's primary context is per process and device, and so is this.
var opened = struct {
	sync.Mutex
	m map[int]*cuda.Backend
}{m: map[int]*cuda.Backend{}}

// Open returns the backend of CUDA device ordinal (as nvidia-smi numbers
// them), opening it on first use: its primary context retained, memunet's
// kernels loaded (the driver JIT-compiles the PTX for the device), the
// scratch area allocated.
func Open(ordinal int) (*cuda.Backend, error) {
	probe.Started()
	opened.Lock()
	defer opened.Unlock()
	if b, ok := opened.m[ordinal]; ok {
		return b, nil
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %v", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("device: cuda:%d: this machine has %d CUDA device(s), cuda:0 .. cuda:%d", ordinal, n, n-1)
	}
	d := &cuDriver{ordinal: ordinal}
	if err := d.open(); err != nil {
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	b, err := cuda.New(d)
	if err != nil {
		return nil, err
	}
	opened.m[ordinal] = b
	return b, nil
}

// cuDriver is cuda.Driver over gorgonia.org/cu (the CUDA driver API).
type cuDriver struct {
	ordinal    int
	dev        cu.Device
	ctx        cu.CUContext
	name       string
	cc         [2]int
	version    int
	totalBytes int64
	page       int64 // the mapping granularity, 0 without virtual memory management
	fns        [cuda.NumKernels]cu.Function
	// issued is set by every call that gives the device work and cleared
	// by a sync that saw it finish: Unmap waits only when there is work.
	issued atomic.Bool
}

func (d *cuDriver) open() (err error) {
	if d.dev, err = cu.GetDevice(d.ordinal); err != nil {
		return err
	}
	if d.name, err = d.dev.Name(); err != nil {
		return err
	}
	if d.cc[0], d.cc[1], err = d.dev.ComputeCapability(); err != nil {
		return err
	}
	if d.cc[0] < 8 {
		return fmt.Errorf("%s has compute capability %d.%d; memunet's kernels are built for 8.0 and newer", d.name, d.cc[0], d.cc[1])
	}
	if d.totalBytes, err = d.dev.TotalMem(); err != nil {
		return err
	}
	d.version = cu.Version()
	if d.ctx, err = d.dev.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("retaining the primary context: %v", err)
	}
	defer d.on()()
	d.page = int64(C.mu_granularity(C.CUdevice(d.dev)))
	ops, err := cu.LoadData(cuda.OpsPTX)
	if err != nil {
		return fmt.Errorf("loading ops.ptx (JIT for compute capability %d.%d): %v", d.cc[0], d.cc[1], err)
	}
	gemm, err := cu.LoadData(cuda.GEMMPTX)
	if err != nil {
		return fmt.Errorf("loading gemm.ptx: %v", err)
	}
	for k := range cuda.NumKernels {
		mod := ops
		if k.InGEMM() {
			mod = gemm
		}
		if d.fns[k], err = mod.Function(k.String()); err != nil {
			return fmt.Errorf("kernel %s: %v", k, err)
		}
	}
	return nil
}

// on makes the device's context current on this goroutine's OS thread,
// locked to it until the returned function runs.
func (d *cuDriver) on() func() {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		runtime.UnlockOSThread()
		panic(fmt.Sprintf("backend/cuda: making cuda:%d's context current: %v", d.ordinal, err))
	}
	return runtime.UnlockOSThread
}

func (d *cuDriver) Name() string { return fmt.Sprintf("cuda:%d", d.ordinal) }

// Describe names the device, its compute capability, memory and driver.
func (d *cuDriver) Describe() string {
	return fmt.Sprintf("cuda:%d %s (compute %d.%d, %s, driver %d.%d)", d.ordinal, d.name, d.cc[0], d.cc[1],
		memory.FormatBytes(d.totalBytes), d.version/1000, d.version%1000/10)
}

func (d *cuDriver) Alloc(bytes int64) (uintptr, error) {
	defer d.on()()
	p, err := cu.MemAlloc(bytes)
	if errors.Is(err, cu.OutOfMemory) {
		return 0, fmt.Errorf("%v: %w", err, cuda.ErrDeviceFull)
	}
	return uintptr(p), err
}

func (d *cuDriver) Free(p uintptr) error {
	defer d.on()()
	return cu.MemFree(cu.DevicePtr(p))
}

func (d *cuDriver) Launch(k cuda.Kernel, gx, gy int, args []uint64) error {
	params := make([]unsafe.Pointer, len(args))
	for i := range args {
		params[i] = unsafe.Pointer(&args[i])
	}
	d.issued.Store(true)
	defer d.on()()
	return d.fns[k].Launch(gx, gy, 1, cuda.BlockThreads, 1, 1, 0, cu.NoStream, params)
}

func (d *cuDriver) MemsetD32(p uintptr, v uint32, n int64) error {
	d.issued.Store(true)
	defer d.on()()
	return cu.MemsetD32(cu.DevicePtr(p), v, n)
}

func (d *cuDriver) MemsetD16(p uintptr, v uint16, n int64) error {
	d.issued.Store(true)
	defer d.on()()
	return cu.MemsetD16(cu.DevicePtr(p), v, n)
}

func (d *cuDriver) CopyHtoD(dst uintptr, src []byte) error {
	d.issued.Store(true)
	defer d.on()()
	return cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)))
}

func (d *cuDriver) CopyDtoH(dst []byte, src uintptr) error {
	d.issued.Store(true)
	defer d.on()()
	return cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)))
}

func (d *cuDriver) CopyDtoD(dst, src uintptr, n int64) error {
	d.issued.Store(true)
	defer d.on()()
	return cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), n)
}

func (d *cuDriver) Sync() error {
	defer d.on()()
	return d.sync()
}

// sync waits for the device; with the context current.
func (d *cuDriver) sync() error {
	d.issued.Store(false)
	err := cu.Synchronize()
	if err != nil {
		d.issued.Store(true) // the work may not have finished
	}
	return err
}

func (d *cuDriver) MemInfo() (free, total int64, err error) {
	defer d.on()()
	return cu.MemInfo()
}

// AllocHost is cuMemHostAlloc (portable pinned memory).
func (d *cuDriver) AllocHost(bytes int64) (unsafe.Pointer, error) {
	defer d.on()()
	var p unsafe.Pointer
	if r := C.cuMemHostAlloc(&p, C.size_t(bytes), C.CU_MEMHOSTALLOC_PORTABLE); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemHostAlloc: CUDA error %d", int(r))
	}
	return p, nil
}

// FreeHost is cuMemFreeHost.
func (d *cuDriver) FreeHost(p unsafe.Pointer) error {
	defer d.on()()
	if r := C.cuMemFreeHost(p); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuMemFreeHost: CUDA error %d", int(r))
	}
	return nil
}

var _ cuda.Pager = (*cuDriver)(nil)

// Granularity is the device's minimum mapping granularity (2 MiB on every
// GPU so far), 0 where it has no virtual memory management.
func (d *cuDriver) Granularity() int64 { return d.page }

// Reserve is cuMemAddressReserve, aligned to a page.
func (d *cuDriver) Reserve(bytes int64) (uintptr, error) {
	defer d.on()()
	var p C.CUdeviceptr
	if r := C.cuMemAddressReserve(&p, C.size_t(bytes), C.size_t(d.page), 0, 0); r != C.CUDA_SUCCESS {
		return 0, fmt.Errorf("CUDA error %d", int(r))
	}
	return uintptr(p), nil
}

// Map is cuMemCreate and cuMemMap per page, then cuMemSetAccess.
func (d *cuDriver) Map(p uintptr, bytes int64) error {
	defer d.on()()
	r := C.mu_map(C.CUdevice(d.dev), C.CUdeviceptr(p), C.size_t(d.page), C.size_t(bytes/d.page))
	switch r {
	case C.CUDA_SUCCESS:
		return nil
	case C.CUDA_ERROR_OUT_OF_MEMORY:
		return fmt.Errorf("CUDA error %d (out of memory): %w", int(r), cuda.ErrDeviceFull)
	}
	return fmt.Errorf("CUDA error %d", int(r))
}

// Unmap waits for the device where work was issued since it last did (a
// kernel issued before the pages were freed may still read them: one wait
// serves all the pages a miss moves), then cuMemUnmap per page frees their
// memory. The pages are unmapped even when the wait fails (the context has
// an error already, which Sync reports), so that the pool's count stays
// true.
func (d *cuDriver) Unmap(p uintptr, bytes int64) error {
	defer d.on()()
	var syncErr error
	if d.issued.Load() {
		syncErr = d.sync()
	}
	if r := C.mu_unmap(C.CUdeviceptr(p), C.size_t(d.page), C.size_t(bytes/d.page)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("CUDA error %d", int(r))
	}
	return syncErr
}

// Release is cuMemAddressFree.
func (d *cuDriver) Release(p uintptr, bytes int64) error {
	defer d.on()()
	if r := C.cuMemAddressFree(C.CUdeviceptr(p), C.size_t(bytes)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("CUDA error %d", int(r))
	}
	return nil
}
