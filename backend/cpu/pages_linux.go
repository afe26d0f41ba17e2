package cpu

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/memunet/memunet/memory"
)

// hostPage is the host heap's page: 2 MiB, the CUDA driver's mapping
// granularity, so that a CPU run reserves what the same run would on a GPU,
// and a transparent huge page, so that a page moved between buffers costs
// one fault (zeroing 2 MiB) rather than 512: measured replaying the seed
// UNet's checkpointed steps, 64 KiB pages spent 30-40 ms a step in faults,
// 2 MiB huge pages nothing measurable.
const hostPage = 2 << 20

// hostHeap is a reservation of address space: pages are PROT_NONE until
// mapped (mprotect), and an unmapped page's memory goes back to the kernel
// (madvise MADV_DONTNEED), so the process holds what the pool counts as
// reserved. A use after unmapping faults, as it would on a GPU.
type hostHeap struct {
	mapping []byte // the whole mmap, for munmap
	cleanup runtime.Cleanup
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
	m, err := syscall.Mmap(-1, 0, int(bytes+hostPage), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("mmap of %s: %w", memory.FormatBytes(bytes), err)
	}
	skip := (hostPage - int64(uintptr(unsafe.Pointer(&m[0])))%hostPage) % hostPage
	// Huge pages where the kernel has them (transparent_hugepage "madvise"
	// or "always"); the advice is only advice, so its error is not one.
	_ = syscall.Madvise(m, madvHugepage)
	h := &hostHeap{mapping: m}
	blk := &hostBlock{words: unsafe.Slice((*float32)(unsafe.Pointer(&m[skip])), bytes/4), heap: h}
	// On the heap, not on its block: every block sliced from it keeps it.
	h.cleanup = runtime.AddCleanup(h, func(m []byte) { _ = syscall.Munmap(m) }, m)
	return blk, nil
}

// pageBytes is bytes bytes of heap block s from off.
func pageBytes(s memory.Storage, off, bytes int64) []byte {
	w := s.(*hostBlock).words[off/4 : (off+bytes)/4]
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), bytes)
}

// Map makes the range readable and writable; the kernel backs it with zeroed
// memory at first touch. A refusal (ENOMEM: the commit limit) wraps
// memory.ErrExhausted.
func (HostAllocator) Map(s memory.Storage, off, bytes int64) error {
	b := pageBytes(s, off, bytes)
	err := syscall.Mprotect(b, syscall.PROT_READ|syscall.PROT_WRITE)
	if errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN) {
		return fmt.Errorf("mprotect of %s: %w (%w)", memory.FormatBytes(bytes), memory.ErrExhausted, err)
	}
	if err != nil {
		return err
	}
	// Huge pages again (Unmap's fresh mapping lost the advice), then back
	// the range now, in one call, rather than fault while a kernel writes
	// it; kernels before 5.14 refuse the advice and fault as before.
	_ = syscall.Madvise(b, madvHugepage)
	_ = syscall.Madvise(b, madvPopulateWrite)
	return nil
}

// MADV_POPULATE_WRITE (Linux 5.14) and MADV_HUGEPAGE, which the syscall
// package does not name.
const (
	madvPopulateWrite = 23
	madvHugepage      = 14
)

// Unmap gives the range's memory back and takes its access away: a fresh
// mapping with no access over it (MAP_FIXED, within the heap's own
// reservation, so nothing else can be there). The kernel drops the pages
// and their commit charge; madvise(MADV_DONTNEED) would keep the charge,
// which under strict overcommit would refuse later maps.
func (HostAllocator) Unmap(s memory.Storage, off, bytes int64) {
	b := pageBytes(s, off, bytes)
	_, _, errno := syscall.Syscall6(syscall.SYS_MMAP, uintptr(unsafe.Pointer(&b[0])), uintptr(bytes), syscall.PROT_NONE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_FIXED|syscall.MAP_NORESERVE, ^uintptr(0), 0)
	if errno != 0 {
		panic(fmt.Sprintf("backend/cpu: mmap over %s: %v", memory.FormatBytes(bytes), errno))
	}
}

// Release unmaps the reservation.
func (HostAllocator) Release(s memory.Storage) {
	h := s.(*hostBlock).heap
	h.cleanup.Stop()
	if err := syscall.Munmap(h.mapping); err != nil {
		panic(fmt.Sprintf("backend/cpu: munmap: %v", err))
	}
}
