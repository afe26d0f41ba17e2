package cuda

import (
	"sync"
	"unsafe"
)

// Uploads go through pinned staging on the copy stream. cuMemcpyHtoD from
// pageable memory first waits for all the work issued before it (a stream
// sync), so each micro-batch's upload would stall the device's queue of
// steps there. Upload instead copies the bytes into the next of
// stagingSlots pinned buffers and issues the copy on the copy stream,
// ordered as the offload copies are (copyAsync, order): after the work
// issued before it, and before the work after it that touches its bytes.
// The host waits only for the copy that last used the slot, stagingSlots
// uploads back. Uploads above maxStaged (a checkpoint's large tensors)
// take cuMemcpyHtoD. The slots are pinned host memory, outside the pool
// (none is device memory), and live as long as the backend.
const (
	stagingSlots = 4
	maxStaged    = 16 << 20
)

// staging is the upload slots and the next one to use.
type staging struct {
	mu    sync.Mutex
	slots [stagingSlots]stagingSlot
	next  int
}

// stagingSlot is one pinned buffer and the event of its last copy (0:
// none pending).
type stagingSlot struct {
	p     unsafe.Pointer
	bytes int64
	done  Event
}

// upload copies src into the device bytes p: staged on the copy stream,
// or with cuMemcpyHtoD where src is large or no pinned memory is to be had.
func (b *Backend) upload(what string, p devicePtr, src []byte) {
	if b.failed() != nil || len(src) == 0 {
		return
	}
	if len(src) <= maxStaged && b.stage(what, p, src) {
		return
	}
	b.order(p)
	b.blockingUploads.Add(1)
	b.finish(what, b.drv.CopyHtoD(p.addr, src))
}

// stage copies src into the next slot (once its last copy is done) and
// issues its copy into p; false where the slot could not be had.
func (b *Backend) stage(what string, p devicePtr, src []byte) bool {
	st := &b.staging
	st.mu.Lock()
	defer st.mu.Unlock()
	s := &st.slots[st.next]
	if s.done != 0 {
		b.fail("cuEventSynchronize", b.drv.EventSync(s.done))
		b.fail("cuEventDestroy", b.drv.ReleaseEvent(s.done))
		s.done = 0
	}
	if s.bytes < int64(len(src)) {
		if s.p != nil {
			b.fail("cuMemFreeHost", b.drv.FreeHost(s.p))
			s.p, s.bytes = nil, 0
		}
		n := max(int64(64<<10), int64(len(src)))
		ptr, err := b.drv.AllocHost(n)
		if err != nil {
			return false
		}
		s.p, s.bytes = ptr, n
	}
	st.next = (st.next + 1) % stagingSlots
	copy(unsafe.Slice((*byte)(s.p), len(src)), src)
	b.copyAsync(what, p, func() error {
		return b.drv.CopyToDeviceAsync(p.addr, s.p, int64(len(src)))
	})
	done, err := b.drv.Record(CopyStream)
	b.fail(what, err)
	if err == nil {
		s.done = done
	}
	return true
}

// forget gives back the slots' events once the device has done
// everything (Sync): their copies are done.
func (st *staging) forget(b *Backend) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := range st.slots {
		if s := &st.slots[i]; s.done != 0 {
			b.fail("cuEventDestroy", b.drv.ReleaseEvent(s.done))
			s.done = 0
		}
	}
}
