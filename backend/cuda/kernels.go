package cuda

import _ "embed"

// The kernels as PTX for compute_80 (nvcc from kernels/*.cu: cudagen.go),
// which the driver JIT-compiles for the GPU at hand.
var (
	//go:embed kernels/ops.ptx
	OpsPTX string
	//go:embed kernels/gemm.ptx
	GEMMPTX string
)
