package model

import (
	"fmt"
	"math"

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
	stats                   *memory.Buffer // saved mean[C], invstd[C]
	kept                    *memory.Buffer // a checkpointed block's batch statistics, for its recomputation
}

func newBatchNorm2d(pool *memory.Pool, name string, c int) (*BatchNorm2d, error) {
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
		if *p.dst, err = newParam(pool, name+p.name, p.trainable, c); err != nil {
			return nil, err
		}
		fill((*p.dst).Data(), p.fill)
	}
	return l, nil
}

func (l *BatchNorm2d) params() []*Param {
	return []*Param{l.Weight, l.Bias, l.RunningMean, l.RunningVar}
}

func (l *BatchNorm2d) check(in *Tensor) {
	if in.C != l.C {
		panic(fmt.Sprintf("model: batch norm %s: input has %d channels, want %d", l.Weight.Name, in.C, l.C))
	}
}

// Forward normalizes in; in training it keeps in and the batch statistics.
func (l *BatchNorm2d) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	l.check(in)
	out, err := env.newActivation(in.N, in.C, in.H, in.W)
	if err != nil {
		return nil, err
	}
	gamma, beta := l.Weight.Data(), l.Bias.Data()
	rm, rv := l.RunningMean.Data(), l.RunningVar.Data()
	HW, M := in.H*in.W, in.N*in.H*in.W
	if !env.Training {
		f := env.frame()
		x, y := f.view(in), f.writer(out)
		if f.err != nil {
			f.finish()
			out.Release()
			return nil, f.err
		}
		env.forEach(l.C, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				invstd := 1 / math.Sqrt(float64(rv[c])+l.Eps)
				scale := float32(float64(gamma[c]) * invstd)
				shift := beta[c] - rm[c]*scale
				for n := 0; n < in.N; n++ {
					off := (n*l.C + c) * HW
					affine(y[off:off+HW], x[off:off+HW], scale, shift)
				}
			}
		})
		f.finish()
		return out, nil
	}
	// A checkpointed block's recomputation reuses the batch statistics of
	// its first forward.
	reuse := env.recompute && l.kept != nil
	stats := l.kept
	if !reuse {
		if stats, err = env.Pool.AllocFloat32(memory.Activations, 2*l.C); err != nil {
			out.Release()
			return nil, err
		}
	}
	l.kept = nil
	f := env.frame()
	x, y := f.view(in), f.writer(out)
	if f.err != nil {
		f.finish()
		env.Pool.MustFree(stats)
		out.Release()
		return nil, f.err
	}
	update := !env.recompute // a checkpointed block's recomputation must not count the batch twice
	mean, inv := halves(stats)
	env.forEach(l.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var variance, ss float64
			if !reuse {
				// One pass of float64 sums shifted by a value of the
				// channel (no cancellation when |mean| >> std).
				k := float64(x[c*HW])
				var s, q float64
				for n := 0; n < in.N; n++ {
					off := (n*l.C + c) * HW
					sn, qn := shiftedSums(x[off:off+HW], k)
					s += sn
					q += qn
				}
				d := s / float64(M)
				mu := k + d
				ss = max(q-s*d, 0)
				variance = ss / float64(M)
				mean[c], inv[c] = float32(mu), float32(1/math.Sqrt(variance+l.Eps))
			}
			// The output uses the float32 statistics that backward (and a
			// recomputation) use too, so all of them agree bit for bit.
			mu, invstd := float64(mean[c]), float64(inv[c])
			scale := float32(float64(gamma[c]) * invstd)
			shift := float32(float64(beta[c]) - mu*float64(gamma[c])*invstd)
			for n := 0; n < in.N; n++ {
				off := (n*l.C + c) * HW
				affine(y[off:off+HW], x[off:off+HW], scale, shift)
			}
			if !update {
				continue
			}
			unbiased := variance
			if M > 1 {
				unbiased = ss / float64(M-1)
			}
			rm[c] = float32((1-l.Momentum)*float64(rm[c]) + l.Momentum*float64(mean[c]))
			rv[c] = float32((1-l.Momentum)*float64(rv[c]) + l.Momentum*unbiased)
		}
	})
	f.finish()
	if update {
		l.NumBatchesTracked++
	}
	switch {
	case env.saves():
		l.in, l.stats = in.Retain(), stats
	case env.noSave && env.Training:
		l.kept = stats // for the recomputation in backward
	default:
		env.Pool.MustFree(stats)
	}
	return out, nil
}

