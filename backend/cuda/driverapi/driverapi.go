//go:build gpu

// Package driverapi is backend/cuda's Driver over the CUDA driver API: the
// real GPU, in the build with -tags gpu only. It calls libcuda.so.1
// through its own cgo (cuapi.h declares the few types and entry points it
// uses), opening the library at the first Open, so a gpu binary starts,
// answers --help and plans on the CPU on a machine without the driver,
// and building it needs no CUDA header. Open gives the CUDA backend of a
// device.
//
// Invariants: the driver library is opened and initialised at most once
// per process (the first Open), and the driver keeps one primary context
// per device and process, so Open returns one backend per device ordinal
// for the whole process. Every call makes that context current on its
// goroutine's OS thread, locked to it for the call. Driver failures are
// *Error values naming the call and the driver's own error name.
package driverapi

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuapi_calls.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/memory"
)

// process is the driver as this process has it: the library, loaded once,
// and the backend of each device ordinal opened.
var process = struct {
	load   sync.Once
	tried  atomic.Bool
	err    error // why the driver cannot start here, for every Open
	mu     sync.Mutex
	opened map[int]*cuda.Backend
}{opened: map[int]*cuda.Backend{}}

// DriverLoaded reports whether this process has tried to load the CUDA
// driver (an Open was called): commands that do not compute on cuda never
// do.
func DriverLoaded() bool { return process.tried.Load() }

// start loads libcuda.so.1 and initialises the driver, once per process;
// the error says why it cannot start here and what to do instead.
func start() error {
	process.load.Do(func() {
		process.tried.Store(true)
		var buf [512]C.char
		if C.mu_load(&buf[0], C.size_t(len(buf))) != 0 {
			process.err = noDriver(C.GoString(&buf[0]))
			return
		}
		if err := check("cuInit", C.mu_cuInit(0)); err != nil {
			process.err = noDriver(err.Error())
		}
	})
	return process.err
}

// ErrNoDriver is wrapped by Open's error where the CUDA driver cannot start
// (no libcuda.so.1, or no GPU for it).
var ErrNoDriver = errors.New("the CUDA driver cannot start here")

// noDriver is the error of a gpu build on a machine where the driver cannot
// start.
func noDriver(why string) error {
	return fmt.Errorf("this is the CUDA build (-tags gpu) and %w (%s): "+
		"no NVIDIA GPU or driver on this machine. Use the CPU build (go build ./cmd/memunet) or device: cpu here, "+
		"or run this binary where nvidia-smi works", ErrNoDriver, why)
}

// Error is a failed driver call, by the driver's own name for its result.
type Error struct {
	Call string // the entry point, e.g. cuMemAlloc
	Code int    // the CUresult
	Name string // cuGetErrorName's, e.g. CUDA_ERROR_OUT_OF_MEMORY
	Text string // cuGetErrorString's, e.g. out of memory
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Text) }

// Is makes an out-of-memory result match cuda.ErrDeviceFull.
func (e *Error) Is(target error) bool {
	return target == cuda.ErrDeviceFull && e.Code == int(C.MU_CUDA_ERROR_OUT_OF_MEMORY)
}

// check is nil for CUDA_SUCCESS, else the call's *Error.
func check(call string, r C.mu_result) error {
	if r == C.MU_CUDA_SUCCESS {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Name: fmt.Sprintf("CUDA error %d", int(r)), Text: "unknown"}
	var s *C.char
	if C.mu_cuGetErrorName(r, &s) == C.MU_CUDA_SUCCESS && s != nil {
		e.Name = C.GoString(s)
	}
	if C.mu_cuGetErrorString(r, &s) == C.MU_CUDA_SUCCESS && s != nil {
		e.Text = C.GoString(s)
	}
	return e
}

