package kernels

import (
	"fmt"
	"sync"

	"github.com/memunet/memunet/backend"
)

// Slice conversions between float32 and the 16-bit formats (see
// backend.F32ToF16 and friends for the formats and the scalar functions): the
// same bits as the scalar functions, elementwise, in parallel for large n,
// with F16C/AVX2 assembly where the CPU has it.

// halfChunk is the minimum number of elements per goroutine in the slice
// conversions: the work per element is a few ns, so smaller chunks would be
// dominated by goroutine start-up.
const halfChunk = 16 << 10

func checkHalfLen(what string, dst, src int) {
	if dst != src {
		panic(fmt.Sprintf("kernels: %s: len(dst)=%d != len(src)=%d", what, dst, src))
	}
}

// halfImpl is one implementation of the slice conversions, each converting
// len(src) values serially (len(dst) >= len(src)). The pure-Go one applies
// the scalar functions; the assembly one (half_amd64.s: F16C for float16,
// AVX2 for bfloat16) is chosen at run time where the CPU has it. Tests run
// both against the scalar functions.
type halfImpl struct {
	name                string
	f32ToF16, f32ToBF16 func(dst []uint16, src []float32)
	f16ToF32, bf16ToF32 func(dst []float32, src []uint16)
}

func genericHalf() halfImpl {
	return halfImpl{
		name: "go",
		f32ToF16: func(dst []uint16, src []float32) {
			dst = dst[:len(src)]
			for i, v := range src {
				dst[i] = backend.F32ToF16(v)
			}
		},
		f32ToBF16: func(dst []uint16, src []float32) {
			dst = dst[:len(src)]
			for i, v := range src {
				dst[i] = backend.F32ToBF16(v)
			}
		},
		f16ToF32: func(dst []float32, src []uint16) {
			dst = dst[:len(src)]
			for i, v := range src {
				dst[i] = backend.F16ToF32(v)
			}
		},
		bf16ToF32: func(dst []float32, src []uint16) {
			dst = dst[:len(src)]
			for i, v := range src {
				dst[i] = backend.BF16ToF32(v)
			}
		},
	}
}

// bestHalf is the fastest implementation this CPU supports, chosen once:
// the choice depends on the CPU alone, and making it builds the assembly
// wrappers (20 allocations), which the per-call choosers (Widen, the
// slice conversions, the 16-bit operations' values) would otherwise repeat.
var bestHalf = sync.OnceValue(func() halfImpl {
	if h, ok := asmHalf(); ok {
		return h
	}
	return genericHalf()
})

// F32ToF16Slice sets dst[i] = backend.F32ToF16(src[i]); it runs in parallel for large
// slices. It panics if the lengths differ.
func F32ToF16Slice(dst []uint16, src []float32) { (*Team)(nil).F32ToF16Slice(dst, src) }

// F16ToF32Slice sets dst[i] = backend.F16ToF32(src[i]); it runs in parallel for large
// slices. It panics if the lengths differ.
func F16ToF32Slice(dst []float32, src []uint16) { (*Team)(nil).F16ToF32Slice(dst, src) }

// F32ToBF16Slice sets dst[i] = backend.F32ToBF16(src[i]); it runs in parallel for
// large slices. It panics if the lengths differ.
func F32ToBF16Slice(dst []uint16, src []float32) { (*Team)(nil).F32ToBF16Slice(dst, src) }

// BF16ToF32Slice sets dst[i] = backend.BF16ToF32(src[i]); it runs in parallel for
// large slices. It panics if the lengths differ.
func BF16ToF32Slice(dst []float32, src []uint16) { (*Team)(nil).BF16ToF32Slice(dst, src) }

// F32ToF16Slice is the package's F32ToF16Slice on the team.
func (t *Team) F32ToF16Slice(dst []uint16, src []float32) {
	checkHalfLen("F32ToF16Slice", len(dst), len(src))
	f := bestHalf().f32ToF16
	t.For(len(src), halfChunk, func(lo, hi int) { f(dst[lo:hi], src[lo:hi]) })
}

// F16ToF32Slice is the package's F16ToF32Slice on the team.
func (t *Team) F16ToF32Slice(dst []float32, src []uint16) {
	checkHalfLen("F16ToF32Slice", len(dst), len(src))
	f := bestHalf().f16ToF32
	t.For(len(src), halfChunk, func(lo, hi int) { f(dst[lo:hi], src[lo:hi]) })
}

// F32ToBF16Slice is the package's F32ToBF16Slice on the team.
func (t *Team) F32ToBF16Slice(dst []uint16, src []float32) {
	checkHalfLen("F32ToBF16Slice", len(dst), len(src))
	f := bestHalf().f32ToBF16
	t.For(len(src), halfChunk, func(lo, hi int) { f(dst[lo:hi], src[lo:hi]) })
}

// BF16ToF32Slice is the package's BF16ToF32Slice on the team.
func (t *Team) BF16ToF32Slice(dst []float32, src []uint16) {
	checkHalfLen("BF16ToF32Slice", len(dst), len(src))
	f := bestHalf().bf16ToF32
	t.For(len(src), halfChunk, func(lo, hi int) { f(dst[lo:hi], src[lo:hi]) })
}

// Widen is this CPU's fastest serial conversion of dt's bit patterns
// (Float16 or BFloat16) to float32, the same bits as the scalar function:
// for a caller that converts block by block and chooses once per call.
// len(dst) >= len(src).
func Widen(dt backend.DType) func(dst []float32, src []uint16) {
	switch dt {
	case backend.Float16:
		return bestHalf().f16ToF32
	case backend.BFloat16:
		return bestHalf().bf16ToF32
	}
	panic(fmt.Sprintf("kernels: widen %s", dt))
}

// Narrow is Widen's inverse, rounding to nearest even as backend.F32ToF16
// and backend.F32ToBF16 do. len(dst) >= len(src).
func Narrow(dt backend.DType) func(dst []uint16, src []float32) {
	switch dt {
	case backend.Float16:
		return bestHalf().f32ToF16
	case backend.BFloat16:
		return bestHalf().f32ToBF16
	}
	panic(fmt.Sprintf("kernels: narrow %s", dt))
}
