//go:build amd64 && !noasm

package kernels

import "golang.org/x/sys/cpu"

// asmGemm returns the AVX2+FMA implementation when the CPU has both.
func asmGemm() (gemmImpl, bool) {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return gemmImpl{}, false
	}
	return gemmImpl{name: "avx2+fma", kernel: microKernelAVX2}, true
}

// microKernelAVX2 adapts the assembly kernel to microKernel; the driver
// guarantees the slice lengths the assembly relies on.
func microKernelAVX2(kc int, a, b, c []float32, ldc int, alpha, beta float32, overwrite bool) {
	_ = a[kc*gemmMR-1]
	_ = b[kc*gemmNR-1]
	_ = c[(gemmMR-1)*ldc+gemmNR-1]
	mode := 1
	if overwrite {
		mode = 0
	}
	sgemmKernel6x16AVX2(kc, &a[0], &b[0], &c[0], ldc, alpha, beta, mode)
}

// sgemmKernel6x16AVX2 is the 6x16 micro-kernel in gemm_amd64.s: kc >= 1
// steps over packed panels a (kc x 6) and b (kc x 16); C rows are ldc
// floats apart; mode 0 stores alpha*acc, mode 1 alpha*acc + beta*C.
//
//go:noescape
func sgemmKernel6x16AVX2(kc int, a, b, c *float32, ldc int, alpha, beta float32, mode int)
