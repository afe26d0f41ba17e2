package model

import (
	"math"

	"github.com/memunet/memunet/memory"
)

// MaxPool2 is PyTorch's MaxPool2d(2): in (N,C,H,W), out (N,C,H/2,W/2)
// (odd rows or columns at the end are dropped). For backward it keeps one
// byte per output, the position 0..3 of the maximum in its 2x2 window (the
// first one on ties, as PyTorch does), instead of the input: a quarter of the
// output's float32 bytes.
type MaxPool2 struct {
	inShape [4]int
	argmax  *memory.Buffer
}

// Forward takes the maximum of each 2x2 window.
func (l *MaxPool2) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindPool)()
	OH, OW := in.H/2, in.W/2
	if OH == 0 || OW == 0 {
		panic("model: max pool of an input smaller than 2x2")
	}
	out, err := env.newActivation(in.N, in.C, OH, OW)
	if err != nil {
		return nil, err
	}
	var idx []byte
	if env.saves() {
		if l.argmax, err = env.Pool.AllocBytes(memory.Activations, out.Len()); err != nil {
			out.Release()
			return nil, err
		}
		idx = l.argmax.Bytes()
		l.inShape = in.Shape()
	}
	f := env.frame()
	x, y := f.view(in), f.writer(out)
	if f.err != nil {
		f.finish()
		if l.argmax != nil {
			env.Pool.MustFree(l.argmax)
			l.argmax = nil
		}
		out.Release()
		return nil, f.err
	}
	env.forEach(in.N*in.C, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			src := x[p*in.H*in.W : (p+1)*in.H*in.W]
			for oy := 0; oy < OH; oy++ {
				r0 := src[2*oy*in.W:]
				r1 := src[(2*oy+1)*in.W:]
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
	f.finish()
	return out, nil
}

// Backward routes each dout value to the position of its window's maximum;
// every other input position gets 0. It consumes dout.
func (l *MaxPool2) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindPool)()
	if l.argmax == nil {
		panic("model: max pool backward without a training forward")
	}
	N, C, H, W := l.inShape[0], l.inShape[1], l.inShape[2], l.inShape[3]
	din, err := env.newActivation(N, C, H, W)
	if err != nil {
		return nil, err
	}
	OH, OW := H/2, W/2
	f := env.frame()
	dy, dx := f.view(dout), f.writer(din)
	if f.err != nil {
		f.finish()
		din.Release()
		return nil, f.err
	}
	idx := l.argmax.Bytes()
	env.forEach(N*C, 1, func(lo, hi int) {
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
	f.finish()
	dout.Release()
	env.Pool.MustFree(l.argmax)
	l.argmax = nil
	return din, nil
}

func (l *MaxPool2) forget() { l.argmax = nil }

// selectMask is all ones if a == k, else 0 (for a, k < 2^31), without a branch.
func selectMask(a, k uint32) uint32 { return uint32((int32(a^k) - 1) >> 31) }