// Open returns the backend of CUDA device ordinal (as nvidia-smi numbers
// them), opening it on first use: the driver started, the device's primary
// context retained, memunet's kernels loaded, the scratch area allocated.
func Open(ordinal int) (*cuda.Backend, error) {
	if err := start(); err != nil {
		return nil, err
	}
	process.mu.Lock()
	defer process.mu.Unlock()
	if b, ok := process.opened[ordinal]; ok {
		return b, nil
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.mu_cuDeviceGetCount(&n)); err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= int(n) {
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
	process.opened[ordinal] = b
	return b, nil
}

// cuDriver is cuda.Driver over the CUDA driver API.
type cuDriver struct {
	ordinal    int
	dev        C.mu_device
	ctx        C.mu_context
	name       string
	cc         [2]int
	sms        int
	version    int
	totalBytes int64
	page       int64 // the mapping granularity, 0 without virtual memory management
	fns        [cuda.NumKernels]C.mu_function
	copies     C.mu_stream // the copy stream; the compute stream is the default one
	events     eventTable
	// issued is set by every call that gives the device work and cleared
	// by a sync that saw it finish: Unmap waits only when there is work.
	issued atomic.Bool
}

func (d *cuDriver) attribute(attr C.uint) (int, error) {
	var v C.int
	err := check("cuDeviceGetAttribute", C.mu_cuDeviceGetAttribute(&v, attr, d.dev))
	return int(v), err
}

func (d *cuDriver) open() (err error) {
	if err := check("cuDeviceGet", C.mu_cuDeviceGet(&d.dev, C.int(d.ordinal))); err != nil {
		return err
	}
	var name [256]C.char
	if err := check("cuDeviceGetName", C.mu_cuDeviceGetName(&name[0], C.int(len(name)), d.dev)); err != nil {
		return err
	}
	d.name = C.GoString(&name[0])
	if d.cc[0], err = d.attribute(C.MU_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR); err != nil {
		return err
	}
	if d.cc[1], err = d.attribute(C.MU_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR); err != nil {
		return err
	}
	if d.cc[0] < 8 {
		return fmt.Errorf("%s has compute capability %d.%d; memunet's kernels are built for 8.0 and newer", d.name, d.cc[0], d.cc[1])
	}
	if d.sms, err = d.attribute(C.MU_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT); err != nil {
		return err
	}
	var total C.size_t
	if err := check("cuDeviceTotalMem", C.mu_cuDeviceTotalMem(&total, d.dev)); err != nil {
		return err
	}
	d.totalBytes = int64(total)
	var version C.int
	if err := check("cuDriverGetVersion", C.mu_cuDriverGetVersion(&version)); err != nil {
		return err
	}
	d.version = int(version)
	if err := check("cuDevicePrimaryCtxRetain", C.mu_cuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return fmt.Errorf("retaining the primary context: %w", err)
	}
	unlock, err := d.on()
	if err != nil {
		return err
	}
	defer unlock()
	d.page = int64(C.mu_granularity(d.dev))
	// The copy stream does not synchronize with the default stream: only
	// events order the two.
	if err := check("cuStreamCreate", C.mu_cuStreamCreate(&d.copies, C.MU_CU_STREAM_NON_BLOCKING)); err != nil {
		return err
	}
	var mods [cuda.NumModules]C.mu_module
	for i := range cuda.NumModules {
		if mods[i], err = d.loadModule(cuda.ModuleName(i), cuda.Fatbin(i)); err != nil {
			return err
		}
	}
	for k := range cuda.NumKernels {
		mod := mods[k.Module()]
		name := C.CString(k.String())
		err := check("cuModuleGetFunction", C.mu_cuModuleGetFunction(&d.fns[k], mod, name))
		C.free(unsafe.Pointer(name))
		if err != nil {
			return fmt.Errorf("kernel %s: %w", k, err)
		}
	}
	return nil
}

// loadModule loads one of memunet's module images; where the driver
// refuses it, the error carries the JIT's log.
func (d *cuDriver) loadModule(name, image string) (C.mu_module, error) {
	img := C.CString(image) // a copy in C memory (and a terminating zero, as PTX would need)
	defer C.free(unsafe.Pointer(img))
	var log [16 << 10]C.char
	var m C.mu_module
	if err := check("cuModuleLoadData", C.mu_load_module(&m, unsafe.Pointer(img), &log[0], C.size_t(len(log)))); err != nil {
		jit := C.GoString(&log[0])
		if jit == "" {
			jit = "no log"
		}
		return nil, fmt.Errorf("loading the %s kernels for %s (compute capability %d.%d): %w; the JIT's log: %s",
			name, d.name, d.cc[0], d.cc[1], err, jit)
	}
	return m, nil
}

// on makes the device's context current on this goroutine's OS thread,
// locked to it until the returned function runs.
func (d *cuDriver) on() (func(), error) {
	runtime.LockOSThread()
	if err := check("cuCtxSetCurrent", C.mu_cuCtxSetCurrent(d.ctx)); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("making cuda:%d's context current: %w", d.ordinal, err)
	}
	return runtime.UnlockOSThread, nil
}

