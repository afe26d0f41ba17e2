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
	out, err := gradTensorLike(env, in)
	if err != nil {
		return nil, err
	}
	if out == in {
		out.Retain() // the caller releases in; out is the same tensor
	}
	x, y := in.Data(), out.Data()
	kernels.ParallelFor(len(x), 1<<14, func(lo, hi int) {
		for i, v := range x[lo:hi] {
			y[lo+i] = max(v, 0)
		}
	})
	if env.Training {
		l.out = out.Retain()
	}
	return out, nil
}

// Backward returns din = dout where out > 0, else 0; it consumes dout.
func (l *ReLU) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	out := l.out
	if out == nil {
		panic("model: relu backward without a training forward")
	}
	mustSameShape("relu backward", out, dout)
	din, err := gradTensorLike(env, dout)
	if err != nil {
		return nil, err
	}
	y, dy, dx := out.Data(), dout.Data(), din.Data()
	kernels.ParallelFor(len(y), 1<<14, func(lo, hi int) {
		for i, v := range y[lo:hi] {
			if v > 0 {
				dx[lo+i] = dy[lo+i]
			} else {
				dx[lo+i] = 0
			}
		}
	})
	if din != dout {
		dout.Release()
	}
	out.Release()
	l.out = nil
	return din, nil
}
