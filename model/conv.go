package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/memunet/memunet/backend"
)

// Conv2d is a K x K, stride 1 convolution with zero padding Pad.
// in is (N,InC,H,W), Weight is (OutC,InC,K,K), Bias is (OutC) or nil,
// out is (N,OutC,H+2Pad-K+1,W+2Pad-K+1) in the env's precision.
type Conv2d struct {
	InC, OutC, K, Pad int
	Weight, Bias      *Param
	// NoInputGrad skips computing din (for a layer fed by the data).
	NoInputGrad bool
	// Algo is how the backend computes it (model.conv_algo; the backend
	// takes Winograd's only where it has it for the shape).
	Algo backend.ConvAlgo
	// KD is the kernel's depth of a convolution over volumes (NewConv3d:
	// in (N,InC,D,H,W), Weight (OutC,InC,KD,K,K), padding Pad on every
	// axis); 0 for images.
	KD int
	// Source, if set, rebuilds the input in backward (a replay from norm1
	// for a DoubleConv's conv2, from a decoderCat for a decoder's conv1):
	// in training the layer then keeps nothing.
	Source inputSource
	in     *Tensor // saved for backward
}

// NewConv2d returns a K x K, stride 1 convolution with zero padding pad on
// dev: weight name+".weight" (outC,inC,k,k), zero until set, and, if bias,
// name+".bias" (outC), zero.
func NewConv2d(dev *Device, name string, inC, outC, k, pad int, bias bool) (*Conv2d, error) {
	return newConv(dev, name, &Conv2d{InC: inC, OutC: outC, K: k, Pad: pad}, bias)
}

// newConv gives l its weight (OutC,InC,[KD,]K,K) and, if bias, its bias.
func newConv(dev *Device, name string, l *Conv2d, bias bool) (*Conv2d, error) {
	shape := []int{l.OutC, l.InC, l.KD, l.K, l.K}
	if l.KD == 0 {
		shape = slices.Delete(shape, 2, 3)
	}
	var err error
	if l.Weight, err = newParam(dev, name+".weight", true, 0, shape...); err != nil {
		return nil, err
	}
	if bias {
		if l.Bias, err = newParam(dev, name+".bias", true, 0, l.OutC); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *Conv2d) shape(in *Tensor) backend.ConvShape {
	if in.C != l.InC {
		panic(fmt.Sprintf("model: conv %s: input has %d channels, want %d", l.Weight.Name, in.C, l.InC))
	}
	s := backend.ConvShape{N: in.N, C: in.C, H: in.H, W: in.W, OC: l.OutC, K: l.K, Pad: l.Pad, Algo: l.Algo}
	if l.KD > 0 {
		s.D, s.KD, s.PadD = in.depth(), l.KD, l.Pad
	}
	return s
}

// outDepth is the output's D for an input of depth d: 0 for images.
func (l *Conv2d) outDepth(s backend.ConvShape) int {
	if l.KD == 0 {
		return 0
	}
	return s.OD()
}

// Params lists the layer's parameters: weight, then bias if any.
func (l *Conv2d) Params() []*Param { return appendNonNil(nil, l.Weight, l.Bias) }

// Forward: in (N,InC,H,W) -> out (N,OutC,OH,OW) = conv(in, Weight) + Bias;
// in training it keeps in (unless a Source rebuilds it).
func (l *Conv2d) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindConvForward)()
	s := l.shape(in)
	out, err := env.newVolume(s.N, s.OC, l.outDepth(s), s.OH(), s.OW())
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpConv)
	s.DT = f.uniform(l.Weight, in, out)
	w, ws := f.weights(l.Weight), f.scratch(env.Backend.ConvWorkspace(s))
	err = env.batches(f, s.N, func(g *frame, lo, hi int) {
		x, y := g.images(in, lo, hi), g.imagesOut(out, lo, hi)
		if g.err == nil {
			env.Backend.Conv(s.Images(hi-lo), y, x, w, biasView(l.Bias), ws)
		}
	}, in, out)
	if err := errors.Join(err, f.finish()); err != nil {
		out.Release()
		return nil, err
	}
	if env.saves() && l.Source == nil {
		l.in = in.Retain()
	}
	return out, nil
}

