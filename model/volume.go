package model

import (
	"github.com/memunet/memunet/backend"
)

// Trilinear up-sampling over volumes (N,C,D,H,W), by a factor per axis:
// a layer of its own, since its 2D twin (Upsample2) fuses with the
// concatenation after it (Concat.upsampled).

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
