package model

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// MaxPool2 is PyTorch's MaxPool2d(2): in (N,C,H,W), out (N,C,H/2,W/2)
// (odd rows or columns at the end are dropped). For backward it keeps one
// byte per output, the position 0..3 of the maximum in its 2x2 window (the
// first one on ties, as PyTorch does), instead of the input: a quarter of the
// output's float32 bytes.
type MaxPool2 struct {
	inShape backend.Shape4
	argmax  backend.View
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
	var argmax backend.View
	if env.saves() {
		if argmax, err = allocView(env.Device, memory.Activations, backend.Uint8, out.Len()); err != nil {
			out.Release()
			return nil, err
		}
	}
	f := env.frame(backend.OpPool)
	x, y := f.view(in), f.writer(out)
	if f.err == nil {
		env.Backend.MaxPool2(in.shape4(), y, argmax, x)
	}
	if err := f.finish(); err != nil {
		if !argmax.None() {
			env.Pool.MustFree(argmax.Buf)
		}
		out.Release()
		return nil, err
	}
	if env.saves() {
		l.argmax, l.inShape = argmax, in.shape4()
	}
	return out, nil
}

// Backward routes each dout value to the position of its window's maximum;
// every other input position gets 0. It consumes dout.
func (l *MaxPool2) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindPool)()
	if l.argmax.None() {
		panic("model: max pool backward without a training forward")
	}
	s := l.inShape
	din, err := env.newActivation(s.N, s.C, s.H, s.W)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpPool)
	dy, dx := f.view(dout), f.writer(din)
	if f.err == nil {
		env.Backend.MaxPool2Back(s, dx, dy, l.argmax)
	}
	if err := f.finish(); err != nil {
		din.Release()
		return nil, err
	}
	dout.Release()
	env.Pool.MustFree(l.argmax.Buf)
	l.argmax = backend.View{}
	return din, nil
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *MaxPool2) Forget() { l.argmax = backend.View{} }

// Params is none.
func (l *MaxPool2) Params() []*Param { return nil }

// Out halves H and W (dropping an odd last row or column).
func (l *MaxPool2) Out(in backend.Shape4) (backend.Shape4, float64) {
	return backend.Shape4{N: in.N, C: in.C, H: in.H / 2, W: in.W / 2}, 0
}
