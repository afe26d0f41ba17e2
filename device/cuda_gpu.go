//go:build gpu

package device

import (
	"github.com/memunet/memunet/backend"
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

// loadCUDNN loads cuDNN once per process (cudnn.Load) and names it.
var loadCUDNN = func() (string, error) {
	l, err := cudnn.Load()
	if err != nil {
		return "", err
	}
	return l.String(), nil
}
