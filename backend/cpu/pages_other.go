//go:build !linux

package cpu

import (
	"errors"

	"github.com/memunet/memunet/memory"
)

// hostHeap is never made here: host memory does not page on this system.
type hostHeap struct{ whole bool }

// allocMapped maps nothing here: Alloc takes Go memory.
func allocMapped(int64) (memory.Storage, bool, error) { return nil, false, nil }

// freeMapped is never called.
func freeMapped(*hostBlock) {}

var errNoPages = errors.New("backend/cpu: host memory does not page on this system")

// PageSize is 0: the pool takes segments of Go memory instead.
func (HostAllocator) PageSize() int64 { return 0 }

// Reserve is never called (PageSize is 0).
func (HostAllocator) Reserve(int64) (memory.Storage, error) { return nil, errNoPages }

// Map is never called.
func (HostAllocator) Map(memory.Storage, int64, int64) error { return errNoPages }

// Unmap is never called.
func (HostAllocator) Unmap(memory.Storage, int64, int64) {}

// Release is never called.
func (HostAllocator) Release(memory.Storage) {}
