package model

import (
	"math"

	"github.com/memunet/memunet/model/kernels"
)

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
	kernels.ParallelFor(len(x), 1<<14, func(lo, hi int) { relu32(y[lo:hi], x[lo:hi]) })
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
	kernels.ParallelFor(len(y), 1<<14, func(lo, hi int) { reluBackward32(dx[lo:hi], dy[lo:hi], y[lo:hi]) })
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
		xs, ys := x[lo:hi], y[lo:hi]
		ys = ys[:len(xs)]
		for i, b := range xs {
			// branch-free: keep b unless it is negative and not NaN
			keep := ^uint16(int16(b)>>15) | uint16((int32(0x8000|inf)-int32(b))>>31)
			ys[i] = b & keep
		}
	})
}

// reluBackwardBits passes dy where y > 0 (positive, non-zero, not NaN), else 0.
func reluBackwardBits(dx, dy, y []uint16, dt DType) {
	inf := infBits(dt)
	kernels.ParallelFor(len(y), 1<<15, func(lo, hi int) {
		ys, gs, ds := y[lo:hi], dy[lo:hi], dx[lo:hi]
		gs, ds = gs[:len(ys)], ds[:len(ys)]
		for i, b := range ys {
			// branch-free: all ones where 1 <= b <= inf
			keep := uint16((int32(b-1) - int32(inf)) >> 31)
			ds[i] = gs[i] & keep
		}
	})
}

// relu32 is y = max(x, 0) on float32 bit patterns, without branches (the
// signs of activations are unpredictable): negative values and -0 become +0;
// NaN and non-negative values pass through.
func relu32(y, x []float32) {
	y = y[:len(x)]
	for i, v := range x {
		b := math.Float32bits(v)
		keep := ^uint32(int32(b)>>31) | uint32((int64(0xff800000)-int64(b))>>63)
		y[i] = math.Float32frombits(b & keep)
	}
}

// reluBackward32 passes dy where y > 0 (positive, non-zero, not NaN), else 0,
// without branches.
func reluBackward32(dx, dy, y []float32) {
	dy, dx = dy[:len(y)], dx[:len(y)]
	for i, v := range y {
		keep := uint32((int64(math.Float32bits(v)-1) - 0x7f800000) >> 63)
		dx[i] = math.Float32frombits(math.Float32bits(dy[i]) & keep)
	}
}
