package model

import "github.com/memunet/memunet/backend"

// ReLU computes out = max(in, 0) elementwise on (N,C,H,W). When the caller
// holds the only reference to in, it works in place (PyTorch's inplace=True).
// In training it keeps out, whose sign is all backward needs.
type ReLU struct {
	out *Tensor
}

// Forward computes max(in, 0) in in's storage type.
func (l *ReLU) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindReLU)()
	out, err := gradTensorLike(env, in)
	if err != nil {
		return nil, err
	}
	if out == in {
		out.Retain() // the caller releases in; out is the same tensor
	}
	env.Backend.ReLU(out.View(), in.View())
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
	env.Backend.ReLUBack(din.View(), dout.View(), out.View())
	if din != dout {
		dout.Release()
	}
	out.Release()
	l.out = nil
	return din, nil
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *ReLU) Forget() { l.out = nil }

// Params is none.
func (l *ReLU) Params() []*Param { return nil }

// Out keeps the shape.
func (l *ReLU) Out(in backend.Shape4) (backend.Shape4, float64) { return sameShape(in) }
