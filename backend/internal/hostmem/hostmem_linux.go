package hostmem

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// MADV_POPULATE_WRITE (Linux 5.14) and MADV_HUGEPAGE, which the syscall
// package does not name.
const (
	madvPopulateWrite = 23
	madvHugepage      = 14
)

// ErrNoMemory is wrapped by Map's error when the kernel refuses the memory
// (ENOMEM, EAGAIN: the commit limit).
var ErrNoMemory = errors.New("the kernel refused the memory")

// Reserve maps bytes of address space with no access, its start aligned
// to align bytes: the whole mapping (for Release) and the aligned range.
func Reserve(bytes, align int64) (mapping, aligned []byte, err error) {
	m, err := syscall.Mmap(-1, 0, int(bytes+align), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap of %d bytes: %w", bytes, err)
	}
	skip := (align - int64(uintptr(unsafe.Pointer(&m[0])))%align) % align
	// Huge pages where the kernel has them (transparent_hugepage "madvise"
	// or "always"); the advice is only advice, so its error is not one.
	_ = syscall.Madvise(m, madvHugepage)
	return m, m[skip : skip+bytes : skip+bytes], nil
}

// Map makes b readable and writable, and backs it now, in one call, rather
// than fault while it is first written (kernels before 5.14 refuse that
// advice and fault as before).
func Map(b []byte) error {
	err := syscall.Mprotect(b, syscall.PROT_READ|syscall.PROT_WRITE)
	if errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN) {
		return fmt.Errorf("mprotect of %d bytes: %w (%w)", len(b), ErrNoMemory, err)
	}
	if err != nil {
		return fmt.Errorf("mprotect of %d bytes: %w", len(b), err)
	}
	_ = syscall.Madvise(b, madvHugepage) // again: Unmap's fresh mapping lost it
	_ = syscall.Madvise(b, madvPopulateWrite)
	return nil
}

// Unmap gives b's memory back and takes its access away: a fresh mapping
// with no access over it (MAP_FIXED, within a reservation the caller owns,
// so nothing else can be there). The kernel drops the pages and their
// commit charge; madvise(MADV_DONTNEED) would keep the charge, which under
// strict overcommit would refuse later maps.
func Unmap(b []byte) error {
	_, _, errno := syscall.Syscall6(syscall.SYS_MMAP, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), syscall.PROT_NONE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_FIXED|syscall.MAP_NORESERVE, ^uintptr(0), 0)
	if errno != 0 {
		return fmt.Errorf("mmap over %d bytes: %w", len(b), errno)
	}
	return nil
}

// Release unmaps a whole reservation (the mapping Reserve returned).
func Release(mapping []byte) error { return syscall.Munmap(mapping) }
