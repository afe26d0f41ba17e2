package model

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
)

// testDevice is an unlimited pool on the CPU backend.
func testDevice() *Device { return NewDevice(cpu.New(), memory.Options{}) }

// segmentDevice is a CPU device whose pool takes segments of host memory:
// for tests that squeeze the capacity to the byte, which a paged pool
// counts in whole 2 MiB pages.
func segmentDevice(opts memory.Options) *Device {
	return &Device{Backend: cpu.New(), Pool: memory.NewPool(segments{cpu.HostAllocator{}}, opts)}
}

// segments hides an allocator's pages.
type segments struct{ memory.Allocator }

// testTarget uploads host class indices into a new Uint8 buffer of dev (an
// activations allocation the caller frees with dev.Pool.MustFree).
func testTarget(dev *Device, target []uint8) backend.View {
	v, err := allocView(dev, memory.Activations, backend.Uint8, len(target))
	if err != nil {
		panic(err)
	}
	dev.Backend.Upload(v, target)
	return v
}

// gcTarget is host class indices on a device of their own, so that the
// device under test holds only what its layers allocate.
func gcTarget(target []uint8) backend.View { return testTarget(testDevice(), target) }
