package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// For scale 2 and align_corners=False, PyTorch's rule src = (dst+0.5)/2 - 0.5
// (clamped to the input) gives fixed weights along each axis: output 2i is
// 0.25*in[i-1] + 0.75*in[i] and output 2i+1 is 0.75*in[i] + 0.25*in[i+1],
// with the neighbours clamped at the edges (outputs 0 and 2n-1 copy in[0]
// and in[n-1]). So the interpolation is separable: blend two input rows,
// then interpolate along the row, all in registers.

// Upsample2 interpolates, in parallel over planes; 16-bit planes go in
// bands of input rows (bandRows) with a row above and below, widened in one
// call, their output rows narrowed in one.
func (c CPU) Upsample2(s backend.Shape4, out, in backend.View) {
	c.upsample2(s, valuesOf(out), valuesOf(in), func(p int) int { return p * 4 * s.H * s.W })
}

// UpsampleConcat copies each sample's skip part into out, then
// upsamples in's planes into the rest of each sample, in place.
func (c CPU) UpsampleConcat(s backend.Shape4, out, skip, in backend.View) {
	if skip.DT != in.DT || out.DT != in.DT || in.Len != s.Len() || skip.Len%s.N != 0 || out.Len != skip.Len+4*in.Len {
		panic(fmt.Sprintf("backend/cpu: upsample and concat of %v and %v into %v", skip, in, out))
	}
	c.interleave(s.N, bytesOf(out), bytesOf(skip), nil, false)
	skipN, plane := skip.Len/s.N, 4*s.H*s.W
	c.upsample2(s, valuesOf(out), valuesOf(in), func(p int) int {
		n := p / s.C
		return (n+1)*skipN + p*plane
	})
}

// upsample2 is Upsample2 of in's planes p into y from dst(p).
func (c CPU) upsample2(s backend.Shape4, y, x values, dst func(p int) int) {
	H, W := s.H, s.W
	half := anyHalf(x, y)
	R := bandRows(H, 5*W, half) // an input row and two output rows
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf, whole := c.scratch(half, (R+2)*W, 4*R*W)
		defer c.release(whole)
		for p := lo; p < hi; p++ {
			for i0 := 0; i0 < H; i0 += R {
				i1 := min(i0+R, H)
				first, last := max(i0-1, 0), min(i1+1, H) // the input rows read
				src := x.load(buf[0], p*H*W+first*W, (last-first)*W)
				row := func(i int) []float32 { return src[(i-first)*W : (i-first+1)*W] }
				off := dst(p) + 2*i0*2*W
				out := y.out(buf[1], off, 2*(i1-i0)*2*W)
				for i := i0; i < i1; i++ {
					up, cur, down := row(max(i-1, 0)), row(i), row(min(i+1, H-1))
					pair := out[2*(i-i0)*2*W : 2*(i-i0+1)*2*W]
					kernels.UpsampleRow(pair[:2*W], up, cur, 0.25, 0.75)
					kernels.UpsampleRow(pair[2*W:], cur, down, 0.75, 0.25)
				}
				y.store(out, off)
			}
		}
	})
}

// Upsample2Back spreads each dout value back onto the four input pixels it
// was interpolated from, with the same weights (a gather: no clearing, no
// scatter); 16-bit planes in bands, as Upsample2.
func (c CPU) Upsample2Back(s backend.Shape4, din, dout backend.View) {
	c.upsample2Back(s, valuesOf(din), valuesOf(dout), func(p int) int { return p * 4 * s.H * s.W })
}

// UpsampleConcatBack copies each sample's first part of dout into dskip
// and spreads the rest back onto din.
func (c CPU) UpsampleConcatBack(s backend.Shape4, dskip, din, dout backend.View) {
	if dskip.DT != din.DT || dout.DT != din.DT || din.Len != s.Len() || dskip.Len%s.N != 0 || dout.Len != dskip.Len+4*din.Len {
		panic(fmt.Sprintf("backend/cpu: upsample and concat backward of %v into %v and %v", dout, dskip, din))
	}
	c.interleave(s.N, bytesOf(dout), bytesOf(dskip), nil, true)
	skipN, plane := dskip.Len/s.N, 4*s.H*s.W
	c.upsample2Back(s, valuesOf(din), valuesOf(dout), func(p int) int {
		n := p / s.C
		return (n+1)*skipN + p*plane
	})
}

// upsample2Back is Upsample2Back into din's planes p from dy's at src(p).
func (c CPU) upsample2Back(s backend.Shape4, dx, dy values, src func(p int) int) {
	H, W := s.H, s.W
	half := anyHalf(dy, dx)
	R := bandRows(H, 5*W, half) // two output-gradient rows and an input-gradient row
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf, whole := c.scratch(half, (2*R+2)*2*W, R*W)
		defer c.release(whole)
		for p := lo; p < hi; p++ {
			for i0 := 0; i0 < H; i0 += R {
				i1 := min(i0+R, H)
				first, last := max(2*i0-1, 0), min(2*i1+1, 2*H) // the output-gradient rows read
				g := dy.load(buf[0], src(p)+first*2*W, (last-first)*2*W)
				grow := func(oy int) []float32 { return g[(oy-first)*2*W : (oy-first+1)*2*W] }
				off := p*H*W + i0*W
				dst := dx.out(buf[1], off, (i1-i0)*W)
				for i := i0; i < i1; i++ {
					kernels.UpsampleRowAdjoint(dst[(i-i0)*W:(i-i0+1)*W],
						grow(max(2*i-1, 0)), grow(2*i), grow(2*i+1), grow(min(2*i+2, 2*H-1)))
				}
				dx.store(dst, off)
			}
		}
	})
}
