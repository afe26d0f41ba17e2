package cuda

import _ "embed"

// The kernels as PTX for compute_80 (go generate: nvcc from kernels/*.cu),
// which the driver JIT-compiles for the GPU at hand.
var (
	//go:embed kernels/ops.ptx
	OpsPTX string
	//go:embed kernels/gemm.ptx
	GEMMPTX string
)
