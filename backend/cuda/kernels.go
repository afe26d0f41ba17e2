package cuda

import _ "embed"

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
)

// Fatbin is kernel file module's image (ModuleName).
func Fatbin(module int) string { return [...]string{opsFatbin, gemmFatbin, tcFatbin}[module] }