// Backward: dout (N,OutC,OH,OW) -> din (N,InC,H,W) (nil with NoInputGrad),
// and dWeight (OutC,InC,K,K), dBias (OutC) +=. It consumes dout and
// releases the saved (or rebuilt) input.
func (l *Conv2d) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	if err := rebuildInput(env, &l.in, l.Source, dout); err != nil {
		return nil, err
	}
	defer env.Profile.begin(KindConvBackward)()
	in := l.in
	if in == nil {
		panic("model: conv backward without a training forward")
	}
	s := l.shape(in)
	var din *Tensor
	if !l.NoInputGrad {
		var err error
		if din, err = env.activationLike(in, in.C); err != nil {
			return nil, err
		}
	}
	f := env.frame(backend.OpConv)
	s.DT = f.uniform(l.Weight, in, dout, din)
	w, ws := f.weights(l.Weight), f.scratch(env.Backend.ConvWorkspace(s))
	err := env.batches(f, s.N, func(g *frame, lo, hi int) {
		x, dy := g.images(in, lo, hi), g.images(dout, lo, hi)
		var dx backend.View
		if din != nil {
			dx = g.imagesOut(din, lo, hi)
		}
		if g.err == nil {
			env.Backend.ConvBack(s.Images(hi-lo), dx, l.Weight.GradView(), gradView(l.Bias), dy, x, w, ws)
		}
	}, in, dout, din)
	if err := errors.Join(err, f.finish()); err != nil {
		din.Release()
		return nil, err
	}
	dout.Release()
	in.Release()
	l.in = nil
	return din, nil
}

// NewConv3d is NewConv2d over volumes: weight (outC,inC,k,k,k), zero
// padding pad on every axis (PyTorch's Conv3d).
func NewConv3d(dev *Device, name string, inC, outC, k, pad int, bias bool) (*Conv2d, error) {
	return newConv(dev, name, &Conv2d{InC: inC, OutC: outC, K: k, Pad: pad, KD: k}, bias)
}

// rebuildInput sets *in from src where a layer kept no input because its
// Source rebuilds it; on failure it consumes dout.
func rebuildInput(env *Env, in **Tensor, src inputSource, dout *Tensor) error {
	if *in != nil || src == nil {
		return nil
	}
	t, err := src.rebuild(env)
	if err != nil {
		dout.Release()
		return err
	}
	*in = t
	return nil
}

// Forget drops what Forward kept, its Source's too, without releasing it
// (see Layer).
func (l *Conv2d) Forget() {
	l.in = nil
	if l.Source != nil {
		l.Source.forget()
	}
}

// keepInput takes a reference to in as Forward would have kept it (for a
// recomputed block that rebuilt its input).
func (l *Conv2d) keepInput(in *Tensor) { l.in = in.Retain() }

// Out is (N,OutC,OH,OW) and 2*InC*OutC*K*K*OH*OW FLOPs per image.
func (l *Conv2d) Out(in backend.Shape4) (backend.Shape4, float64) {
	s := backend.ConvShape{N: in.N, C: in.C, H: in.H, W: in.W, OC: l.OutC, K: l.K, Pad: l.Pad}
	// a volume comes as (N,C,D*H,W): its positions counted, the kernel's depth a factor
	return backend.Shape4{N: in.N, C: l.OutC, H: s.OH(), W: s.OW()}, 2 * float64(in.N*l.InC*l.OutC*l.K*l.K*max(l.KD, 1)*s.OH()*s.OW())
}

func biasView(p *Param) backend.View {
	if p == nil {
		return backend.View{}
	}
	return p.View()
}

func gradView(p *Param) backend.View {
	if p == nil {
		return backend.View{}
	}
	return p.GradView()
}

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
	// Source, if set, rebuilds the input in backward (a replay from the
	// block below's norm2): in training the layer then keeps nothing.
	Source inputSource
	// KD is the kernel's depth (and stride's) over volumes (NewUpConv3d:
	// in (N,InC,D,H,W), Weight (InC,OutC,KD,2,2), out (N,OutC,KD*D,2H,2W));
	// 0 for images.
	KD int
	in *Tensor
}

// NewUpConv3d is NewUpConv over volumes with kernel and stride (kd,2,2),
// kd 1 or 2 (PyTorch's ConvTranspose3d).
func NewUpConv3d(dev *Device, name string, inC, outC, kd int) (*UpConv, error) {
	return newUpConv(dev, name, &UpConv{InC: inC, OutC: outC, KD: kd})
}

