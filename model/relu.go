package model

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// ReLU computes out = max(in, 0) elementwise on (N,C,H,W). When the caller
// holds the only reference to in, it works in place (PyTorch's inplace=True).
// In training it keeps out, whose sign is all backward needs, or with Mask
// that sign alone, one bit a value, written in the same pass
// (backend.ReLUAndMask): for a ReLU whose output no other layer keeps, so
// that its bytes are free until backward.
type ReLU struct {
	Mask bool
	out  *Tensor
	mask backend.View // Uint8, (len+7)/8 bytes
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
	if env.saves() && l.Mask {
		if l.mask, err = allocView(env.Device, memory.Activations, backend.Uint8, (out.Len()+7)/8); err != nil {
			out.Release()
			return nil, err
		}
		env.Backend.ReLUAndMask(out.View(), l.mask, in.View())
		return out, nil
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
	out, mask := l.out, l.mask
	if out == nil && mask.None() {
		panic("model: relu backward without a training forward")
	}
	if out != nil {
		mustSameShape("relu backward", out, dout)
	}
	din, err := gradTensorLike(env, dout)
	if err != nil {
		return nil, err
	}
	if out != nil {
		env.Backend.ReLUBack(din.View(), dout.View(), out.View())
	} else {
		env.Backend.ReLUBackMask(din.View(), dout.View(), mask)
	}
	if din != dout {
		dout.Release()
	}
	l.releaseKept(env)
	return din, nil
}

// kept is what backward reads of the output: the output, or its mask.
func (l *ReLU) kept() backend.View {
	if l.out != nil {
		return l.out.View()
	}
	return l.mask
}

// releaseKept lets go of what Forward kept for backward.
func (l *ReLU) releaseKept(env *Env) {
	if l.out != nil {
		l.out.Release()
	} else {
		env.Pool.MustFree(l.mask.Buf)
	}
	l.out, l.mask = nil, backend.View{}
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *ReLU) Forget() { l.out, l.mask = nil, backend.View{} }

// Params is none.
func (l *ReLU) Params() []*Param { return nil }

// Out keeps the shape.
func (l *ReLU) Out(in backend.Shape4) (backend.Shape4, float64) { return sameShape(in) }
