package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
)

// TestHalfSlices: the slice conversions equal the scalar ones elementwise
// (on random bit patterns, NaNs included) for odd lengths, serial and
// parallel, and panic on length mismatch.
func TestHalfSlices(t *testing.T) {
	for _, procs := range []int{1, 4} {
		for _, n := range []int{0, 1, 17, 100003} {
			t.Run(fmt.Sprintf("p%d_n%d", procs, n), func(t *testing.T) {
				r := seedFor(fmt.Sprintf("half-slices-%d", n))
				f32 := make([]float32, n)
				u16 := make([]uint16, n)
				for i := range n {
					f32[i] = math.Float32frombits(r.Uint32())
					u16[i] = uint16(r.Uint32())
				}
				gotH := make([]uint16, n)
				gotF := make([]float32, n)
				withProcs(procs, func() {
					F32ToF16Slice(gotH, f32)
					for i, v := range f32 {
						if w := backend.F32ToF16(v); gotH[i] != w {
							t.Fatalf("F32ToF16Slice[%d] = %#04x, want %#04x", i, gotH[i], w)
						}
					}
					F32ToBF16Slice(gotH, f32)
					for i, v := range f32 {
						if w := backend.F32ToBF16(v); gotH[i] != w {
							t.Fatalf("F32ToBF16Slice[%d] = %#04x, want %#04x", i, gotH[i], w)
						}
					}
					F16ToF32Slice(gotF, u16)
					for i, v := range u16 {
						if w := backend.F16ToF32(v); math.Float32bits(gotF[i]) != math.Float32bits(w) {
							t.Fatalf("F16ToF32Slice[%d] = %#08x, want %#08x", i, math.Float32bits(gotF[i]), math.Float32bits(w))
						}
					}
					BF16ToF32Slice(gotF, u16)
					for i, v := range u16 {
						if w := backend.BF16ToF32(v); math.Float32bits(gotF[i]) != math.Float32bits(w) {
							t.Fatalf("BF16ToF32Slice[%d] = %#08x, want %#08x", i, math.Float32bits(gotF[i]), math.Float32bits(w))
						}
					}
				})
			})
		}
	}
	mustPanicKernels(t, "F32ToF16Slice", func() { F32ToF16Slice(make([]uint16, 3), make([]float32, 4)) })
	mustPanicKernels(t, "F16ToF32Slice", func() { F16ToF32Slice(make([]float32, 4), make([]uint16, 3)) })
	mustPanicKernels(t, "F32ToBF16Slice", func() { F32ToBF16Slice(nil, make([]float32, 1)) })
	mustPanicKernels(t, "BF16ToF32Slice", func() { BF16ToF32Slice(make([]float32, 1), nil) })
}

// halfImpls is every implementation of the slice conversions this machine
// can run: pure Go always, assembly (F16C/AVX2, AVX-512) where the CPU has
// it.
func halfImpls(t *testing.T) []halfImpl {
	asm := asmHalfImpls()
	if len(asm) == 0 {
		t.Logf("no assembly conversions on this machine/build: testing the Go ones only")
	}
	return append([]halfImpl{genericHalf()}, asm...)
}

// TestHalfImplsMatchScalar: each implementation's slice conversions give
// exactly the scalar functions' bits (which the tests above hold to the
// references) on every 16-bit pattern (widening) and, for narrowing, on
// every float16/bfloat16 value, the exact midpoints between neighbours (the
// ties that round to even), one float32 ulp either side of them, the
// overflow and subnormal boundaries that these include, and a million
// random float32 bit patterns (NaNs with all payloads among them). Slices
// start at odd offsets and have odd lengths so the assembly's block loops
// and the scalar tails both run.
func TestHalfImplsMatchScalar(t *testing.T) {
	var f32 []float32
	add := func(v float32) {
		f32 = append(f32, v, math.Nextafter32(v, float32(math.Inf(1))), math.Nextafter32(v, float32(math.Inf(-1))))
	}
	for h := 0; h < 1<<16; h++ {
		for _, dec := range []func(uint16) float32{backend.F16ToF32, backend.BF16ToF32} {
			v, next := dec(uint16(h)), dec(uint16(h+1))
			add(v)
			if h&0x7fff != 0x7fff && !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) &&
				!math.IsNaN(float64(next)) && !math.IsInf(float64(next), 0) && (h+1)&0x7fff != 0 {
				add(v/2 + next/2) // exact midpoint: one more bit than the format has
			}
		}
	}
	r := seedFor("half-impls")
	for range 1 << 20 {
		f32 = append(f32, math.Float32frombits(r.Uint32()))
	}
	u16 := make([]uint16, 1<<16+5)
	for i := range u16 {
		u16[i] = uint16(i)
	}
	for _, h := range halfImpls(t) {
		for _, off := range []int{0, 3} {
			src := f32[off:]
			gotH := make([]uint16, len(src))
			h.f32ToF16(gotH, src)
			for i, v := range src {
				if w := backend.F32ToF16(v); gotH[i] != w {
					t.Fatalf("%s f32ToF16(%#08x) = %#04x, want %#04x", h.name, math.Float32bits(v), gotH[i], w)
				}
			}
			h.f32ToBF16(gotH, src)
			for i, v := range src {
				if w := backend.F32ToBF16(v); gotH[i] != w {
					t.Fatalf("%s f32ToBF16(%#08x) = %#04x, want %#04x", h.name, math.Float32bits(v), gotH[i], w)
				}
			}
			src16 := u16[off:]
			gotF := make([]float32, len(src16))
			h.f16ToF32(gotF, src16)
			for i, v := range src16 {
				if w := backend.F16ToF32(v); math.Float32bits(gotF[i]) != math.Float32bits(w) {
					t.Fatalf("%s f16ToF32(%#04x) = %#08x, want %#08x", h.name, v, math.Float32bits(gotF[i]), math.Float32bits(w))
				}
			}
			h.bf16ToF32(gotF, src16)
			for i, v := range src16 {
				if w := backend.BF16ToF32(v); math.Float32bits(gotF[i]) != math.Float32bits(w) {
					t.Fatalf("%s bf16ToF32(%#04x) = %#08x, want %#08x", h.name, v, math.Float32bits(gotF[i]), math.Float32bits(w))
				}
			}
		}
		// Short slices: tails only, and exactly one block.
		for _, n := range []int{0, 1, 7, 8, 15, 16, 17} {
			gotH := make([]uint16, n)
			h.f32ToF16(gotH, f32[:n])
			h.f32ToBF16(gotH, f32[:n])
			gotF := make([]float32, n)
			h.f16ToF32(gotF, u16[:n])
			h.bf16ToF32(gotF, u16[:n])
		}
	}
}
