//go:build cudaemu

// Package emu runs backend/cuda's kernels on the host: the .cu sources
// compiled as C++ against a small CUDA shim (cudashim.h), each block's
// threads as OS threads with __syncthreads a barrier, device memory as host
// memory (C.malloc; a reservation of pages is host address space mapped
// page by page, so a kernel that touches an unmapped page faults). It is a Driver, so the CUDA backend's Go code and its
// kernels' arithmetic and indexing are tested, with the backend
// conformance suite, on a machine without a GPU. It is slow (an OS thread
// per CUDA thread) and is for tests only: go test -tags cudaemu
// ./backend/cuda/emu (cgo and g++ with C++20; no CUDA toolkit, no driver).
// Its own tag, not gpu: a gpu build's device is the real one.
package emu

/*
#cgo CXXFLAGS: -std=c++20 -O1 -Wno-unused-function
#cgo LDFLAGS: -lstdc++ -lpthread -lm
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
void emu_ops(int k, const uint64_t *a);
void emu_gemm(int k, const uint64_t *a);
void emu_run(void (*kernel)(int, const uint64_t *), int k, const uint64_t *args, int gx, int gy);
static void emu_launch(int k, int gemm, const uint64_t *args, int gx, int gy) {
	emu_run(gemm ? emu_gemm : emu_ops, k, args, gx, gy);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/memunet/memunet/backend/cuda"
)

// Device is an emulated GPU with total bytes of memory and, when page is
// set, virtual memory management in pages of that size (cuda.Pager).
type Device struct {
	total int64
	page  int64

	mu     sync.Mutex
	used   int64
	blocks map[uintptr]block
	heaps  map[uintptr]*heap
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
	return &Device{total: total, page: page, blocks: map[uintptr]block{}, heaps: map[uintptr]*heap{}}
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
	delete(d.blocks, p)
	d.used -= b.bytes
	C.free(b.p)
	return nil
}

func (d *Device) Launch(k cuda.Kernel, gx, gy int, args []uint64) error {
	gemm := C.int(0)
	if k.InGEMM() {
		gemm = 1
	}
	C.emu_launch(C.int(k), gemm, (*C.uint64_t)(unsafe.Pointer(&args[0])), C.int(gx), C.int(gy))
	return nil
}

// pointer is the address p of the block that holds [p, p+n), as a pointer
// derived from the block's own.
func (d *Device) pointer(p uintptr, n int64) (unsafe.Pointer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
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

// mem is n bytes of emulated device memory at p.
func (d *Device) mem(p uintptr, n int64) ([]byte, error) {
	q, err := d.pointer(p, n)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(q), n), nil
}

func (d *Device) MemsetD32(p uintptr, v uint32, n int64) error {
	q, err := d.pointer(p, 4*n)
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
	q, err := d.pointer(p, 2*n)
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
	m, err := d.mem(dst, int64(len(src)))
	if err == nil {
		copy(m, src)
	}
	return err
}

func (d *Device) CopyDtoH(dst []byte, src uintptr) error {
	m, err := d.mem(src, int64(len(dst)))
	if err == nil {
		copy(dst, m)
	}
	return err
}

func (d *Device) CopyDtoD(dst, src uintptr, n int64) error {
	to, err := d.mem(dst, n)
	if err != nil {
		return err
	}
	from, err := d.mem(src, n)
	if err == nil {
		copy(to, from)
	}
	return err
}

func (d *Device) Sync() error { return nil }

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
	return p, nil
}

// FreeHost is free.
func (d *Device) FreeHost(p unsafe.Pointer) error {
	C.free(p)
	return nil
}
