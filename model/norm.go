package model

import "github.com/memunet/memunet/backend"

// What BatchNorm2d (batchnorm.go) and GroupNorm (groupnorm.go) share.

// norm is a BatchNorm2d or a GroupNorm.
type norm interface {
	Layer
	// reapply normalizes the input Forward kept with the statistics it
	// kept, as Forward did (the same bits), keeping nothing more: for a
	// layer whose input is rebuilt from this norm's output (normAgain).
	reapply(env *Env) (*Tensor, error)
}

// reapplyNorm runs a norm's op from its kept input into a new activation.
func reapplyNorm(env *Env, in *Tensor, op func(y, x backend.View)) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	if in == nil {
		panic("model: norm reapplied without a training forward")
	}
	out, err := env.activationLike(in, in.C)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpNorm)
	x, y := f.view(in), f.writer(out)
	if f.err == nil {
		op(y, x)
	}
	if err := f.finish(); err != nil {
		out.Release()
		return nil, err
	}
	return out, nil
}

// keepStats decides what a norm keeps after a training forward: in and the
// statistics for backward, only the statistics for a recomputed block's
// recomputation, or nothing (the statistics are freed).
func keepStats(env *Env, in *Tensor, stats backend.View) (saved *Tensor, forBackward, kept backend.View) {
	switch {
	case env.saves():
		return in.Retain(), stats, backend.View{}
	case env.noSave && env.Training:
		return nil, backend.View{}, stats
	}
	env.Pool.MustFree(stats.Buf)
	return nil, backend.View{}, backend.View{}
}

// normBackward runs a norm's backward op over din (dout itself when the
// caller holds its only reference), dout and the saved input, then releases
// dout (unless it became din) and the input. With staged, 16-bit tensors
// reach op as float32 whatever the backend takes.
func normBackward(env *Env, in, dout *Tensor, staged bool, op func(dx, dy, x backend.View)) (*Tensor, error) {
	din, err := gradTensorLike(env, dout)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpNorm)
	f.mixed = staged
	x, dy, dx := f.view(in), f.view(dout), f.writer(din)
	if f.err == nil {
		op(dx, dy, x)
	}
	if err := f.finish(); err != nil {
		if din != dout {
			din.Release()
		}
		return nil, err
	}
	if din != dout {
		dout.Release()
	}
	in.Release()
	return din, nil
}
