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

// Upsample2 interpolates, in parallel over planes.
func (c CPU) Upsample2(s backend.Shape4, out, in backend.View) {
	x, y := f32(in), f32(out)
	H, W := s.H, s.W
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			src := x[p*H*W : (p+1)*H*W]
			dst := y[p*4*H*W : (p+1)*4*H*W]
			for i := range H {
				row := src[i*W : (i+1)*W]
				up, down := src[max(i-1, 0)*W:], src[min(i+1, H-1)*W:]
				kernels.UpsampleRow(dst[2*i*2*W:], up[:W], row, 0.25, 0.75)
				kernels.UpsampleRow(dst[(2*i+1)*2*W:], row, down[:W], 0.75, 0.25)
			}
		}
	})
}

// Upsample2Back spreads each dout value back onto the four input pixels it
// was interpolated from, with the same weights (a gather: no clearing, no
// scatter).
func (c CPU) Upsample2Back(s backend.Shape4, din, dout backend.View) {
	dy, dx := f32(dout), f32(din)
	H, W := s.H, s.W
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			g := dy[p*4*H*W : (p+1)*4*H*W]
			plane := dx[p*H*W : (p+1)*H*W]
			grow := func(oy int) []float32 { return g[oy*2*W : (oy+1)*2*W] }
			for i := range H {
				kernels.UpsampleRowAdjoint(plane[i*W:(i+1)*W],
					grow(max(2*i-1, 0)), grow(2*i), grow(2*i+1), grow(min(2*i+2, 2*H-1)))
			}
		}
	})
}
