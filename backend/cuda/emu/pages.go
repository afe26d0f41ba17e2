//go:build cudaemu

package emu

import (
	"fmt"
	"unsafe"

	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/internal/hostmem"
)

// heap is a reservation of emulated address space: host address space
// (backend/internal/hostmem), whose pages Map makes readable and writable,
// so that the kernels read a buffer across pages as one run of memory, and
// touching an unmapped page faults as on a GPU.
type heap struct {
	mapping []byte // the whole reservation, for Release
	mem     []byte // its page-aligned bytes, at base
	base    uintptr
	mapped  map[int64]bool // by page
}

var _ cuda.Pager = (*Device)(nil)

// Granularity is the device's page (0: no virtual memory management).
func (d *Device) Granularity() int64 { return d.page }

// Reserve maps bytes of host address space with no access, page-aligned.
func (d *Device) Reserve(bytes int64) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.page == 0 || bytes%d.page != 0 {
		return 0, fmt.Errorf("emulated device: reserving %d bytes in pages of %d", bytes, d.page)
	}
	m, mem, err := hostmem.Reserve(bytes, d.page)
	if err != nil {
		return 0, fmt.Errorf("emulated device: %v", err)
	}
	base := uintptr(unsafe.Pointer(&mem[0]))
	d.heaps[base] = &heap{mapping: m, mem: mem, base: base, mapped: map[int64]bool{}}
	return base, nil
}

// heapPages is the heap that holds [p, p+bytes), whole pages each mapped
// (or each not), and their indices.
func (d *Device) heapPages(p uintptr, bytes int64, mapped bool) (*heap, int64, int64, error) {
	for _, h := range d.heaps {
		if p < h.base || int64(p-h.base)+bytes > int64(len(h.mem)) {
			continue
		}
		off := int64(p - h.base)
		if off%d.page != 0 || bytes%d.page != 0 || bytes <= 0 {
			return nil, 0, 0, fmt.Errorf("emulated device: [%#x, +%d) is not whole pages", p, bytes)
		}
		lo, hi := off/d.page, (off+bytes)/d.page
		for i := lo; i < hi; i++ {
			if h.mapped[i] != mapped {
				return nil, 0, 0, fmt.Errorf("emulated device: page %d at %#x: mapped %v, want %v", i, h.base+uintptr(i*d.page), h.mapped[i], mapped)
			}
		}
		return h, lo, hi, nil
	}
	return nil, 0, 0, fmt.Errorf("emulated device: [%#x, +%d) is not in a reservation", p, bytes)
}

// bytesAt is the host memory of the heap range.
func (h *heap) bytesAt(p uintptr, bytes int64) []byte {
	off := int64(p - h.base)
	return h.mem[off : off+bytes]
}

// Map backs whole pages with (host) memory, counted as the device's.
func (d *Device) Map(p uintptr, bytes int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, lo, hi, err := d.heapPages(p, bytes, false)
	if err != nil {
		return err
	}
	if d.used+bytes > d.total {
		return fmt.Errorf("emulated device: %d bytes in use of %d: %w", d.used, d.total, cuda.ErrDeviceFull)
	}
	if err := hostmem.Map(h.bytesAt(p, bytes)); err != nil {
		return fmt.Errorf("emulated device: %v", err)
	}
	for i := lo; i < hi; i++ {
		h.mapped[i] = true
	}
	d.used += bytes
	return nil
}

// Unmap gives mapped pages' memory back.
func (d *Device) Unmap(p uintptr, bytes int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runCopiesLocked(0) // as the driver's, it waits for the device's work
	h, lo, hi, err := d.heapPages(p, bytes, true)
	if err != nil {
		return err
	}
	if err := hostmem.Unmap(h.bytesAt(p, bytes)); err != nil {
		return fmt.Errorf("emulated device: %v", err)
	}
	for i := lo; i < hi; i++ {
		delete(h.mapped, i)
	}
	d.used -= bytes
	return nil
}

// Release gives back a reservation with nothing mapped.
func (d *Device) Release(p uintptr, bytes int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, ok := d.heaps[p]
	if !ok || int64(len(h.mem)) != bytes {
		return fmt.Errorf("emulated device: release of %d bytes at %#x, which is not a reservation", bytes, p)
	}
	if len(h.mapped) != 0 {
		return fmt.Errorf("emulated device: release of a reservation with %d pages mapped", len(h.mapped))
	}
	delete(d.heaps, p)
	return hostmem.Release(h.mapping)
}

// heapPointer is pointer for the heaps: the address p, if [p, p+n) lies in
// one heap's mapped pages.
func (d *Device) heapPointer(p uintptr, n int64) (unsafe.Pointer, bool) {
	for _, h := range d.heaps {
		if p < h.base || int64(p-h.base)+n > int64(len(h.mem)) {
			continue
		}
		off := int64(p - h.base)
		for i := off / d.page; i <= (off+max(n, 1)-1)/d.page; i++ {
			if !h.mapped[i] {
				return nil, false
			}
		}
		return unsafe.Pointer(&h.bytesAt(p, max(n, 1))[0]), true
	}
	return nil, false
}
