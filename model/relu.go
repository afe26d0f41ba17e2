package model

import "github.com/memunet/memunet/model/kernels"

// ReLU computes out = max(in, 0) elementwise on (N,C,H,W). When the caller
// holds the only reference to in, it works in place (PyTorch's inplace=True).
// In training it keeps out, whose sign is all backward needs.
type ReLU struct {
	out *Tensor
}

// Forward computes max(in, 0).
func (l *ReLU) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindReLU)()
	out, err := gradTensorLike(env, in)
	if err != nil {
		return nil, err
	}
	if out == in {
		out.Retain() // the caller releases in; out is the same tensor
	}
	if in.DType != Float32 {
		reluBits(out.Bits(), in.Bits(), in.DType)
		if env.saves() {
			l.out = out.Retain()
		}
		return out, nil
	}
	f := env.frame()
	x, y := f.view(in), f.writer(out)
	if f.err != nil {
		f.finish()
		out.Release()
		return nil, f.err
	}
	kernels.ParallelFor(len(x), 1<<14, func(lo, hi int) {
		for i, v := range x[lo:hi] {
			y[lo+i] = max(v, 0)
		}
	})
	f.finish()
	if env.saves() {
		l.out = out.Retain()
	}
	return out, nil
}

// Backward returns din = dout where out > 0, else 0; it consumes dout.
func (l *ReLU) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindReLU)()
	out := l.out
	if out == nil {
		panic("model: relu backward without a training forward")
	}
	mustSameShape("relu backward", out, dout)
	din, err := gradTensorLike(env, dout)
	if err != nil {
		return nil, err
	}
	if out.DType != Float32 && dout.DType == out.DType {
		reluBackwardBits(din.Bits(), dout.Bits(), out.Bits(), out.DType)
		if din != dout {
			dout.Release()
		}
		out.Release()
		l.out = nil
		return din, nil
	}
	f := env.frame()
	y, dy, dx := f.view(out), f.view(dout), f.writer(din)
	if f.err != nil {
		f.finish()
		if din != dout {
			din.Release()
		}
		return nil, f.err
	}
	kernels.ParallelFor(len(y), 1<<14, func(lo, hi int) {
		for i, v := range y[lo:hi] {
			if v > 0 {
				dx[lo+i] = dy[lo+i]
			} else {
				dx[lo+i] = 0
			}
		}
	})
	f.finish()
	if din != dout {
		dout.Release()
	}
	out.Release()
	l.out = nil
	return din, nil
}

func (l *ReLU) forget() { l.out = nil }

// infBits is the pattern of +Inf; a magnitude (bits & 0x7fff) above it is NaN.
func infBits(dt DType) uint16 {
	if dt == Float16 {
		return 0x7c00
	}
	return 0x7f80
}

// reluBits is max(x, 0) on 16-bit patterns: negative numbers (and -0) become
// +0, NaN and non-negative values pass through.
func reluBits(y, x []uint16, dt DType) {
	inf := infBits(dt)
	kernels.ParallelFor(len(x), 1<<15, func(lo, hi int) {
		for i, b := range x[lo:hi] {
			if b&0x8000 != 0 && b&0x7fff <= inf {
				b = 0
			}
			y[lo+i] = b
		}
	})
}

// reluBackwardBits passes dy where y > 0 (positive, non-zero, not NaN), else 0.
func reluBackwardBits(dx, dy, y []uint16, dt DType) {
	inf := infBits(dt)
	kernels.ParallelFor(len(y), 1<<15, func(lo, hi int) {
		for i, b := range y[lo:hi] {
			if b&0x8000 == 0 && b != 0 && b <= inf {
				dx[lo+i] = dy[lo+i]
			} else {
				dx[lo+i] = 0
			}
		}
	})
}
