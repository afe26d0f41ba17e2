package cpu

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// MaxPool2 takes each 2x2 window's maximum in parallel over planes, keeping
// one byte per output (the window position) when argmax is given. 16-bit
// rows are widened (and the output rows narrowed) one at a time; the
// maximum of widened values narrows back to the input's own bits.
func (c CPU) MaxPool2(s backend.Shape4, out, argmax, in backend.View) {
	x, y, idx := valuesOf(in), valuesOf(out), u8(argmax)
	H, W := s.H, s.W
	OH, OW := H/2, W/2
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf := scratch(anyHalf(x, y), W, W, OW) // two input rows, one output row
		for p := lo; p < hi; p++ {
			for oy := 0; oy < OH; oy++ {
				var at []uint8
				if idx != nil {
					at = idx[(p*OH+oy)*OW : (p*OH+oy+1)*OW]
				}
				src := p*H*W + 2*oy*W
				off := (p*OH + oy) * OW
				ys := y.out(buf[2], off, OW)
				kernels.MaxPool2Row(ys, at, x.load(buf[0], src, W), x.load(buf[1], src+W, W))
				y.store(ys, off)
			}
		}
	})
}

// MaxPool2Back routes each dout value to its window's argmax, writing every
// input once, branch-free.
func (c CPU) MaxPool2Back(s backend.Shape4, din, dout, argmax backend.View) {
	dy, dx, idx := valuesOf(dout), valuesOf(din), u8(argmax)
	H, W := s.H, s.W
	OH, OW := H/2, W/2
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf := scratch(anyHalf(dy, dx), W, W, OW) // two input-gradient rows, one output-gradient row
		for p := lo; p < hi; p++ {
			at := idx[p*OH*OW : (p+1)*OH*OW]
			for oy := 0; oy < OH; oy++ {
				row := p*H*W + 2*oy*W
				r0, r1 := dx.out(buf[0], row, W), dx.out(buf[1], row+W, W)
				g := dy.load(buf[2], (p*OH+oy)*OW, OW)
				kernels.MaxPool2BackRow(r0, r1, g, at[oy*OW:(oy+1)*OW])
				if W > 2*OW { // an odd last column gets no gradient
					r0[W-1], r1[W-1] = 0, 0
				}
				dx.store(r0, row)
				dx.store(r1, row+W)
			}
			if H > 2*OH { // nor does an odd last row
				dx.clear(p*H*W+(H-1)*W, W)
			}
		}
	})
}
