package noop

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// Noop computes nothing over virtual memory, sized and paged like its
// target.
type Noop struct {
	backend.Sizer // the target's
	target        string
	page          int64 // the target's memory page (memory.Pager), 0 if it takes segments
	hostPage      int64 // the same for its host memory (backend.Offloader)
}

var _ backend.Backend = Noop{}

// New plans for target: its sizes, no memory, no arithmetic.
func New(target backend.Backend) Noop {
	n := Noop{Sizer: target, target: target.Name(), page: pageSize(target.Allocator())}
	if o, ok := target.(backend.Offloader); ok {
		n.hostPage = pageSize(o.HostAllocator())
	}
	return n
}

// pageSize is a's page size, 0 if it does not page.
func pageSize(a memory.Allocator) int64 {
	if p, ok := a.(memory.Pager); ok {
		return p.PageSize()
	}
	return 0
}

// Name is "noop(target)".
func (n Noop) Name() string { return "noop(" + n.target + ")" }

// Allocator is memory.Virtual, paged as the target's memory is, so that
// the plan's pool reserves what the target's would.
func (n Noop) Allocator() memory.Allocator { return memory.Virtual{Page: n.page} }

// Sync has nothing to wait for.
func (Noop) Sync() error { return nil }

// Download writes zeros: a plan never reads garbage.
func (Noop) Download(dst []byte, _ backend.View) { clear(dst) }

// UnscaleCheck reports finite gradients (a planned step is never skipped).
func (Noop) UnscaleCheck([]backend.View, float32) bool { return true }

var _ backend.Offloader = Noop{}

// HostAllocator is virtual too: a plan counts the offloaded bytes in a pool
// of their own.
func (n Noop) HostAllocator() memory.Allocator { return memory.Virtual{Page: n.hostPage} }

// ToHost copies nothing.
func (Noop) ToHost(dst, src backend.View) {}

// ToDevice copies nothing.
func (Noop) ToDevice(dst, src backend.View) {}
