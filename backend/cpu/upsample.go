package cpu

import (
	"github.com/memunet/memunet/backend"
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
				upsampleRow(dst[2*i*2*W:], up[:W], row, 0.25, 0.75)
				upsampleRow(dst[(2*i+1)*2*W:], row, down[:W], 0.75, 0.25)
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
				upsampleRowAdjoint(plane[i*W:(i+1)*W],
					grow(max(2*i-1, 0)), grow(2*i), grow(2*i+1), grow(min(2*i+2, 2*H-1)))
			}
		}
	})
}

// upsampleRow writes the 2W values of one output row from the vertical blend
// a*r0 + b*r1 of two input rows of W values.
func upsampleRow(dst, r0, r1 []float32, a, b float32) {
	W := len(r0)
	r1 = r1[:W]
	dst = dst[:2*W]
	cur := a*r0[0] + b*r1[0]
	dst[0] = cur
	mid := dst[1 : 2*W-1]
	for j := 0; j+1 < W; j++ {
		next := a*r0[j+1] + b*r1[j+1]
		p := mid[2*j : 2*j+2 : 2*j+2]
		p[0] = 0.75*cur + 0.25*next
		p[1] = 0.25*cur + 0.75*next
		cur = next
	}
	dst[2*W-1] = cur
}

// upsampleRowAdjoint writes the W values of one input row's gradient from
// the four output-gradient rows that touch it (up, even, odd, down: output
// rows 2i-1, 2i, 2i+1, 2i+2 clamped, weights 0.25, 0.75, 0.75, 0.25), and
// along the row the same weights on output columns 2j-1 .. 2j+2.
func upsampleRowAdjoint(dst, gu, ge, go_, gd []float32) {
	W := len(dst)
	gu, ge, go_, gd = gu[:2*W], ge[:2*W], go_[:2*W], gd[:2*W]
	e := 0.25*(gu[0]+gd[0]) + 0.75*(ge[0]+go_[0])
	prevO := e
	for j := 0; j < W; j++ {
		o := 0.25*(gu[2*j+1]+gd[2*j+1]) + 0.75*(ge[2*j+1]+go_[2*j+1])
		next := o
		if j+1 < W {
			next = 0.25*(gu[2*j+2]+gd[2*j+2]) + 0.75*(ge[2*j+2]+go_[2*j+2])
		}
		dst[j] = 0.25*(prevO+next) + 0.75*(e+o)
		prevO, e = o, next
	}
}
