//go:build gpu

// Package probe starts the CUDA driver before gorgonia.org/cu does, so that
// a gpu build on a machine without a usable GPU stops with memunet's own
// message instead of cu's. cu's package initialisation calls cuInit and
// exits the process on failure; Go initialises packages in import-path
// order among those ready, and this package (github.com/memunet/...) needs
// nothing cu does not, so its init runs first.
package probe

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

static const char *probe_error_name(CUresult r) {
	const char *s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == 0) return "unknown CUDA error";
	return s;
}
*/
import "C"

import (
	"fmt"
	"os"
)

func init() {
	if r := C.cuInit(0); r != C.CUDA_SUCCESS {
		fmt.Fprintf(os.Stderr, "memunet: this is the CUDA build (-tags gpu) and the CUDA driver cannot start here (cuInit: %s): "+
			"no NVIDIA GPU or driver on this machine. Use the CPU build (go build ./cmd/memunet) here, or run this binary where nvidia-smi works.\n",
			C.GoString(C.probe_error_name(r)))
		os.Exit(1)
	}
}

// Started is a no-op that callers use to show they rely on this package's
// init having started the driver.
func Started() {}
