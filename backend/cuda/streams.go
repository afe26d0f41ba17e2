package cuda

import (
	"time"

	"github.com/memunet/memunet/backend"
)

// The backend's two streams (Driver): the compute stream runs every
// operation in issue order; the copy stream runs the offload copies
// (ToHost, ToDevice), so a copy overlaps the computation issued after it.
// Events order the two: a copy starts once the compute stream has
// finished the work issued before it (which wrote its source, or last used
// its destination), and later compute-stream work that touches the copy's
// device bytes waits for the copy first (order). So a buffer the pool
// frees while a copy still reads it, and gives out again, is not written
// before the copy has passed it; memory given back to the driver waits for
// the copies that use it (awaitCopies).

// pendingCopy is device memory a copy on the copy stream uses until done.
type pendingCopy struct {
	lo, hi uintptr
	done   Event
}

// maxPending is how many copies the backend tracks before it drops those
// that are done.
const maxPending = 64

// copyAsync issues copy (a CopyToDeviceAsync or CopyToHostAsync of the
// device bytes p) on the copy stream after the compute stream's work so
// far, and records that p is in use until it is done.
func (b *Backend) copyAsync(what string, p devicePtr, copy func() error) {
	if b.failed() != nil || p.bytes == 0 {
		return
	}
	ready, err := b.drv.Record(ComputeStream)
	if err == nil {
		err = b.drv.WaitEvent(CopyStream, ready)
		b.fail("cuEventDestroy", b.drv.ReleaseEvent(ready))
	}
	if err == nil {
		err = copy()
	}
	var done Event
	if err == nil {
		done, err = b.drv.Record(CopyStream)
	}
	if err != nil {
		b.fail(what, err)
		return
	}
	b.mu.Lock()
	b.pending = append(b.pending, pendingCopy{p.addr, p.addr + uintptr(p.bytes), done})
	prune := len(b.pending) > maxPending
	b.mu.Unlock()
	if prune {
		b.pruneCopies()
	}
}

// pruneCopies forgets the copies that are done.
func (b *Backend) pruneCopies() {
	b.mu.Lock()
	var done []Event
	keep := b.pending[:0]
	for _, c := range b.pending {
		if ok, err := b.drv.EventDone(c.done); err == nil && ok {
			done = append(done, c.done)
		} else {
			keep = append(keep, c)
		}
	}
	b.pending = keep
	b.mu.Unlock()
	for _, e := range done {
		b.fail("cuEventDestroy", b.drv.ReleaseEvent(e))
	}
}

// takeCopies removes and returns the pending copies that use any byte of
// ps.
func (b *Backend) takeCopies(ps []devicePtr) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	var hit []Event
	keep := b.pending[:0]
	for _, c := range b.pending {
		overlaps := false
		for _, p := range ps {
			overlaps = overlaps || (p.bytes > 0 && p.addr < c.hi && c.lo < p.addr+uintptr(p.bytes))
		}
		if overlaps {
			hit = append(hit, c.done)
		} else {
			keep = append(keep, c)
		}
	}
	b.pending = keep
	return hit
}

// order makes the compute stream wait for the pending copies that use
// any byte of ps, before work that touches them is issued on it.
func (b *Backend) order(ps ...devicePtr) {
	for _, e := range b.takeCopies(ps) {
		b.fail("cuStreamWaitEvent", b.drv.WaitEvent(ComputeStream, e))
		b.fail("cuEventDestroy", b.drv.ReleaseEvent(e))
	}
}

// awaitCopies waits on the host for the pending copies that use any byte
// of ps (memory about to go back to the driver).
func (b *Backend) awaitCopies(ps ...devicePtr) {
	for _, e := range b.takeCopies(ps) {
		b.fail("cuEventSynchronize", b.drv.EventSync(e))
		b.fail("cuEventDestroy", b.drv.ReleaseEvent(e))
	}
}

// awaitCopyStream waits on the host for everything issued on the copy
// stream (pinned memory about to go back to the driver).
func (b *Backend) awaitCopyStream() {
	e, err := b.drv.Record(CopyStream)
	if err == nil {
		err = b.drv.EventSync(e)
		b.fail("cuEventDestroy", b.drv.ReleaseEvent(e))
	}
	b.fail("cuEventSynchronize", err)
}

var _ backend.Clock = (*Backend)(nil)

// Mark records an event on the compute stream: the profile's time comes
// from the device's own clock (events), not from the host's issuing of
// asynchronous work. 0 where the device has failed.
func (b *Backend) Mark() backend.Mark {
	if b.failed() != nil {
		return 0
	}
	e, err := b.drv.Record(ComputeStream)
	if err != nil {
		b.fail("cuEventRecord", err)
		return 0
	}
	return backend.Mark(e)
}

// Between is the device's time from mark from to mark to, waiting for the
// work before both; 0 where either is 0 or the device failed.
func (b *Backend) Between(from, to backend.Mark) time.Duration {
	if from == 0 || to == 0 || b.failed() != nil {
		return 0
	}
	d, err := b.drv.EventTime(Event(from), Event(to))
	b.fail("cuEventElapsedTime", err)
	return d
}

// ReleaseMark gives a mark's event back.
func (b *Backend) ReleaseMark(m backend.Mark) {
	if m != 0 {
		b.fail("cuEventDestroy", b.drv.ReleaseEvent(Event(m)))
	}
}
