package model

import (
	"fmt"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// BatchNorm2d is PyTorch's BatchNorm2d(C, eps=1e-5, momentum=0.1, affine).
// In training, x (N,C,H,W) is normalized per channel with the batch mean and
// biased variance over (N,H,W), and the running statistics are updated as
// running = (1-Momentum)*running + Momentum*batch, with the unbiased variance.
// In eval, the running statistics are used.
type BatchNorm2d struct {
	C                       int
	Eps, Momentum           float64
	Weight, Bias            *Param // gamma, beta: (C)
	RunningMean, RunningVar *Param // (C), not trainable
	NumBatchesTracked       int64
	in                      *Tensor
	stats                   backend.View // saved mean[C], invstd[C]
	kept                    backend.View // a recomputed block's batch statistics, for its recomputation
}

// NewBatchNorm2d returns a BatchNorm2d over c channels on dev (eps 1e-5,
// momentum 0.1; weight 1, bias 0, running mean 0, running variance 1).
func NewBatchNorm2d(dev *Device, name string, c int) (*BatchNorm2d, error) {
	l := &BatchNorm2d{C: c, Eps: 1e-5, Momentum: 0.1}
	var err error
	for _, p := range []struct {
		dst       **Param
		name      string
		trainable bool
		fill      float32
	}{
		{&l.Weight, ".weight", true, 1}, {&l.Bias, ".bias", true, 0},
		{&l.RunningMean, ".running_mean", false, 0}, {&l.RunningVar, ".running_var", false, 1},
	} {
		if *p.dst, err = newParam(dev, name+p.name, p.trainable, p.fill, c); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// CountName is the state_dict key of NumBatchesTracked: the weight's name
// with ".weight" replaced by ".num_batches_tracked".
func (l *BatchNorm2d) CountName() string {
	return strings.TrimSuffix(l.Weight.Name, ".weight") + ".num_batches_tracked"
}

// Params lists weight, bias, running mean and running variance.
func (l *BatchNorm2d) Params() []*Param {
	return []*Param{l.Weight, l.Bias, l.RunningMean, l.RunningVar}
}

func (l *BatchNorm2d) args(in *Tensor) backend.NormArgs {
	if in.C != l.C {
		panic(fmt.Sprintf("model: batch norm %s: input has %d channels, want %d", l.Weight.Name, in.C, l.C))
	}
	return backend.NormArgs{Shape4: in.shape4(), Eps: l.Eps, Momentum: l.Momentum,
		Gamma: l.Weight.View(), Beta: l.Bias.View(), RunningMean: l.RunningMean.View(), RunningVar: l.RunningVar.View()}
}

// Forward: in (N,C,H,W) -> out (N,C,H,W), normalized per channel; in
// training it keeps in and the batch statistics (mean, invstd: (C) each).
func (l *BatchNorm2d) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	a := l.args(in)
	out, err := env.activationLike(in, in.C)
	if err != nil {
		return nil, err
	}
	if !env.Training {
		f := env.frame(backend.OpNorm)
		x, y := f.view(in), f.writer(out)
		if f.err == nil {
			env.Backend.BatchNormEval(a, y, x)
		}
		if err := f.finish(); err != nil {
			out.Release()
			return nil, err
		}
		return out, nil
	}
	// A recomputed block's recomputation reuses the batch statistics of
	// its first forward, and must not count the batch twice.
	stats, reuse, err := l.statsFor(env)
	if err != nil {
		out.Release()
		return nil, err
	}
	f := env.frame(backend.OpNorm)
	x, y := f.view(in), f.writer(out)
	if f.err == nil {
		if env.SyncSum != nil && !reuse {
			f.err = l.syncForward(env, a, y, x, stats, !env.recompute)
		} else {
			env.Backend.BatchNorm(a, y, x, stats, reuse, !env.recompute)
		}
	}
	if err := f.finish(); err != nil {
		env.Pool.MustFree(stats.Buf)
		out.Release()
		return nil, err
	}
	if !env.recompute {
		l.NumBatchesTracked++
	}
	l.in, l.stats, l.kept = keepStats(env, in, stats)
	return out, nil
}

// Backward: dout (N,C,H,W) -> din (N,C,H,W) =
// gamma*invstd*(dout - mean(dout) - xhat*mean(dout*xhat)) per channel, and
// dWeight, dBias (C) +=. It consumes dout (reusing its buffer for din when
// it holds the only reference).
func (l *BatchNorm2d) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	in := l.in
	if in == nil {
		panic("model: batch norm backward without a training forward")
	}
	mustSameShape("batch norm backward", in, dout)
	var syncErr error
	// The synchronised backward mixes the tensors' type with a float32
	// correction, so it takes them staged.
	din, err := normBackward(env, in, dout, env.SyncSum != nil, func(dx, dy, x backend.View) {
		if env.SyncSum != nil {
			syncErr = l.syncBackward(env, l.args(in), dx, dy, x)
			return
		}
		env.Backend.BatchNormBack(l.args(in), dx, l.Weight.GradView(), l.Bias.GradView(), dy, x, l.stats)
	})
	if err == nil && syncErr != nil {
		din.Release()
		err = syncErr
	}
	if err != nil {
		return nil, err
	}
	env.Pool.MustFree(l.stats.Buf)
	l.in, l.stats = nil, backend.View{}
	return din, nil
}

// fusesReLU: in training, on the batch's own statistics (not
// synchronised over ranks), for tensors the backend takes as they are
// (staged ones would give the ReLU's mask of the fp32 values).
func (l *BatchNorm2d) fusesReLU(env *Env, dt backend.DType) bool {
	return env.Training && env.SyncSum == nil && (dt == backend.Float32 || !env.Backend.Stages(backend.OpNorm, dt))
}

// forwardReLU is Forward then r.Forward in one backend operation
// (BatchNormReLU): the same allocations in the same order (the output,
// the statistics, the ReLU's mask), the same kept tensors; the ReLU works
// in place, as it does on the norm's fresh output.
func (l *BatchNorm2d) forwardReLU(env *Env, in *Tensor, r *ReLU) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	a := l.args(in)
	out, err := env.activationLike(in, in.C)
	if err != nil {
		return nil, err
	}
	stats, reuse, err := l.statsFor(env)
	if err != nil {
		out.Release()
		return nil, err
	}
	var mask backend.View
	if env.saves() && r.Mask {
		if mask, err = allocView(env.Device, memory.Activations, backend.Uint8, (out.Len()+7)/8); err != nil {
			env.Pool.MustFree(stats.Buf)
			out.Release()
			return nil, err
		}
	}
	env.Backend.BatchNormReLU(a, out.View(), mask, in.View(), stats, reuse, !env.recompute)
	if !env.recompute {
		l.NumBatchesTracked++
	}
	l.in, l.stats, l.kept = keepStats(env, in, stats)
	switch {
	case !mask.None():
		r.mask = mask
	case env.saves():
		r.out = out.Retain()
	}
	return out, nil
}

