//go:build !gpu

package device

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
)

// GPUBuild reports whether this binary has the CUDA backend.
const GPUBuild = false

// openCUDA refuses: this is the CPU build.
func openCUDA(index int) (backend.Backend, error) {
	return nil, fmt.Errorf("device: cuda:%d: this memunet is the CPU build; the CUDA backend is in the build with -tags gpu: "+
		"go build -tags gpu ./cmd/memunet on a machine with the CUDA toolkit (docs/gpu.md), or set device: cpu", index)
}

// DriverLoaded reports whether this process has tried to load the CUDA
// driver: never, in the CPU build.
func DriverLoaded() bool { return false }

// openCUDNN refuses: the CPU build has no CUDA backend to give cuDNN to.
var openCUDNN = func(ConvResolver) (cuda.ConvLibrary, error) {
	return nil, fmt.Errorf("cuDNN: this memunet is the CPU build; cuDNN serves the CUDA backend of the build with -tags gpu")
}
