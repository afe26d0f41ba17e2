package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

var _ backend.Offloader = CPU{}

// HostAllocator is host memory: on the CPU, offloading moves bytes from
// one pool to another (what the device pool saves is real; the copy is a
// memcpy).
func (CPU) HostAllocator() memory.Allocator { return HostAllocator{} }

// ToHost copies src into dst.
func (CPU) ToHost(dst, src backend.View) { copyView(dst, src) }

// ToDevice copies src into dst.
func (CPU) ToDevice(dst, src backend.View) { copyView(dst, src) }

func copyView(dst, src backend.View) {
	if dst.DT != src.DT || dst.Len != src.Len {
		panic(fmt.Sprintf("backend/cpu: copy of %v into %v", src, dst))
	}
	copy(bytesOf(dst), bytesOf(src))
}
