package cuda

import (
	"fmt"
	"unsafe"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

var _ backend.Offloader = (*Backend)(nil)

// HostAllocator is pinned host memory (cuMemHostAlloc): the device copies
// it at full bus speed.
func (b *Backend) HostAllocator() memory.Allocator { return hostAllocator{b} }

type hostAllocator struct{ b *Backend }

// hostBlock is the Storage of a pinned host buffer.
type hostBlock struct {
	p     unsafe.Pointer
	bytes int64
}

func (a hostAllocator) Name() string { return a.b.Name() + " pinned host" }

func (a hostAllocator) Alloc(bytes int64) (memory.Storage, error) {
	p, err := a.b.drv.AllocHost(bytes)
	if err != nil {
		return nil, fmt.Errorf("cuMemHostAlloc of %s: %w", memory.FormatBytes(bytes), err)
	}
	return &hostBlock{p, bytes}, nil
}

// Slice is the pinned memory of s from byte off.
func (a hostAllocator) Slice(s memory.Storage, off, bytes int64) memory.Storage {
	blk := s.(*hostBlock)
	if off < 0 || off+bytes > blk.bytes {
		panic(fmt.Sprintf("backend/cuda: slice [%d, %d) of a %d-byte pinned block", off, off+bytes, blk.bytes))
	}
	return &hostBlock{unsafe.Add(blk.p, off), bytes}
}

// Free is cuMemFreeHost, once the copy stream has finished with it.
func (a hostAllocator) Free(s memory.Storage) {
	a.b.awaitCopyStream()
	a.b.fail("cuMemFreeHost", a.b.drv.FreeHost(s.(*hostBlock).p))
}

// hostBytes is a pinned view's memory.
func hostBytes(v backend.View) []byte {
	blk, ok := v.Buf.Storage().(*hostBlock)
	if !ok {
		panic(fmt.Sprintf("backend/cuda: a buffer of %s memory is not pinned host memory", v.Buf.Allocator().Name()))
	}
	return unsafe.Slice((*byte)(unsafe.Add(blk.p, offset(v, blk.bytes))), v.Bytes())
}

// ToHost copies device memory src into pinned dst on the copy stream
// (cuMemcpyDtoHAsync), once the compute stream has finished the work issued
// before it; the computation goes on meanwhile, and src's bytes are not
// written by later compute-stream work before the copy has read them, even
// where the pool gives them out again (streams.go). Where the device has
// failed, dst is zeroed and Sync returns the error (the step that
// offloaded fails).
func (b *Backend) ToHost(dst, src backend.View) {
	if dst.DT != src.DT || dst.Len != src.Len {
		panic(fmt.Sprintf("backend/cuda: offload of %v into %v", src, dst))
	}
	p := anyPtr(src)
	h := hostBytes(dst)
	if len(h) == 0 {
		return
	}
	if b.failed() != nil {
		clear(h)
		return
	}
	b.copyAsync("ToHost", p, func() error { return b.drv.CopyToHostAsync(unsafe.Pointer(&h[0]), p.addr, p.bytes) })
}

// ToDevice copies pinned src into device memory dst on the copy stream
// (cuMemcpyHtoDAsync), once the compute stream has finished the work issued
// before it (which may have used dst's bytes before the pool gave them
// out); compute-stream work that touches dst waits for the copy.
func (b *Backend) ToDevice(dst, src backend.View) {
	if dst.DT != src.DT || dst.Len != src.Len {
		panic(fmt.Sprintf("backend/cuda: copy of %v into %v", src, dst))
	}
	p := anyPtr(dst)
	if h := hostBytes(src); len(h) > 0 {
		b.copyAsync("ToDevice", p, func() error { return b.drv.CopyToDeviceAsync(p.addr, unsafe.Pointer(&h[0]), p.bytes) })
	}
}
