//go:build gpu

package device

import (
	"os"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/cudnn"
	"github.com/memunet/memunet/backend/cuda/driverapi"
)

// GPUBuild reports whether this binary has the CUDA backend.
const GPUBuild = true

// openCUDA opens CUDA device index.
func openCUDA(index int) (backend.Backend, error) {
	b, err := driverapi.Open(index)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// DriverLoaded reports whether this process has tried to load the CUDA
// driver: only computing on cuda (or auto) does.
func DriverLoaded() bool { return driverapi.DriverLoaded() }

// openCUDNN loads cuDNN once per process (cudnn.Load) and opens it on
// r's device once (a handle made in its context) as r's convolution
// library, its Find results kept in the cache file for this GPU and
// cuDNN (cudnn.FindCachePath).
var openCUDNN = func(r ConvResolver) (cuda.ConvLibrary, error) {
	l, err := cudnn.Load()
	if err != nil {
		return nil, err
	}
	gpu := "an undescribed GPU"
	if d, ok := r.(Describer); ok {
		_, gpu, _ = strings.Cut(d.Describe(), " ") // the GPU, not its ordinal
	}
	cache := cudnn.OpenFindCache(cudnn.FindCachePath(os.Getenv, gpu, l.String()), gpu, l.String())
	return r.OpenConvLibrary(func() (cuda.ConvLibrary, error) {
		h, err := l.NewHandle()
		if err != nil {
			return nil, err
		}
		return cudnn.NewProvider(h, r.OnContext, cache), nil
	})
}
