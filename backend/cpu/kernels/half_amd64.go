//go:build amd64 && !noasm

package kernels

import (
	"github.com/memunet/memunet/backend"
	"golang.org/x/sys/cpu"
)

// asmHalfImpls returns the assembly conversions this CPU supports, fastest
// last: float16 with F16C (and AVX), bfloat16 with AVX2 (what a CPU lacks
// stays pure Go), then all four with AVX-512, 16 values a step.
func asmHalfImpls() []halfImpl {
	var impls []halfImpl
	h := genericHalf()
	ok := false
	if cpu.X86.HasAVX && cpu.X86.HasF16C {
		h.name, ok = "f16c", true
		h.f32ToF16, h.f16ToF32 = convertAsm(8, f32ToF16F16C, backend.F32ToF16), convertAsm(8, f16ToF32F16C, backend.F16ToF32)
	}
	if cpu.X86.HasAVX2 {
		if ok {
			h.name = "f16c+avx2"
		} else {
			h.name = "avx2"
		}
		ok = true
		h.f32ToBF16, h.bf16ToF32 = convertAsm(16, f32ToBF16AVX2, backend.F32ToBF16), convertAsm(8, bf16ToF32AVX2, backend.BF16ToF32)
	}
	if ok {
		impls = append(impls, h)
	}
	if cpu.X86.HasAVX512F {
		impls = append(impls, halfImpl{
			name:      "avx512",
			f32ToF16:  convertAsm(16, f32ToF16AVX512, backend.F32ToF16),
			f16ToF32:  convertAsm(16, f16ToF32AVX512, backend.F16ToF32),
			f32ToBF16: convertAsm(16, f32ToBF16AVX512, backend.F32ToBF16),
			bf16ToF32: convertAsm(16, bf16ToF32AVX512, backend.BF16ToF32),
		})
	}
	return impls
}

// asmHalf is the fastest of asmHalfImpls, if any.
func asmHalf() (halfImpl, bool) {
	impls := asmHalfImpls()
	if len(impls) == 0 {
		return halfImpl{}, false
	}
	return impls[len(impls)-1], true
}

// convertAsm wraps an assembly conversion of a positive multiple of block
// values: it converts the longest such prefix, the scalar function the
// rest; len(dst) >= len(src).
func convertAsm[D, S uint16 | float32](block int, kern func(dst *D, src *S, n int), scalar func(S) D) func(dst []D, src []S) {
	return func(dst []D, src []S) {
		dst = dst[:len(src)]
		n := len(src) / block * block
		if n > 0 {
			kern(&dst[0], &src[0], n)
		}
		for i := n; i < len(src); i++ {
			dst[i] = scalar(src[i])
		}
	}
}

// In half_amd64.s; n is a positive multiple of 8 (16 for f32ToBF16AVX2
// and the AVX-512 ones).
//
//go:noescape
func f32ToF16F16C(dst *uint16, src *float32, n int)

//go:noescape
func f16ToF32F16C(dst *float32, src *uint16, n int)

//go:noescape
func f32ToBF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func bf16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f32ToF16AVX512(dst *uint16, src *float32, n int)

//go:noescape
func f16ToF32AVX512(dst *float32, src *uint16, n int)

//go:noescape
func f32ToBF16AVX512(dst *uint16, src *float32, n int)

//go:noescape
func bf16ToF32AVX512(dst *float32, src *uint16, n int)
