package cuda

import (
	_ "embed"
	"os"
)

// The kernels as fatbins (go generate -tags cudagen: nvcc from
// kernels/*.cu; cudagen.go says what each holds), loaded with
// cuModuleLoadData.
var (
	//go:embed kernels/ops.fatbin
	opsFatbin string
	//go:embed kernels/gemm.fatbin
	gemmFatbin string
	//go:embed kernels/tc.fatbin
	tcFatbin string
	//go:embed kernels/tc2.fatbin
	tc2Fatbin string
)

// TCBlocksEnv set to 2 loads the tensor-core kernels built for two blocks
// an SM (128 registers, a few bytes spilled) instead of one (152-175
// registers, 12.5% occupancy): the device check's occupancy experiment,
// measured beside the default before either becomes the only one.
const TCBlocksEnv = "MEMUNET_CUDA_TC_BLOCKS"

// Fatbin is kernel file module's image (ModuleName).
func Fatbin(module int) string {
	if module == 2 && os.Getenv(TCBlocksEnv) == "2" {
		return tc2Fatbin
	}
	return [...]string{opsFatbin, gemmFatbin, tcFatbin}[module]
}
