package cuda

import _ "embed"

// The kernels as fatbins (go generate -tags cudagen: nvcc from
// kernels/*.cu; cudagen.go says what each holds), loaded with
// cuModuleLoadData.
var (
	//go:embed kernels/ops.fatbin
	OpsFatbin string
	//go:embed kernels/gemm.fatbin
	GEMMFatbin string
)