// call runs f with the device's context current, as one driver call named
// call.
func (d *cuDriver) call(call string, f func() C.mu_result) error {
	unlock, err := d.on()
	if err != nil {
		return err
	}
	defer unlock()
	return check(call, f())
}

// OnContext runs f with the device's context current on its OS thread
// (cuda.ContextRunner: cuDNN's calls work in the current context).
func (d *cuDriver) OnContext(f func() error) error {
	unlock, err := d.on()
	if err != nil {
		return err
	}
	defer unlock()
	d.issued.Store(true)
	return f()
}

func (d *cuDriver) Name() string { return fmt.Sprintf("cuda:%d", d.ordinal) }

// Describe names the device, its compute capability, memory and the CUDA
// version its driver supports.
func (d *cuDriver) Describe() string {
	return fmt.Sprintf("cuda:%d %s (compute %d.%d, %d SMs, %s, driver for CUDA %d.%d)", d.ordinal, d.name, d.cc[0], d.cc[1],
		d.sms, memory.FormatBytes(d.totalBytes), d.version/1000, d.version%1000/10)
}

func (d *cuDriver) Alloc(bytes int64) (uintptr, error) {
	var p C.mu_deviceptr
	err := d.call("cuMemAlloc", func() C.mu_result { return C.mu_cuMemAlloc(&p, C.size_t(bytes)) })
	return uintptr(p), err
}

func (d *cuDriver) Free(p uintptr) error {
	return d.call("cuMemFree", func() C.mu_result { return C.mu_cuMemFree(C.mu_deviceptr(p)) })
}

func (d *cuDriver) Launch(k cuda.Kernel, gx, gy int, args []uint64) error {
	var first *C.ulonglong
	if len(args) > 0 {
		first = (*C.ulonglong)(unsafe.Pointer(&args[0]))
	}
	d.issued.Store(true)
	return d.call("cuLaunchKernel", func() C.mu_result {
		return C.mu_launch(d.fns[k], C.uint(gx), C.uint(gy), cuda.BlockThreads, first, C.int(len(args)))
	})
}

func (d *cuDriver) MemsetD32(p uintptr, v uint32, n int64) error {
	d.issued.Store(true)
	return d.call("cuMemsetD32", func() C.mu_result { return C.mu_cuMemsetD32(C.mu_deviceptr(p), C.uint(v), C.size_t(n)) })
}

func (d *cuDriver) MemsetD16(p uintptr, v uint16, n int64) error {
	d.issued.Store(true)
	return d.call("cuMemsetD16", func() C.mu_result { return C.mu_cuMemsetD16(C.mu_deviceptr(p), C.ushort(v), C.size_t(n)) })
}

func (d *cuDriver) CopyHtoD(dst uintptr, src []byte) error {
	d.issued.Store(true)
	return d.call("cuMemcpyHtoD", func() C.mu_result {
		return C.mu_cuMemcpyHtoD(C.mu_deviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)))
	})
}

func (d *cuDriver) CopyDtoH(dst []byte, src uintptr) error {
	d.issued.Store(true)
	return d.call("cuMemcpyDtoH", func() C.mu_result {
		return C.mu_cuMemcpyDtoH(unsafe.Pointer(&dst[0]), C.mu_deviceptr(src), C.size_t(len(dst)))
	})
}