// backwardReLU is r.Backward then Backward in one backend operation
// (BatchNormReLUBack), with their allocations and releases.
func (l *BatchNorm2d) backwardReLU(env *Env, dout *Tensor, r *ReLU) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	in := l.in
	if in == nil || r.kept().None() {
		panic("model: batch norm and relu backward without a training forward")
	}
	mustSameShape("batch norm backward", in, dout)
	din, err := gradTensorLike(env, dout)
	if err != nil {
		return nil, err
	}
	env.Backend.BatchNormReLUBack(l.args(in), din.View(), l.Weight.GradView(), l.Bias.GradView(), dout.View(), in.View(), l.stats, r.kept())
	if din != dout {
		dout.Release()
	}
	r.releaseKept(env)
	in.Release()
	env.Pool.MustFree(l.stats.Buf)
	l.in, l.stats = nil, backend.View{}
	return din, nil
}

// reapply normalizes the input Forward kept with the statistics it kept,
// as Forward did (the same bits), keeping nothing more: for a layer whose
// input is this norm's output, rebuilt in backward (normAgain).
func (l *BatchNorm2d) reapply(env *Env) (*Tensor, error) {
	return reapplyNorm(env, l.in, func(y, x backend.View) {
		env.Backend.BatchNorm(l.args(l.in), y, x, l.stats, true, false)
	})
}

// statsFor is the view a training forward writes its statistics into: the
// kept ones of a recomputed block's first forward (reuse), or new ones.
func (l *BatchNorm2d) statsFor(env *Env) (stats backend.View, reuse bool, err error) {
	if env.recompute && !l.kept.None() {
		kept := l.kept
		l.kept = backend.View{}
		return kept, true, nil
	}
	l.kept = backend.View{}
	stats, err = allocView(env.Device, memory.Activations, backend.Float32, 2*l.C)
	return stats, false, err
}

// Out keeps the shape.
func (l *BatchNorm2d) Out(in backend.Shape4) (backend.Shape4, float64) { return sameShape(in) }

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *BatchNorm2d) Forget() { l.in, l.stats, l.kept = nil, backend.View{}, backend.View{} }
