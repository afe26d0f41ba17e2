package cpu

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// MaxPool2 takes each 2x2 window's maximum in parallel over planes, keeping
// one byte per output (the window position) when argmax is given.
func (c CPU) MaxPool2(s backend.Shape4, out, argmax, in backend.View) {
	x, y, idx := f32(in), f32(out), u8(argmax)
	H, W := s.H, s.W
	OH, OW := H/2, W/2
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			src := x[p*H*W : (p+1)*H*W]
			for oy := 0; oy < OH; oy++ {
				var at []uint8
				if idx != nil {
					at = idx[(p*OH+oy)*OW : (p*OH+oy+1)*OW]
				}
				kernels.MaxPool2Row(y[(p*OH+oy)*OW:(p*OH+oy+1)*OW], at, src[2*oy*W:(2*oy+1)*W], src[(2*oy+1)*W:(2*oy+2)*W])
			}
		}
	})
}

// MaxPool2Back routes each dout value to its window's argmax, writing every
// input once, branch-free.
func (c CPU) MaxPool2Back(s backend.Shape4, din, dout, argmax backend.View) {
	dy, dx, idx := f32(dout), f32(din), u8(argmax)
	H, W := s.H, s.W
	OH, OW := H/2, W/2
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			plane := dx[p*H*W : (p+1)*H*W]
			g := dy[p*OH*OW : (p+1)*OH*OW]
			at := idx[p*OH*OW : (p+1)*OH*OW]
			for oy := 0; oy < OH; oy++ {
				r0 := plane[2*oy*W : 2*oy*W+2*OW]
				r1 := plane[(2*oy+1)*W : (2*oy+1)*W+2*OW]
				kernels.MaxPool2BackRow(r0, r1, g[oy*OW:(oy+1)*OW], at[oy*OW:(oy+1)*OW])
				if W > 2*OW { // an odd last column gets no gradient
					r0[:W][W-1], r1[:W][W-1] = 0, 0
				}
			}
			if H > 2*OH { // nor does an odd last row
				clear(plane[(H-1)*W:])
			}
		}
	})
}