func (d *cuDriver) CopyDtoD(dst, src uintptr, n int64) error {
	d.issued.Store(true)
	return d.call("cuMemcpyDtoD", func() C.mu_result {
		return C.mu_cuMemcpyDtoD(C.mu_deviceptr(dst), C.mu_deviceptr(src), C.size_t(n))
	})
}

// stream is s's handle.
func (d *cuDriver) stream(s cuda.Stream) C.mu_stream {
	if s == cuda.CopyStream {
		return d.copies
	}
	return nil
}

// eventTable holds the driver's events by the numbers it gives them out
// as (a cuda.Event is a number, not a pointer Go would have to track).
type eventTable struct {
	mu   sync.Mutex
	next cuda.Event
	live map[cuda.Event]C.mu_event
}

func (t *eventTable) add(e C.mu_event) cuda.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live == nil {
		t.live = map[cuda.Event]C.mu_event{}
	}
	t.next++
	t.live[t.next] = e
	return t.next
}

// get is e's handle, nil for an event not given out or given back.
func (t *eventTable) get(e cuda.Event) C.mu_event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[e]
}

func (t *eventTable) remove(e cuda.Event) C.mu_event {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.live[e]
	delete(t.live, e)
	return h
}

// event is e's handle.
func (d *cuDriver) event(e cuda.Event) C.mu_event { return d.events.get(e) }

func (d *cuDriver) CopyToDeviceAsync(dst uintptr, src unsafe.Pointer, n int64) error {
	d.issued.Store(true)
	return d.call("cuMemcpyHtoDAsync", func() C.mu_result {
		return C.mu_cuMemcpyHtoDAsync(C.mu_deviceptr(dst), src, C.size_t(n), d.copies)
	})
}

func (d *cuDriver) CopyToHostAsync(dst unsafe.Pointer, src uintptr, n int64) error {
	d.issued.Store(true)
	return d.call("cuMemcpyDtoHAsync", func() C.mu_result {
		return C.mu_cuMemcpyDtoHAsync(dst, C.mu_deviceptr(src), C.size_t(n), d.copies)
	})
}

// Record is cuEventCreate (timing on, for EventTime) and cuEventRecord.
func (d *cuDriver) Record(s cuda.Stream) (cuda.Event, error) {
	var e C.mu_event
	err := d.call("cuEventCreate", func() C.mu_result { return C.mu_cuEventCreate(&e, C.MU_CU_EVENT_DEFAULT) })
	if err != nil {
		return 0, err
	}
	if err := d.call("cuEventRecord", func() C.mu_result { return C.mu_cuEventRecord(e, d.stream(s)) }); err != nil {
		d.call("cuEventDestroy", func() C.mu_result { return C.mu_cuEventDestroy(e) })
		return 0, err
	}
	return d.events.add(e), nil
}

func (d *cuDriver) WaitEvent(s cuda.Stream, e cuda.Event) error {
	return d.call("cuStreamWaitEvent", func() C.mu_result { return C.mu_cuStreamWaitEvent(d.stream(s), d.event(e), 0) })
}

// EventDone is cuEventQuery: CUDA_ERROR_NOT_READY is false, not an error.
func (d *cuDriver) EventDone(e cuda.Event) (bool, error) {
	var r C.mu_result
	err := d.call("cuEventQuery", func() C.mu_result {
		r = C.mu_cuEventQuery(d.event(e))
		if r == C.MU_CUDA_ERROR_NOT_READY {
			return 0
		}
		return r
	})
	return err == nil && r == 0, err
}

func (d *cuDriver) EventSync(e cuda.Event) error {
	return d.call("cuEventSynchronize", func() C.mu_result { return C.mu_cuEventSynchronize(d.event(e)) })
}

