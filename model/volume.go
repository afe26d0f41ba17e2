package model

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// The layers of a 3D UNet that have no 2D twin to share: pooling and
// trilinear up-sampling over volumes (N,C,D,H,W), by a factor per axis.

// MaxPool3 is PyTorch's MaxPool3d(K, stride=K): in (N,C,D,H,W), out
// (N,C,D/K.D,H/K.H,W/K.W). For backward it keeps one byte per output, the
// position of the maximum in its window, instead of the input.
type MaxPool3 struct {
	K       backend.Scale3
	inShape backend.Shape5
	argmax  backend.View
}

// Forward takes the maximum of each window.
func (l *MaxPool3) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindPool)()
	s := in.shape5()
	o := s.Pooled(l.K)
	if o.D == 0 || o.H == 0 || o.W == 0 {
		panic("model: max pool of a volume smaller than its window")
	}
	out, err := env.newVolume(o.N, o.C, o.D, o.H, o.W)
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

// Backward routes each dout value to its window's maximum; it consumes
// dout.
func (l *MaxPool3) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindPool)()
	if l.argmax.None() {
		panic("model: max pool backward without a training forward")
	}
	s := l.inShape
	din, err := env.newVolume(s.N, s.C, s.D, s.H, s.W)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpPool)
	dy, dx := f.view(dout), f.writer(din)
	if f.err == nil {
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
func (l *MaxPool3) Forget() { l.argmax = backend.View{} }

// Params is none.
func (l *MaxPool3) Params() []*Param { return nil }

// Out divides H (a volume's D*H) and W by the window.
func (l *MaxPool3) Out(in backend.Shape4) (backend.Shape4, float64) {
	return backend.Shape4{N: in.N, C: in.C, H: in.H / (l.K.D * l.K.H), W: in.W / l.K.W}, 0
}

// Upsample3 is PyTorch's Upsample(scale_factor=F, mode="trilinear",
// align_corners=False) with each factor 1 or 2: in (N,C,D,H,W), out
// (N,C,F.D*D,F.H*H,F.W*W). It keeps nothing but the input's shape.
type Upsample3 struct {
	F       backend.Scale3
	inShape backend.Shape5
}

// Forward interpolates.
func (l *Upsample3) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindUpsample)()
	l.inShape = in.shape5()
	o := l.inShape.Scaled(l.F)
	out, err := env.newVolume(o.N, o.C, o.D, o.H, o.W)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpUpsample)
	x, y := f.view(in), f.writer(out)
	if f.err == nil {
		env.Backend.Upsample3(l.inShape, l.F, y, x)
	}
	if err := f.finish(); err != nil {
		out.Release()
		return nil, err
	}
	return out, nil
}

// Backward is the adjoint of Forward; it consumes dout.
func (l *Upsample3) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindUpsample)()
	s := l.inShape
	din, err := env.newVolume(s.N, s.C, s.D, s.H, s.W)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpUpsample)
	dy, dx := f.view(dout), f.writer(din)
	if f.err == nil {
		env.Backend.Upsample3Back(s, l.F, dx, dy)
	}
	if err := f.finish(); err != nil {
		din.Release()
		return nil, err
	}
	dout.Release()
	return din, nil
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *Upsample3) Forget() {}

// Params is none.
func (l *Upsample3) Params() []*Param { return nil }

// Out multiplies H (a volume's D*H) and W by the factors.
func (l *Upsample3) Out(in backend.Shape4) (backend.Shape4, float64) {
	return backend.Shape4{N: in.N, C: in.C, H: in.H * l.F.D * l.F.H, W: in.W * l.F.W}, 0
}