// Backward accumulates dWeight, dBias and returns
// din = gamma*invstd*(dout - mean(dout) - xhat*mean(dout*xhat)), per channel.
// It consumes dout (reusing its buffer for din when it holds the only reference).
func (l *BatchNorm2d) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	in := l.in
	if in == nil {
		panic("model: batch norm backward without a training forward")
	}
	mustSameShape("batch norm backward", in, dout)
	din, err := gradTensorLike(env, dout)
	if err != nil {
		return nil, err
	}
	f := env.frame()
	x, dy, dx := f.view(in), f.view(dout), f.writer(din)
	if f.err != nil {
		f.finish()
		if din != dout {
			din.Release()
		}
		return nil, f.err
	}
	gamma := l.Weight.Data()
	dgamma, dbeta := l.Weight.Grad(), l.Bias.Grad()
	mean, inv := halves(l.stats)
	HW, M := in.H*in.W, float64(in.N*in.H*in.W)
	env.forEach(l.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			mu, invstd := mean[c], inv[c]
			var sdy, sdyx float64
			for n := 0; n < in.N; n++ {
				off := (n*l.C + c) * HW
				sg, sgx := gradSums(dy[off:off+HW], x[off:off+HW], float64(mu))
				sdy += sg
				sdyx += sgx
			}
			sdyx *= float64(invstd) // Σ dy*xhat
			dgamma[c] += float32(sdyx)
			dbeta[c] += float32(sdy)
			// dx = k*(dy - mean(dy) - xhat*mean(dy*xhat))
			k := gamma[c] * invstd
			mdy, mdyx := float32(sdy/M), float32(sdyx/M)
			a, bx, c0 := k, -k*invstd*mdyx, -k*mdy
			for n := 0; n < in.N; n++ {
				off := (n*l.C + c) * HW
				normGrad(dx[off:off+HW], dy[off:off+HW], x[off:off+HW], mu, a, bx, c0)
			}
		}
	})
	f.finish()
	if din != dout {
		dout.Release()
	}
	in.Release()
	env.Pool.MustFree(l.stats)
	l.in, l.stats = nil, nil
	return din, nil
}

// GroupNorm is PyTorch's GroupNorm(Groups, C, eps=1e-5, affine): x (N,C,H,W)
// is normalized over each (sample, group of C/Groups channels) with the
// biased variance, then scaled and shifted per channel. It has no running
// statistics, so training and eval compute the same.
type GroupNorm struct {
	C, Groups    int
	Eps          float64
	Weight, Bias *Param
	in           *Tensor
	stats        *memory.Buffer // saved mean[N*G], invstd[N*G]
	kept         *memory.Buffer // a checkpointed block's statistics, for its recomputation
}

func newGroupNorm(pool *memory.Pool, name string, groups, c int) (*GroupNorm, error) {
	if groups <= 0 || c%groups != 0 {
		return nil, fmt.Errorf("model: group norm %s: %d channels are not divisible into %d groups", name, c, groups)
	}
	l := &GroupNorm{C: c, Groups: groups, Eps: 1e-5}
	var err error
	if l.Weight, err = newParam(pool, name+".weight", true, c); err != nil {
		return nil, err
	}
	fill(l.Weight.Data(), 1)
	if l.Bias, err = newParam(pool, name+".bias", true, c); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *GroupNorm) params() []*Param { return []*Param{l.Weight, l.Bias} }

// Forward normalizes in; in training it keeps in and the group statistics.
func (l *GroupNorm) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	if in.C != l.C {
		panic(fmt.Sprintf("model: group norm %s: input has %d channels, want %d", l.Weight.Name, in.C, l.C))
	}
	out, err := env.newActivation(in.N, in.C, in.H, in.W)
	if err != nil {
		return nil, err
	}
	// A checkpointed block's recomputation reuses the statistics of its
	// first forward.
	reuse := env.recompute && l.kept != nil
	stats := l.kept
	if !reuse {
		if stats, err = env.Pool.AllocFloat32(memory.Activations, 2*in.N*l.Groups); err != nil {
			out.Release()
			return nil, err
		}
	}
	l.kept = nil
	NG := in.N * l.Groups
	mean, inv := halves(stats)
	f := env.frame()
	x, y := f.view(in), f.writer(out)
	if f.err != nil {
		f.finish()
		env.Pool.MustFree(stats)
		out.Release()
		return nil, f.err
	}
	gamma, beta := l.Weight.Data(), l.Bias.Data()
	HW, cg := in.H*in.W, l.C/l.Groups
	size := cg * HW
	env.forEach(NG, 1, func(lo, hi int) {
		for ng := lo; ng < hi; ng++ {
			xs := x[ng*size : (ng+1)*size]
			if !reuse {
				k := float64(xs[0])
				s, q := shiftedSums(xs, k)
				d := s / float64(size)
				ss := max(q-s*d, 0)
				mean[ng], inv[ng] = float32(k+d), float32(1/math.Sqrt(ss/float64(size)+l.Eps))
			}
			// float32 statistics, as backward and a recomputation use them
			mu, invstd := float64(mean[ng]), float64(inv[ng])
			for ci := 0; ci < cg; ci++ {
				c := ng%l.Groups*cg + ci
				scale := float32(float64(gamma[c]) * invstd)
				shift := float32(float64(beta[c]) - mu*float64(gamma[c])*invstd)
				off := ci * HW
				affine(y[ng*size+off:ng*size+off+HW], xs[off:off+HW], scale, shift)
			}
		}
	})
	f.finish()
	switch {
	case env.saves():
		l.in, l.stats = in.Retain(), stats
	case env.noSave && env.Training:
		l.kept = stats // for the recomputation in backward
	default:
		env.Pool.MustFree(stats)
	}
	return out, nil
}

