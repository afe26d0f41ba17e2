package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model/kernels"
)

// Conv2d is a K x K, stride 1 convolution with zero padding Pad.
// in is (N,InC,H,W), Weight is (OutC,InC,K,K), Bias is (OutC) or nil,
// out is (N,OutC,H+2Pad-K+1,W+2Pad-K+1) in the env's precision.
type Conv2d struct {
	InC, OutC, K, Pad int
	Weight, Bias      *Param
	// NoInputGrad skips computing din (for a layer fed by the data).
	NoInputGrad bool
	in          *Tensor // saved for backward
}

func newConv2d(pool *memory.Pool, name string, inC, outC, k, pad int, bias bool) (*Conv2d, error) {
	l := &Conv2d{InC: inC, OutC: outC, K: k, Pad: pad}
	var err error
	if l.Weight, err = newParam(pool, name+".weight", true, outC, inC, k, k); err != nil {
		return nil, err
	}
	if bias {
		if l.Bias, err = newParam(pool, name+".bias", true, outC); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *Conv2d) shape(in *Tensor) kernels.ConvShape {
	if in.C != l.InC {
		panic(fmt.Sprintf("model: conv %s: input has %d channels, want %d", l.Weight.Name, in.C, l.InC))
	}
	return kernels.ConvShape{N: in.N, C: in.C, H: in.H, W: in.W, OC: l.OutC, K: l.K, Pad: l.Pad}
}

func (l *Conv2d) params() []*Param { return appendNonNil(nil, l.Weight, l.Bias) }

// Forward computes out = conv(in, Weight) + Bias and, in training, keeps in.
func (l *Conv2d) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindConvForward)()
	s := l.shape(in)
	out, err := env.newActivation(s.N, s.OC, s.OH(), s.OW())
	if err != nil {
		return nil, err
	}
	f := env.frame()
	one := s // the kernels run one image at a time
	one.N = 1
	w, ws := f.weights(l.Weight), f.scratch(one.WorkspaceSize())
	err = perImage(env, f, s.N, func(g *frame, n int) {
		x, y := g.image(in, n), g.imageOut(out, n)
		if g.ready() {
			kernels.Conv2d(one, y, x, w, l.biasData(), ws)
		}
	})
	if err := errors.Join(err, f.finish()); err != nil {
		out.Release()
		return nil, err
	}
	if env.saves() {
		l.in = in.Retain()
	}
	return out, nil
}

// perImage runs kernel for each image n < N with a frame of its own, so that
// the float32 staging of 16-bit tensors (image views taken with g.image) is
// one image at a time; fp32 tensors are passed through without copies. It
// stops at the first allocation failure, including one already in f.
func perImage(env *Env, f *frame, N int, kernel func(g *frame, n int)) error {
	if f.err != nil {
		return f.err
	}
	for n := 0; n < N; n++ {
		g := env.frame()
		kernel(g, n)
		if err := g.finish(); err != nil {
			return err
		}
	}
	return nil
}

// image returns a float32 view of image n of t, for reading.
func (f *frame) image(t *Tensor, n int) []float32 {
	size := t.Len() / t.N
	return f.viewRange(t, n*size, (n+1)*size)
}

// imageOut returns float32 storage for image n of t, committed at finish.
func (f *frame) imageOut(t *Tensor, n int) []float32 {
	size := t.Len() / t.N
	return f.writerRange(t, n*size, (n+1)*size)
}

// Backward accumulates dWeight and dBias and returns din (nil with NoInputGrad).
// It consumes dout and releases the saved input.
func (l *Conv2d) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindConvBackward)()
	in := l.in
	if in == nil {
		panic("model: conv backward without a training forward")
	}
	s := l.shape(in)
	var din *Tensor
	if !l.NoInputGrad {
		var err error
		if din, err = env.newActivation(in.N, in.C, in.H, in.W); err != nil {
			return nil, err
		}
	}
	f := env.frame()
	one := s // the kernels run one image at a time
	one.N = 1
	w, ws := f.weights(l.Weight), f.scratch(one.WorkspaceSize())
	var dbias []float32
	if l.Bias != nil {
		dbias = l.Bias.Grad()
	}
	err := perImage(env, f, s.N, func(g *frame, n int) {
		x, dy := g.image(in, n), g.image(dout, n)
		var dx []float32
		if din != nil {
			dx = g.imageOut(din, n)
		}
		if g.ready() {
			kernels.Conv2dBackward(one, dx, l.Weight.Grad(), dbias, dy, x, w, ws)
		}
	})
	if err := errors.Join(err, f.finish()); err != nil {
		din.Release()
		return nil, err
	}
	dout.Release()
	in.Release()
	l.in = nil
	return din, nil
}