// EventTime is cuEventElapsedTime after both events happened (resolution
// about half a microsecond).
func (d *cuDriver) EventTime(from, to cuda.Event) (time.Duration, error) {
	if err := d.EventSync(to); err != nil {
		return 0, err
	}
	var ms C.float
	err := d.call("cuEventElapsedTime", func() C.mu_result { return C.mu_cuEventElapsedTime(&ms, d.event(from), d.event(to)) })
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

func (d *cuDriver) ReleaseEvent(e cuda.Event) error {
	h := d.events.remove(e)
	if h == nil {
		return fmt.Errorf("cuEventDestroy: event %d is not one of the driver's", e)
	}
	return d.call("cuEventDestroy", func() C.mu_result { return C.mu_cuEventDestroy(h) })
}

// Sync is cuCtxSynchronize: both streams.
func (d *cuDriver) Sync() error {
	unlock, err := d.on()
	if err != nil {
		return err
	}
	defer unlock()
	return d.sync()
}

// sync waits for the device; with the context current.
func (d *cuDriver) sync() error {
	d.issued.Store(false)
	err := check("cuCtxSynchronize", C.mu_cuCtxSynchronize())
	if err != nil {
		d.issued.Store(true) // the work may not have finished
	}
	return err
}

func (d *cuDriver) MemInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = d.call("cuMemGetInfo", func() C.mu_result { return C.mu_cuMemGetInfo(&f, &t) })
	return int64(f), int64(t), err
}

// AllocHost is cuMemHostAlloc (portable pinned memory).
func (d *cuDriver) AllocHost(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := d.call("cuMemHostAlloc", func() C.mu_result {
		return C.mu_cuMemHostAlloc(&p, C.size_t(bytes), C.MU_CU_MEMHOSTALLOC_PORTABLE)
	})
	return p, err
}

// FreeHost is cuMemFreeHost.
func (d *cuDriver) FreeHost(p unsafe.Pointer) error {
	return d.call("cuMemFreeHost", func() C.mu_result { return C.mu_cuMemFreeHost(p) })
}

var _ cuda.Pager = (*cuDriver)(nil)

// Granularity is the device's minimum mapping granularity (2 MiB on every
// GPU so far), 0 where it has no virtual memory management.
func (d *cuDriver) Granularity() int64 { return d.page }

// Reserve is cuMemAddressReserve, aligned to a page.
func (d *cuDriver) Reserve(bytes int64) (uintptr, error) {
	var p C.mu_deviceptr
	err := d.call("cuMemAddressReserve", func() C.mu_result {
		return C.mu_cuMemAddressReserve(&p, C.size_t(bytes), C.size_t(d.page), 0, 0)
	})
	return uintptr(p), err
}

// Map is cuMemCreate and cuMemMap per page, then cuMemSetAccess; an
// out-of-memory error matches cuda.ErrDeviceFull.
func (d *cuDriver) Map(p uintptr, bytes int64) error {
	return d.call("cuMemCreate/cuMemMap", func() C.mu_result {
		return C.mu_map(d.dev, C.mu_deviceptr(p), C.size_t(d.page), C.size_t(bytes/d.page))
	})
}

// Unmap waits for the device where work was issued since it last did (a
// kernel issued before the pages were freed may still read them: one wait
// serves all the pages a miss moves), then cuMemUnmap per page frees their
// memory. The pages are unmapped even when the wait fails (the context has
// an error already, which Sync reports), so that the pool's count stays
// true.
func (d *cuDriver) Unmap(p uintptr, bytes int64) error {
	unlock, err := d.on()
	if err != nil {
		return err
	}
	defer unlock()
	var syncErr error
	if d.issued.Load() {
		syncErr = d.sync()
	}
	if err := check("cuMemUnmap", C.mu_unmap(C.mu_deviceptr(p), C.size_t(d.page), C.size_t(bytes/d.page))); err != nil {
		return err
	}
	return syncErr
}

// Release is cuMemAddressFree.
func (d *cuDriver) Release(p uintptr, bytes int64) error {
	return d.call("cuMemAddressFree", func() C.mu_result { return C.mu_cuMemAddressFree(C.mu_deviceptr(p), C.size_t(bytes)) })
}
