//go:build amd64 && !noasm

package kernels

import (
	"github.com/memunet/memunet/backend"
	"golang.org/x/sys/cpu"
)

// asmHalf returns the assembly conversions this CPU supports: float16 with
// F16C (and AVX), bfloat16 with AVX2. What it lacks stays pure Go.
func asmHalf() (halfImpl, bool) {
	h := genericHalf()
	ok := false
	if cpu.X86.HasAVX && cpu.X86.HasF16C {
		h.name, ok = "f16c", true
		h.f32ToF16, h.f16ToF32 = f32ToF16Asm, f16ToF32Asm
	}
	if cpu.X86.HasAVX2 {
		if ok {
			h.name = "f16c+avx2"
		} else {
			h.name = "avx2"
		}
		ok = true
		h.f32ToBF16, h.bf16ToF32 = f32ToBF16Asm, bf16ToF32Asm
	}
	return h, ok
}

// The wrappers convert the largest multiple of the assembly's block in
// assembly and the rest with the scalar functions; len(dst) == len(src).

func f32ToF16Asm(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	n := len(src) &^ 7
	if n > 0 {
		f32ToF16F16C(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = backend.F32ToF16(src[i])
	}
}

func f16ToF32Asm(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	n := len(src) &^ 7
	if n > 0 {
		f16ToF32F16C(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = backend.F16ToF32(src[i])
	}
}

func f32ToBF16Asm(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	n := len(src) &^ 15
	if n > 0 {
		f32ToBF16AVX2(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = backend.F32ToBF16(src[i])
	}
}

func bf16ToF32Asm(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	n := len(src) &^ 7
	if n > 0 {
		bf16ToF32AVX2(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = backend.BF16ToF32(src[i])
	}
}

// In half_amd64.s; n is a positive multiple of 8 (16 for f32ToBF16AVX2).
//
//go:noescape
func f32ToF16F16C(dst *uint16, src *float32, n int)

//go:noescape
func f16ToF32F16C(dst *float32, src *uint16, n int)

//go:noescape
func f32ToBF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func bf16ToF32AVX2(dst *float32, src *uint16, n int)
