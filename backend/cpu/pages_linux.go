package cpu

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/memunet/memunet/backend/internal/hostmem"
	"github.com/memunet/memunet/memory"
)

// hostPage is the host heap's page: 2 MiB, the CUDA driver's mapping
// granularity, so that a CPU run reserves what the same run would on a GPU,
// and a transparent huge page, so that a page moved between buffers costs
// one fault (zeroing 2 MiB) rather than 512: measured replaying the seed
// UNet's checkpointed steps, 64 KiB pages spent 30-40 ms a step in faults,
// 2 MiB huge pages nothing measurable.
const hostPage = 2 << 20

// hostHeap is a reservation of address space (backend/internal/hostmem):
// pages have no access until mapped, and an unmapped page's memory goes
// back to the kernel, so the process holds what the pool counts as
// reserved. A use after unmapping faults, as it would on a GPU.
type hostHeap struct {
	mapping []byte // the whole reservation, for Release
	cleanup runtime.Cleanup
	// whole says the reservation is one block of Alloc's, mapped whole
	// and unmapped by Free.
	whole bool
}

// mappedMin is the least block Alloc maps: a page.
const mappedMin = hostPage

// allocMapped maps a block of bytes outside the Go heap (ok), where the
// host pages and the block is a page or more; a refusal (the commit limit)
// wraps memory.ErrExhausted.
func allocMapped(bytes int64) (memory.Storage, bool, error) {
	if strconv.IntSize < 64 || bytes < mappedMin {
		return nil, false, nil
	}
	m, b, err := hostmem.Reserve(bytes, hostPage)
	if err != nil {
		return nil, false, err
	}
	if err := hostmem.Map(b); err != nil {
		_ = hostmem.Release(m)
		if errors.Is(err, hostmem.ErrNoMemory) {
			err = fmt.Errorf("%w: %w", memory.ErrExhausted, err)
		}
		return nil, false, err
	}
	h := &hostHeap{mapping: m, whole: true}
	blk := &hostBlock{words: unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), bytes/4), heap: h}
	// A pool dropped without freeing it leaves it to the cleanup.
	h.cleanup = runtime.AddCleanup(h, func(m []byte) { _ = hostmem.Release(m) }, m)
	return blk, true, nil
}

// freeMapped unmaps a block of allocMapped's.
func freeMapped(b *hostBlock) {
	b.heap.cleanup.Stop()
	if err := hostmem.Release(b.heap.mapping); err != nil {
		panic(fmt.Sprintf("backend/cpu: munmap: %v", err))
	}
}

// PageSize is 2 MiB on a 64-bit host, where address space is plentiful;
// elsewhere 0 (the pool takes segments instead).
func (HostAllocator) PageSize() int64 {
	if strconv.IntSize < 64 {
		return 0
	}
	return hostPage
}

// Reserve maps bytes of address space with no access (no memory behind it),
// aligned to a page. If the pool that owns it is dropped without giving it
// back, the garbage collector's cleanup unmaps it.
func (HostAllocator) Reserve(bytes int64) (memory.Storage, error) {
	m, b, err := hostmem.Reserve(bytes, hostPage)
	if err != nil {
		return nil, err
	}
	h := &hostHeap{mapping: m}
	blk := &hostBlock{words: unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), bytes/4), heap: h}
	// On the heap, not on its block: every block sliced from it keeps it.
	h.cleanup = runtime.AddCleanup(h, func(m []byte) { _ = hostmem.Release(m) }, m)
	return blk, nil
}

// pageBytes is bytes bytes of heap block s from off.
func pageBytes(s memory.Storage, off, bytes int64) []byte {
	w := s.(*hostBlock).words[off/4 : (off+bytes)/4]
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), bytes)
}

// Map makes the range readable and writable; a refusal (the commit limit)
// wraps memory.ErrExhausted.
func (HostAllocator) Map(s memory.Storage, off, bytes int64) error {
	err := hostmem.Map(pageBytes(s, off, bytes))
	if errors.Is(err, hostmem.ErrNoMemory) {
		return fmt.Errorf("%w: %w", memory.ErrExhausted, err)
	}
	return err
}

// Unmap gives the range's memory back and takes its access away.
func (HostAllocator) Unmap(s memory.Storage, off, bytes int64) {
	if err := hostmem.Unmap(pageBytes(s, off, bytes)); err != nil {
		panic("backend/cpu: " + err.Error())
	}
}

// Release unmaps the reservation.
func (HostAllocator) Release(s memory.Storage) {
	h := s.(*hostBlock).heap
	h.cleanup.Stop()
	if err := hostmem.Release(h.mapping); err != nil {
		panic(fmt.Sprintf("backend/cpu: munmap: %v", err))
	}
}
