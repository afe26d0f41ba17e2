package model

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// GroupNorm is PyTorch's GroupNorm(Groups, C, eps=1e-5, affine): x (N,C,H,W)
// is normalized over each (sample, group of C/Groups channels) with the
// biased variance, then scaled and shifted per channel. It has no running
// statistics, so training and eval compute the same.
type GroupNorm struct {
	C, Groups    int
	Eps          float64
	Weight, Bias *Param
	in           *Tensor
	stats        backend.View // saved mean[N*G], invstd[N*G]
	kept         backend.View // a recomputed block's statistics, for its recomputation
}

// NewGroupNorm returns a GroupNorm of c channels in groups groups on dev
// (eps 1e-5; weight 1, bias 0).
func NewGroupNorm(dev *Device, name string, groups, c int) (*GroupNorm, error) {
	if groups <= 0 || c%groups != 0 {
		return nil, fmt.Errorf("model: group norm %s: %d channels are not divisible into %d groups", name, c, groups)
	}
	l := &GroupNorm{C: c, Groups: groups, Eps: 1e-5}
	var err error
	if l.Weight, err = newParam(dev, name+".weight", true, 1, c); err != nil {
		return nil, err
	}
	if l.Bias, err = newParam(dev, name+".bias", true, 0, c); err != nil {
		return nil, err
	}
	return l, nil
}

// Params lists weight and bias.
func (l *GroupNorm) Params() []*Param { return []*Param{l.Weight, l.Bias} }

func (l *GroupNorm) args(in *Tensor) backend.NormArgs {
	if in.C != l.C {
		panic(fmt.Sprintf("model: group norm %s: input has %d channels, want %d", l.Weight.Name, in.C, l.C))
	}
	return backend.NormArgs{Shape4: in.shape4(), Groups: l.Groups, Eps: l.Eps, Gamma: l.Weight.View(), Beta: l.Bias.View()}
}

// Forward: in (N,C,H,W) -> out (N,C,H,W), normalized per sample and group;
// in training it keeps in and the group statistics (mean, invstd: (N*Groups)
// each).
func (l *GroupNorm) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	a := l.args(in)
	out, err := env.activationLike(in, in.C)
	if err != nil {
		return nil, err
	}
	// A recomputed block's recomputation reuses the statistics of its
	// first forward.
	stats, reuse := l.kept, env.recompute && !l.kept.None()
	if !reuse {
		if stats, err = allocView(env.Device, memory.Activations, backend.Float32, a.StatsLen(true)); err != nil {
			out.Release()
			return nil, err
		}
	}
	l.kept = backend.View{}
	f := env.frame(backend.OpNorm)
	x, y := f.view(in), f.writer(out)
	if f.err == nil {
		env.Backend.GroupNorm(a, y, x, stats, reuse)
	}
	if err := f.finish(); err != nil {
		env.Pool.MustFree(stats.Buf)
		out.Release()
		return nil, err
	}
	l.in, l.stats, l.kept = keepStats(env, in, stats)
	return out, nil
}

// Backward: dout (N,C,H,W) -> din (N,C,H,W), and dWeight, dBias (C) +=; it
// consumes dout.
func (l *GroupNorm) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	in := l.in
	if in == nil {
		panic("model: group norm backward without a training forward")
	}
	mustSameShape("group norm backward", in, dout)
	din, err := normBackward(env, in, dout, false, func(dx, dy, x backend.View) {
		env.Backend.GroupNormBack(l.args(in), dx, l.Weight.GradView(), l.Bias.GradView(), dy, x, l.stats)
	})
	if err != nil {
		return nil, err
	}
	env.Pool.MustFree(l.stats.Buf)
	l.in, l.stats = nil, backend.View{}
	return din, nil
}

// reapply is BatchNorm2d.reapply for GroupNorm.
func (l *GroupNorm) reapply(env *Env) (*Tensor, error) {
	return reapplyNorm(env, l.in, func(y, x backend.View) {
		env.Backend.GroupNorm(l.args(l.in), y, x, l.stats, true)
	})
}

// Out keeps the shape.
func (l *GroupNorm) Out(in backend.Shape4) (backend.Shape4, float64) { return sameShape(in) }

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *GroupNorm) Forget() { l.in, l.stats, l.kept = nil, backend.View{}, backend.View{} }