// Backward accumulates dWeight, dBias and returns din; it consumes dout.
func (l *GroupNorm) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindNorm)()
	in := l.in
	if in == nil {
		panic("model: group norm backward without a training forward")
	}
	mustSameShape("group norm backward", in, dout)
	din, err := gradTensorLike(env, dout)
	if err != nil {
		return nil, err
	}
	f := env.frame()
	x, dy, dx := f.view(in), f.view(dout), f.writer(din)
	if f.err != nil {
		f.finish()
		if din != dout {
			din.Release()
		}
		return nil, f.err
	}
	NG := in.N * l.Groups
	mean, inv := halves(l.stats)
	gamma := l.Weight.Data()
	dgamma, dbeta := l.Weight.Grad(), l.Bias.Grad()
	HW, cg := in.H*in.W, l.C/l.Groups
	size := cg * HW
	// Parameter gradients first, per channel, before din may overwrite dout.
	env.forEach(l.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var sdy, sdyx float64
			for n := 0; n < in.N; n++ {
				ng := n*l.Groups + c/cg
				mu, invstd := mean[ng], inv[ng]
				off := (n*l.C + c) * HW
				sg, sgx := gradSums(dy[off:off+HW], x[off:off+HW], float64(mu))
				sdy += sg
				sdyx += sgx * float64(invstd)
			}
			dgamma[c] += float32(sdyx)
			dbeta[c] += float32(sdy)
		}
	})
	env.forEach(NG, 1, func(lo, hi int) {
		for ng := lo; ng < hi; ng++ {
			mu, invstd := mean[ng], inv[ng]
			base := ng * size
			var s, sx float64 // sums of dxhat and dxhat*xhat
			for ci := 0; ci < cg; ci++ {
				gm := float64(gamma[ng%l.Groups*cg+ci])
				off := base + ci*HW
				sg, sgx := gradSums(dy[off:off+HW], x[off:off+HW], float64(mu))
				s += gm * sg
				sx += gm * sgx
			}
			sx *= float64(invstd)
			ms, msx := float32(s/float64(size)), float32(sx/float64(size))
			// dx = invstd*(dy*gamma - ms - xhat*msx)
			bx, c0 := -invstd*invstd*msx, -invstd*ms
			for ci := 0; ci < cg; ci++ {
				gm := gamma[ng%l.Groups*cg+ci]
				off := base + ci*HW
				normGrad(dx[off:off+HW], dy[off:off+HW], x[off:off+HW], mu, invstd*gm, bx, c0)
			}
		}
	})
	f.finish()
	if din != dout {
		dout.Release()
	}
	in.Release()
	env.Pool.MustFree(l.stats)
	l.in, l.stats = nil, nil
	return din, nil
}

func (l *BatchNorm2d) forget() { l.in, l.stats, l.kept = nil, nil, nil }

func (l *GroupNorm) forget() { l.in, l.stats, l.kept = nil, nil, nil }

// gradTensorLike returns a tensor to write din into: dout itself when the
// caller holds its only reference (the backward then works in place), else a
// new tensor of the same shape.
func gradTensorLike(env *Env, dout *Tensor) (*Tensor, error) {
	if dout.Refs() == 1 {
		return dout, nil
	}
	return NewTensorOf(env.Pool, memory.Activations, dout.DType, dout.N, dout.C, dout.H, dout.W)
}

func fill(xs []float32, v float32) {
	for i := range xs {
		xs[i] = v
	}
}

// halves splits a saved-statistics buffer into its mean and invstd halves
// (both nil in a dry run).
func halves(b *memory.Buffer) (mean, invstd []float32) {
	v := b.Float32()
	return v[:len(v)/2], v[len(v)/2:]
}