func (l *Conv2d) biasData() []float32 {
	if l.Bias == nil {
		return nil
	}
	return l.Bias.Data()
}

func (l *Conv2d) forget() { l.in = nil }

// kaimingNormal fills w with N(0, 2/fanIn), PyTorch's
// kaiming_normal_(mode="fan_in", nonlinearity="relu").
func kaimingNormal(rng *rand.Rand, w []float32, fanIn int) {
	std := math.Sqrt(2 / float64(fanIn))
	for i := range w {
		w[i] = float32(rng.NormFloat64() * std)
	}
}

func appendNonNil(ps []*Param, more ...*Param) []*Param {
	for _, p := range more {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// UpConv is a 2x2, stride 2 transposed convolution (PyTorch's
// ConvTranspose2d(InC, OutC, 2, stride=2)). in is (N,InC,H,W), Weight is
// (InC,OutC,2,2), Bias is (OutC), out is (N,OutC,2H,2W).
type UpConv struct {
	InC, OutC    int
	Weight, Bias *Param
	in           *Tensor
}

func newUpConv(pool *memory.Pool, name string, inC, outC int) (*UpConv, error) {
	l := &UpConv{InC: inC, OutC: outC}
	var err error
	if l.Weight, err = newParam(pool, name+".weight", true, inC, outC, 2, 2); err != nil {
		return nil, err
	}
	if l.Bias, err = newParam(pool, name+".bias", true, outC); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *UpConv) params() []*Param { return []*Param{l.Weight, l.Bias} }

func (l *UpConv) shape(in *Tensor) kernels.UpConvShape {
	if in.C != l.InC {
		panic(fmt.Sprintf("model: transposed conv %s: input has %d channels, want %d", l.Weight.Name, in.C, l.InC))
	}
	return kernels.UpConvShape{N: in.N, C: in.C, H: in.H, W: in.W, OC: l.OutC}
}

// Forward computes out and, in training, keeps in.
func (l *UpConv) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindConvForward)()
	s := l.shape(in)
	out, err := env.newActivation(s.N, s.OC, 2*s.H, 2*s.W)
	if err != nil {
		return nil, err
	}
	f := env.frame()
	one := s // the kernels run one image at a time
	one.N = 1
	w, ws := f.weights(l.Weight), f.scratch(one.WorkspaceSize())
	err = perImage(env, f, s.N, func(g *frame, n int) {
		x, y := g.image(in, n), g.imageOut(out, n)
		if g.ready() {
			kernels.UpConv(one, y, x, w, l.Bias.Data(), ws)
		}
	})
	if err := errors.Join(err, f.finish()); err != nil {
		out.Release()
		return nil, err
	}
	if env.saves() {
		l.in = in.Retain()
	}
	return out, nil
}

// Backward accumulates dWeight and dBias and returns din; it consumes dout.
func (l *UpConv) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindConvBackward)()
	in := l.in
	if in == nil {
		panic("model: transposed conv backward without a training forward")
	}
	s := l.shape(in)
	din, err := env.newActivation(in.N, in.C, in.H, in.W)
	if err != nil {
		return nil, err
	}
	f := env.frame()
	one := s // the kernels run one image at a time
	one.N = 1
	w, ws := f.weights(l.Weight), f.scratch(one.WorkspaceSize())
	err = perImage(env, f, s.N, func(g *frame, n int) {
		x, dy, dx := g.image(in, n), g.image(dout, n), g.imageOut(din, n)
		if g.ready() {
			kernels.UpConvBackward(one, dx, l.Weight.Grad(), l.Bias.Grad(), dy, x, w, ws)
		}
	})
	if err := errors.Join(err, f.finish()); err != nil {
		din.Release()
		return nil, err
	}
	dout.Release()
	in.Release()
	l.in = nil
	return din, nil
}

func (l *UpConv) forget() { l.in = nil }
