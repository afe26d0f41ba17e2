package kernels

import "github.com/memunet/memunet/backend"

// The norms' passes on 16-bit bit patterns (dt Float16 or BFloat16): each
// gives the bits of widening its inputs (backend.F16ToF32 or BF16ToF32),
// the float32 pass and narrowing its output (F32ToF16 or F32ToBF16), with
// no float32 copy: norm16_amd64.s widens in registers (AVX2, and F16C for
// fp16) where the CPU has them; the rest, and every value elsewhere, goes
// through a block on the stack and the Go passes.

// halfBlock is the Go path's block: a multiple of 16, so the sums go on
// in the same chains.
const halfBlock = 256

// AffineHalf is Affine on 16-bit values; y may be x.
func AffineHalf(dt backend.DType, y, x []uint16, scale, shift float32) {
	y = y[:len(x)]
	n := 0
	if halfPassesAsm(dt) {
		n = affineHalfAsm(dt, y, x, scale, shift)
	}
	widen, narrow := scalarHalf(dt)
	var buf [halfBlock]float32
	for i := n; i < len(x); i += halfBlock {
		b := buf[:min(halfBlock, len(x)-i)]
		for j := range b {
			b[j] = widen(x[i+j])
		}
		affineGo(b, b, scale, shift)
		for j, v := range b {
			y[i+j] = narrow(v)
		}
	}
}

// NormGradHalf is NormGrad on 16-bit values; dx may be g.
func NormGradHalf(dt backend.DType, dx, g, x []uint16, mu, a, b, c float32) {
	dx, x = dx[:len(g)], x[:len(g)]
	n := 0
	if halfPassesAsm(dt) {
		n = normGradHalfAsm(dt, dx, g, x, mu, a, b, c)
	}
	widen, narrow := scalarHalf(dt)
	var gb, xb [halfBlock]float32
	for i := n; i < len(g); i += halfBlock {
		m := min(halfBlock, len(g)-i)
		for j := range m {
			gb[j], xb[j] = widen(g[i+j]), widen(x[i+j])
		}
		normGradGo(gb[:m], gb[:m], xb[:m], mu, a, b, c)
		for j, v := range gb[:m] {
			dx[i+j] = narrow(v)
		}
	}
}

// AddShiftedHalf adds 16-bit xs's terms of ShiftedSums.
func (s *Sums) AddShiftedHalf(dt backend.DType, xs []uint16, k float64) {
	n := 0
	if halfPassesAsm(dt) {
		n = shiftedSumsHalfAsm(dt, xs, k, &s.c)
	}
	widen, _ := scalarHalf(dt)
	var buf [halfBlock]float32
	for i := n; i < len(xs); i += halfBlock {
		b := buf[:min(halfBlock, len(xs)-i)]
		for j := range b {
			b[j] = widen(xs[i+j])
		}
		shiftedSumsGo(b, k, &s.c.a, &s.c.b)
	}
}

// AddGradHalf adds 16-bit g's and x's terms of GradSums.
func (s *Sums) AddGradHalf(dt backend.DType, g, x []uint16, mu float64) {
	x = x[:len(g)]
	n := 0
	if halfPassesAsm(dt) {
		n = gradSumsHalfAsm(dt, g, x, mu, &s.c)
	}
	widen, _ := scalarHalf(dt)
	var gb, xb [halfBlock]float32
	for i := n; i < len(g); i += halfBlock {
		m := min(halfBlock, len(g)-i)
		for j := range m {
			gb[j], xb[j] = widen(g[i+j]), widen(x[i+j])
		}
		gradSumsGo(gb[:m], xb[:m], mu, &s.c.a, &s.c.b)
	}
}

// scalarHalf is dt's scalar conversions.
func scalarHalf(dt backend.DType) (widen func(uint16) float32, narrow func(float32) uint16) {
	switch dt {
	case backend.Float16:
		return backend.F16ToF32, backend.F32ToF16
	case backend.BFloat16:
		return backend.BF16ToF32, backend.F32ToBF16
	}
	panic("kernels: " + dt.String() + " is not a 16-bit float type")
}
