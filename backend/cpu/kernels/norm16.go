package kernels

import "github.com/memunet/memunet/backend"

// The norms' passes on 16-bit bit patterns (dt Float16 or BFloat16): each
// gives the bits of widening its inputs (backend.F16ToF32 or BF16ToF32),
// the float32 pass and narrowing its output (F32ToF16 or F32ToBF16), with
// no float32 copy: norm16_amd64.s widens in registers (AVX2, and F16C for
// fp16) where the CPU has them; the rest, and every value of the pure-Go
// implementation, goes through a block on the stack and the Go passes.

// halfBlock is the Go path's block: a multiple of 16, so the sums go on
// in the same chains.
const halfBlock = 256

// AffineHalf is Affine on 16-bit values; y may be x.
func AffineHalf(dt backend.DType, y, x []uint16, scale, shift float32) {
	bestElementwise().affineHalf(dt, y, x, scale, shift)
}

// NormGradHalf is NormGrad on 16-bit values; dx may be g.
func NormGradHalf(dt backend.DType, dx, g, x []uint16, mu, a, b, c float32) {
	bestElementwise().normGradHalf(dt, dx, g, x, mu, a, b, c)
}

// AddShiftedHalf adds 16-bit xs's terms of ShiftedSums.
func (s *Sums) AddShiftedHalf(dt backend.DType, xs []uint16, k float64) {
	bestElementwise().shiftedSumsHalf(dt, xs, k, &s.c)
}

// AddGradHalf adds 16-bit g's and x's terms of GradSums.
func (s *Sums) AddGradHalf(dt backend.DType, g, x []uint16, mu float64) {
	bestElementwise().gradSumsHalf(dt, g, x, mu, &s.c)
}

// halfAsm reports whether e runs norm16_amd64.s for dt.
func (e elementwiseImpl) halfAsm(dt backend.DType) bool { return e.avx2 && halfPassesAsm(dt) }

func (e elementwiseImpl) affineHalf(dt backend.DType, y, x []uint16, scale, shift float32) {
	y = y[:len(x)]
	n := 0
	if e.halfAsm(dt) {
		n = affineHalfAsm(dt, y, x, scale, shift)
	}
	widen, narrow := scalarHalf(dt)
	var buf [halfBlock]float32
	for i := n; i < len(x); i += halfBlock {
		b := widenBlock(buf[:min(halfBlock, len(x)-i)], x[i:], widen)
		affineGo(b, b, scale, shift)
		narrowBlock(y[i:], b, narrow)
	}
}

func (e elementwiseImpl) normGradHalf(dt backend.DType, dx, g, x []uint16, mu, a, b, c float32) {
	dx, x = dx[:len(g)], x[:len(g)]
	n := 0
	if e.halfAsm(dt) {
		n = normGradHalfAsm(dt, dx, g, x, mu, a, b, c)
	}
	widen, narrow := scalarHalf(dt)
	var gb, xb [halfBlock]float32
	for i := n; i < len(g); i += halfBlock {
		m := min(halfBlock, len(g)-i)
		gs, xs := widenBlock(gb[:m], g[i:], widen), widenBlock(xb[:m], x[i:], widen)
		normGradGo(gs, gs, xs, mu, a, b, c)
		narrowBlock(dx[i:], gs, narrow)
	}
}

func (e elementwiseImpl) shiftedSumsHalf(dt backend.DType, xs []uint16, k float64, c *chains) {
	n := 0
	if e.halfAsm(dt) {
		n = shiftedSumsHalfAsm(dt, xs, k, c)
	}
	widen, _ := scalarHalf(dt)
	var buf [halfBlock]float32
	for i := n; i < len(xs); i += halfBlock {
		shiftedSumsGo(widenBlock(buf[:min(halfBlock, len(xs)-i)], xs[i:], widen), k, &c.a, &c.b)
	}
}

func (e elementwiseImpl) gradSumsHalf(dt backend.DType, g, x []uint16, mu float64, c *chains) {
	x = x[:len(g)]
	n := 0
	if e.halfAsm(dt) {
		n = gradSumsHalfAsm(dt, g, x, mu, c)
	}
	widen, _ := scalarHalf(dt)
	var gb, xb [halfBlock]float32
	for i := n; i < len(g); i += halfBlock {
		m := min(halfBlock, len(g)-i)
		gradSumsGo(widenBlock(gb[:m], g[i:], widen), widenBlock(xb[:m], x[i:], widen), mu, &c.a, &c.b)
	}
}

// widenBlock fills dst with the first len(dst) values of src, widened.
func widenBlock(dst []float32, src []uint16, widen func(uint16) float32) []float32 {
	for j := range dst {
		dst[j] = widen(src[j])
	}
	return dst
}

// narrowBlock stores src's values, narrowed, at the start of dst.
func narrowBlock(dst []uint16, src []float32, narrow func(float32) uint16) {
	for j, v := range src {
		dst[j] = narrow(v)
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