// NewUpConv returns a 2x2, stride 2 transposed convolution on dev with
// weight (inC,outC,2,2) and bias (outC), zero until set.
func NewUpConv(dev *Device, name string, inC, outC int) (*UpConv, error) {
	return newUpConv(dev, name, &UpConv{InC: inC, OutC: outC})
}

// newUpConv gives l its weight (InC,OutC,[KD,]2,2) and bias.
func newUpConv(dev *Device, name string, l *UpConv) (*UpConv, error) {
	shape := []int{l.InC, l.OutC, l.KD, 2, 2}
	if l.KD == 0 {
		shape = slices.Delete(shape, 2, 3)
	}
	var err error
	if l.Weight, err = newParam(dev, name+".weight", true, 0, shape...); err != nil {
		return nil, err
	}
	if l.Bias, err = newParam(dev, name+".bias", true, 0, l.OutC); err != nil {
		return nil, err
	}
	return l, nil
}

// Params lists weight and bias.
func (l *UpConv) Params() []*Param { return []*Param{l.Weight, l.Bias} }

func (l *UpConv) shape(in *Tensor) backend.UpConvShape {
	if in.C != l.InC {
		panic(fmt.Sprintf("model: transposed conv %s: input has %d channels, want %d", l.Weight.Name, in.C, l.InC))
	}
	s := backend.UpConvShape{N: in.N, C: in.C, H: in.H, W: in.W, OC: l.OutC}
	if l.KD > 0 {
		s.D, s.KD = in.depth(), l.KD
	}
	return s
}

// Forward: in (N,InC,H,W) -> out (N,OutC,2H,2W); in training it keeps in
// (unless a Source rebuilds it).
func (l *UpConv) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindConvForward)()
	s := l.shape(in)
	out, err := env.newVolume(s.N, s.OC, l.KD*s.Depth(), 2*s.H, 2*s.W)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpConv)
	s.DT = f.uniform(l.Weight, in, out)
	w, ws := f.weights(l.Weight), f.scratch(env.Backend.UpConvWorkspace(s))
	err = env.batches(f, s.N, func(g *frame, lo, hi int) {
		x, y := g.images(in, lo, hi), g.imagesOut(out, lo, hi)
		if g.err == nil {
			env.Backend.UpConv(s.Images(hi-lo), y, x, w, l.Bias.View(), ws)
		}
	}, in, out)
	if err := errors.Join(err, f.finish()); err != nil {
		out.Release()
		return nil, err
	}
	if env.saves() && l.Source == nil {
		l.in = in.Retain()
	}
	return out, nil
}

// Backward: dout (N,OutC,2H,2W) -> din (N,InC,H,W), and dWeight
// (InC,OutC,2,2), dBias (OutC) +=; it consumes dout.
func (l *UpConv) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	if err := rebuildInput(env, &l.in, l.Source, dout); err != nil {
		return nil, err
	}
	defer env.Profile.begin(KindConvBackward)()
	in := l.in
	if in == nil {
		panic("model: transposed conv backward without a training forward")
	}
	s := l.shape(in)
	din, err := env.activationLike(in, in.C)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpConv)
	s.DT = f.uniform(l.Weight, in, dout, din)
	w, ws := f.weights(l.Weight), f.scratch(env.Backend.UpConvWorkspace(s))
	err = env.batches(f, s.N, func(g *frame, lo, hi int) {
		x, dy, dx := g.images(in, lo, hi), g.images(dout, lo, hi), g.imagesOut(din, lo, hi)
		if g.err == nil {
			env.Backend.UpConvBack(s.Images(hi-lo), dx, l.Weight.GradView(), l.Bias.GradView(), dy, x, w, ws)
		}
	}, in, dout, din)
	if err := errors.Join(err, f.finish()); err != nil {
		din.Release()
		return nil, err
	}
	dout.Release()
	in.Release()
	l.in = nil
	return din, nil
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *UpConv) Forget() {
	l.in = nil
	if l.Source != nil {
		l.Source.forget()
	}
}

// Out is (N,OutC,2H,2W) and 2*InC*OutC*4*H*W FLOPs per image.
func (l *UpConv) Out(in backend.Shape4) (backend.Shape4, float64) {
	kd := max(l.KD, 1) // a volume comes as (N,C,D*H,W)
	return backend.Shape4{N: in.N, C: l.OutC, H: 2 * kd * in.H, W: 2 * in.W}, 2 * float64(in.N*l.InC*l.OutC*4*kd*in.H*in.W)
}
