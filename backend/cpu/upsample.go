package cpu

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// For scale 2 and align_corners=False, PyTorch's rule src = (dst+0.5)/2 - 0.5
// (clamped to the input) gives fixed weights along each axis: output 2i is
// 0.25*in[i-1] + 0.75*in[i] and output 2i+1 is 0.75*in[i] + 0.25*in[i+1],
// with the neighbours clamped at the edges (outputs 0 and 2n-1 copy in[0]
// and in[n-1]). So the interpolation is separable: blend two input rows,
// then interpolate along the row, all in registers.

// Upsample2 interpolates, in parallel over planes; 16-bit rows are widened
// (and output rows narrowed) one at a time.
func (c CPU) Upsample2(s backend.Shape4, out, in backend.View) {
	x, y := valuesOf(in), valuesOf(out)
	H, W := s.H, s.W
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf := scratch(anyHalf(x, y), W, W, W, 2*W, 2*W) // three input rows, two output rows
		for p := lo; p < hi; p++ {
			src, dst := p*H*W, p*4*H*W
			for i := range H {
				up := x.load(buf[0], src+max(i-1, 0)*W, W)
				row := x.load(buf[1], src+i*W, W)
				down := x.load(buf[2], src+min(i+1, H-1)*W, W)
				even := y.out(buf[3], dst+2*i*2*W, 2*W)
				kernels.UpsampleRow(even, up, row, 0.25, 0.75)
				y.store(even, dst+2*i*2*W)
				odd := y.out(buf[4], dst+(2*i+1)*2*W, 2*W)
				kernels.UpsampleRow(odd, row, down, 0.75, 0.25)
				y.store(odd, dst+(2*i+1)*2*W)
			}
		}
	})
}

// Upsample2Back spreads each dout value back onto the four input pixels it
// was interpolated from, with the same weights (a gather: no clearing, no
// scatter).
func (c CPU) Upsample2Back(s backend.Shape4, din, dout backend.View) {
	dy, dx := valuesOf(dout), valuesOf(din)
	H, W := s.H, s.W
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf := scratch(anyHalf(dy, dx), 2*W, 2*W, 2*W, 2*W, W) // four output-gradient rows, one input-gradient row
		for p := lo; p < hi; p++ {
			g, plane := p*4*H*W, p*H*W
			grow := func(k, oy int) []float32 { return dy.load(buf[k], g+oy*2*W, 2*W) }
			for i := range H {
				gu, ge := grow(0, max(2*i-1, 0)), grow(1, 2*i)
				gOdd, gd := grow(2, 2*i+1), grow(3, min(2*i+2, 2*H-1))
				ds := dx.out(buf[4], plane+i*W, W)
				kernels.UpsampleRowAdjoint(ds, gu, ge, gOdd, gd)
				dx.store(ds, plane+i*W)
			}
		}
	})
}
