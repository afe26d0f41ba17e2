package model

import "github.com/memunet/memunet/backend"

// Upsample2 is PyTorch's Upsample(scale_factor=2, mode="bilinear",
// align_corners=False): in (N,C,H,W), out (N,C,2H,2W). It has no parameters
// and keeps nothing but the input shape for backward.
type Upsample2 struct {
	inShape backend.Shape4
}

// Forward interpolates.
func (l *Upsample2) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindUpsample)()
	out, err := env.newActivation(in.N, in.C, 2*in.H, 2*in.W)
	if err != nil {
		return nil, err
	}
	l.inShape = in.shape4()
	f := env.frame(backend.OpUpsample)
	x, y := f.view(in), f.writer(out)
	if f.err == nil {
		env.Backend.Upsample2(l.inShape, y, x)
	}
	if err := f.finish(); err != nil {
		out.Release()
		return nil, err
	}
	return out, nil
}

// Backward is the adjoint of Forward: each dout value is spread back onto
// the four input pixels it was interpolated from, with the same weights.
// It consumes dout.
func (l *Upsample2) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindUpsample)()
	s := l.inShape
	din, err := env.newActivation(s.N, s.C, s.H, s.W)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpUpsample)
	dy, dx := f.view(dout), f.writer(din)
	if f.err == nil {
		env.Backend.Upsample2Back(s, dx, dy)
	}
	if err := f.finish(); err != nil {
		din.Release()
		return nil, err
	}
	dout.Release()
	return din, nil
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *Upsample2) Forget() {}

// Params is none.
func (l *Upsample2) Params() []*Param { return nil }

// Out doubles H and W.
func (l *Upsample2) Out(in backend.Shape4) (backend.Shape4, float64) {
	return backend.Shape4{N: in.N, C: in.C, H: 2 * in.H, W: 2 * in.W}, 0
}
