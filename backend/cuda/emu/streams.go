//go:build cudaemu

package emu

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/memunet/memunet/backend/cuda"
)

// The two streams, as honestly as one host thread can: the compute stream
// runs each kernel, memset and synchronous copy when it is issued (so its
// events have happened as soon as they are recorded), while the copy
// stream runs nothing until something must wait for it: a WaitEvent of the
// compute stream, an EventSync or EventTime, a Sync. A copy therefore runs
// as late as the ordering allows, and any work that relies on an order no
// event gave goes wrong here: a kernel, memset or copy on the compute
// stream that touches bytes a queued copy reads or writes is a fault (the
// streams race), as is freeing memory (device or pinned) a queued copy
// still uses.

// copyOp is one piece of the copy stream's queue: a copy, or the point an
// event marks (event != 0).
type copyOp struct {
	toDevice bool
	dev      uintptr
	host     unsafe.Pointer
	n        int64
	event    cuda.Event
}

// eventState is an event: whether it has happened, and when.
type eventState struct {
	done bool
	at   time.Time
}

// streams is the device's copy queue and events; guarded by Device.mu.
type streams struct {
	queue  []copyOp
	events map[cuda.Event]*eventState
	next   cuda.Event
	host   map[uintptr]int64 // pinned blocks (AllocHost), by address
}

func (d *Device) CopyToDeviceAsync(dst uintptr, src unsafe.Pointer, n int64) error {
	return d.enqueue(copyOp{toDevice: true, dev: dst, host: src, n: n})
}

func (d *Device) CopyToHostAsync(dst unsafe.Pointer, src uintptr, n int64) error {
	return d.enqueue(copyOp{dev: src, host: dst, n: n})
}

func (d *Device) enqueue(op copyOp) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fault != nil {
		return d.fault
	}
	if _, err := d.pointerLocked(op.dev, op.n); err != nil {
		return err
	}
	if !d.pinnedLocked(op.host, op.n) {
		return fmt.Errorf("emulated device: an async copy of %d bytes at host %p, which is not pinned memory", op.n, op.host)
	}
	d.streams.queue = append(d.streams.queue, op)
	return nil
}

// pinnedLocked reports whether [p, p+n) lies in one pinned block.
func (d *Device) pinnedLocked(p unsafe.Pointer, n int64) bool {
	a := uintptr(p)
	for base, bytes := range d.streams.host {
		if a >= base && int64(a-base)+n <= bytes {
			return true
		}
	}
	return false
}

func (d *Device) Record(s cuda.Stream) (cuda.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.streams.events == nil {
		d.streams.events = map[cuda.Event]*eventState{}
	}
	d.streams.next++
	e := d.streams.next
	st := &eventState{}
	d.streams.events[e] = st
	if s == cuda.ComputeStream || len(d.streams.queue) == 0 {
		st.done, st.at = true, time.Now()
	} else {
		d.streams.queue = append(d.streams.queue, copyOp{event: e})
	}
	return e, d.fault
}

// WaitEvent: the compute stream waiting for the copy stream runs the
// copies up to e now; the copy stream waits for the compute stream's
// events, which have all happened.
func (d *Device) WaitEvent(s cuda.Stream, e cuda.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.streams.events[e]; !ok {
		return fmt.Errorf("emulated device: wait for event %d, which is not recorded", e)
	}
	if s == cuda.ComputeStream {
		d.runCopiesLocked(e)
	}
	return d.fault
}

func (d *Device) EventDone(e cuda.Event) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.streams.events[e]
	if !ok {
		return false, fmt.Errorf("emulated device: query of event %d, which is not recorded", e)
	}
	return st.done, d.fault
}

func (d *Device) EventSync(e cuda.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.streams.events[e]; !ok {
		return fmt.Errorf("emulated device: sync with event %d, which is not recorded", e)
	}
	d.runCopiesLocked(e)
	return d.fault
}

// EventTime is the host time between the two events' happening.
func (d *Device) EventTime(from, to cuda.Event) (time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, okA := d.streams.events[from]
	b, okB := d.streams.events[to]
	if !okA || !okB {
		return 0, fmt.Errorf("emulated device: time between events %d and %d, not both recorded", from, to)
	}
	d.runCopiesLocked(from)
	d.runCopiesLocked(to)
	return b.at.Sub(a.at), d.fault
}

func (d *Device) ReleaseEvent(e cuda.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.streams.events[e]; !ok {
		return fmt.Errorf("emulated device: release of event %d, which is not recorded", e)
	}
	delete(d.streams.events, e)
	return nil
}

// PendingCopies is how many copies the copy stream has queued and not run
// yet: those no later work has had to wait for.
func (d *Device) PendingCopies() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, op := range d.streams.queue {
		if op.event == 0 {
			n++
		}
	}
	return n
}

// LiveEvents is how many events are recorded and not released.
func (d *Device) LiveEvents() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.streams.events)
}

// runCopiesLocked runs the copy queue up to event until (all of it for 0,
// nothing when until is not queued).
func (d *Device) runCopiesLocked(until cuda.Event) {
	end := len(d.streams.queue)
	if until != 0 {
		end = -1
		for i, op := range d.streams.queue {
			if op.event == until {
				end = i + 1
				break
			}
		}
		if end < 0 {
			return // it has happened
		}
	}
	for _, op := range d.streams.queue[:end] {
		if op.event != 0 {
			if st, ok := d.streams.events[op.event]; ok {
				st.done, st.at = true, time.Now()
			}
			continue
		}
		if d.fault != nil {
			continue
		}
		mem, err := d.pointerLocked(op.dev, op.n)
		if err != nil {
			d.fault = fmt.Errorf("emulated device: copy stream: %w (freed before the copy ran)", err)
			continue
		}
		dev, host := unsafe.Slice((*byte)(mem), op.n), unsafe.Slice((*byte)(op.host), op.n)
		if op.toDevice {
			copy(dev, host)
		} else {
			copy(host, dev)
		}
	}
	d.streams.queue = d.streams.queue[end:]
}

// raceLocked is a fault where [p, p+n), which work on the compute stream
// named what touches, overlaps a queued copy: the streams race.
func (d *Device) raceLocked(what string, p uintptr, n int64) {
	if d.fault != nil || n <= 0 {
		return
	}
	for _, op := range d.streams.queue {
		if op.event == 0 && p < op.dev+uintptr(op.n) && op.dev < p+uintptr(n) {
			dir := "from"
			if op.toDevice {
				dir = "into"
			}
			d.fault = fmt.Errorf("emulated device: %s touches bytes [%#x, %#x), which a copy %s device memory at %#x on the copy stream, "+
				"not waited for, uses: the streams race", what, p, p+uintptr(n), dir, op.dev)
			return
		}
	}
}

// freeLocked is a fault where a queued copy uses [p, p+n), memory being
// freed (device memory, or pinned host memory).
func (d *Device) freeLocked(what string, p uintptr, n int64, host bool) {
	for _, op := range d.streams.queue {
		a, b := op.dev, op.dev+uintptr(op.n)
		if host {
			a = uintptr(op.host)
			b = a + uintptr(op.n)
		}
		if op.event == 0 && p < b && a < p+uintptr(n) && d.fault == nil {
			d.fault = fmt.Errorf("emulated device: %s of %d bytes at %#x, which a copy on the copy stream, not waited for, still uses",
				what, n, p)
		}
	}
}
