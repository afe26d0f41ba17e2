package cpu

import (
	"math"

	"github.com/memunet/memunet/backend"
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
				r0 := src[2*oy*W:]
				r1 := src[(2*oy+1)*W:]
				for ox := 0; ox < OW; ox++ {
					best, at := r0[2*ox], byte(0)
					if v := r0[2*ox+1]; v > best || v != v {
						best, at = v, 1
					}
					if v := r1[2*ox]; v > best || v != v {
						best, at = v, 2
					}
					if v := r1[2*ox+1]; v > best || v != v {
						best, at = v, 3
					}
					o := (p*OH+oy)*OW + ox
					y[o] = best
					if idx != nil {
						idx[o] = at
					}
				}
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
				gs, as := g[oy*OW:(oy+1)*OW], at[oy*OW:(oy+1)*OW]
				as = as[:len(gs)]
				// every input of the window written once, branch-free:
				// the gradient's bits where the maximum was, else +0
				for ox, v := range gs {
					b, a := math.Float32bits(v), uint32(as[ox])
					w0, w1 := r0[2*ox:2*ox+2:2*ox+2], r1[2*ox:2*ox+2:2*ox+2]
					w0[0] = math.Float32frombits(b & selectMask(a, 0))
					w0[1] = math.Float32frombits(b & selectMask(a, 1))
					w1[0] = math.Float32frombits(b & selectMask(a, 2))
					w1[1] = math.Float32frombits(b & selectMask(a, 3))
				}
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

// selectMask is all ones if a == k, else 0 (for a, k < 2^31), without a branch.
func selectMask(a, k uint32) uint32 { return uint32((int32(a^k) - 1) >> 31) }
