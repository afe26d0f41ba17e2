package model

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// MaxPool is PyTorch's MaxPool2d(2) on images, in (N,C,H,W), out
// (N,C,H/2,W/2), or with a window K its MaxPool3d(K, stride=K) on
// volumes, in (N,C,D,H,W), out (N,C,D/K.D,H/K.H,W/K.W); a last slice, row
// or column no window covers is dropped. For backward it keeps one byte
// per output, the position of the maximum in its window (the first one
// on ties, as PyTorch does), instead of the input: a quarter of the
// output's float32 bytes.
type MaxPool struct {
	// K is a volume's window, kernel and stride per axis; zero: an
	// image's 2x2.
	K       backend.Scale3
	inShape backend.Shape5 // D 1 for an image
	argmax  backend.View
}

// window is the pooling's window, an image's 2x2 as a 1x2x2 one.
func (l *MaxPool) window() backend.Scale3 {
	if l.K == (backend.Scale3{}) {
		return backend.Scale3{D: 1, H: 2, W: 2}
	}
	return l.K
}

// newOut allocates a tensor of shape s (an image's where K is zero).
func (l *MaxPool) newOut(env *Env, s backend.Shape5) (*Tensor, error) {
	if l.K == (backend.Scale3{}) {
		return env.newActivation(s.N, s.C, s.H, s.W)
	}
	return env.newVolume(s.N, s.C, s.D, s.H, s.W)
}

// Forward takes the maximum of each window.
func (l *MaxPool) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindPool)()
	s := in.shape5()
	o := s.Pooled(l.window())
	if o.D == 0 || o.H == 0 || o.W == 0 {
		panic("model: max pool of an input smaller than its window")
	}
	out, err := l.newOut(env, o)
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
	switch {
	case f.err != nil:
	case l.K == (backend.Scale3{}):
		env.Backend.MaxPool2(in.shape4(), y, argmax, x)
	default:
		env.Backend.MaxPool3(s, l.K, y, argmax, x)
	}
	if err := f.finish(); err != nil {
		if !argmax.None() {
			env.Pool.MustFree(argmax.Buf)
		}
		out.Release()
		return nil, err
	}
	if env.saves() {
		l.argmax, l.inShape = argmax, s
	}
	return out, nil
}

// Backward routes each dout value to the position of its window's maximum;
// every other input position gets 0. It consumes dout.
func (l *MaxPool) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindPool)()
	if l.argmax.None() {
		panic("model: max pool backward without a training forward")
	}
	s := l.inShape
	din, err := l.newOut(env, s)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpPool)
	dy, dx := f.view(dout), f.writer(din)
	switch {
	case f.err != nil:
	case l.K == (backend.Scale3{}):
		env.Backend.MaxPool2Back(din.shape4(), dx, dy, l.argmax)
	default:
		env.Backend.MaxPool3Back(s, l.K, dx, dy, l.argmax)
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
func (l *MaxPool) Forget() { l.argmax = backend.View{} }

// Params is none.
func (l *MaxPool) Params() []*Param { return nil }

// Out divides H (a volume's D*H) and W by the window.
func (l *MaxPool) Out(in backend.Shape4) (backend.Shape4, float64) {
	k := l.window()
	return backend.Shape4{N: in.N, C: in.C, H: in.H / (k.D * k.H), W: in.W / k.W}, 0
}
