package cpu

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// MaxPool2 takes each 2x2 window's maximum in parallel over planes, keeping
// one byte per output (the window position) when argmax is given. 16-bit
// planes go in bands of rows (bandRows), widened in one call and their
// outputs narrowed in one: the maximum of widened values narrows back to
// the input's own bits.
func (c CPU) MaxPool2(s backend.Shape4, out, argmax, in backend.View) {
	x, y, idx := valuesOf(in), valuesOf(out), u8(argmax)
	H, W := s.H, s.W
	OH, OW := H/2, W/2
	half := anyHalf(x, y)
	R := bandRows(OH, 2*W+OW, half)
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf, whole := c.scratch(half, 2*R*W, R*OW)
		defer c.release(whole)
		for p := lo; p < hi; p++ {
			for r0 := 0; r0 < OH; r0 += R {
				r1 := min(r0+R, OH)
				src := x.load(buf[0], p*H*W+2*r0*W, 2*(r1-r0)*W)
				off := (p*OH + r0) * OW
				dst := y.out(buf[1], off, (r1-r0)*OW)
				for oy := r0; oy < r1; oy++ {
					var at []uint8
					if idx != nil {
						at = idx[(p*OH+oy)*OW : (p*OH+oy+1)*OW]
					}
					i := oy - r0
					kernels.MaxPool2Row(dst[i*OW:(i+1)*OW], at, src[2*i*W:(2*i+1)*W], src[(2*i+1)*W:(2*i+2)*W])
				}
				y.store(dst, off)
			}
		}
	})
}

// MaxPool2Back routes each dout value to its window's argmax, writing every
// input once, branch-free; 16-bit planes in bands, as MaxPool2.
func (c CPU) MaxPool2Back(s backend.Shape4, din, dout, argmax backend.View) {
	dy, dx, idx := valuesOf(dout), valuesOf(din), u8(argmax)
	H, W := s.H, s.W
	OH, OW := H/2, W/2
	half := anyHalf(dy, dx)
	R := bandRows(OH, 2*W+OW, half)
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf, whole := c.scratch(half, 2*R*W, R*OW)
		defer c.release(whole)
		for p := lo; p < hi; p++ {
			at := idx[p*OH*OW : (p+1)*OH*OW]
			for r0 := 0; r0 < OH; r0 += R {
				r1 := min(r0+R, OH)
				off := p*H*W + 2*r0*W
				rows := dx.out(buf[0], off, 2*(r1-r0)*W)
				g := dy.load(buf[1], (p*OH+r0)*OW, (r1-r0)*OW)
				for oy := r0; oy < r1; oy++ {
					i := oy - r0
					top, bottom := rows[2*i*W:(2*i+1)*W], rows[(2*i+1)*W:(2*i+2)*W]
					kernels.MaxPool2BackRow(top, bottom, g[i*OW:(i+1)*OW], at[oy*OW:(oy+1)*OW])
					if W > 2*OW { // an odd last column gets no gradient
						top[W-1], bottom[W-1] = 0, 0
					}
				}
				dx.store(rows, off)
			}
			if H > 2*OH { // nor does an odd last row
				dx.clear(p*H*W+(H-1)*W, W)
			}
		}
	})
}
