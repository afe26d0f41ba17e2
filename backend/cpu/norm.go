package cpu

import (
	"fmt"
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// BatchNorm normalizes per channel, in parallel over channels. The
// statistics are one pass of float64 sums shifted by a value of the channel
// (no cancellation when |mean| >> std); the output uses the float32
// statistics that backward and a recomputation use too, so all of them
// agree bit for bit. 16-bit tensors are widened in registers as they are
// read (kernels.AffineHalf and friends), with the bits fp32 staging gave.
func (c CPU) BatchNorm(a backend.NormArgs, out, in, stats backend.View, reuse, update bool) {
	if reuse && update {
		panic("backend/cpu: batch norm: running statistics cannot be updated from reused statistics")
	}
	x, y := activations("batch norm", in, out)
	gamma, beta := f32(a.Gamma), f32(a.Beta)
	rm, rv := f32(a.RunningMean), f32(a.RunningVar)
	mean, inv := halvesOf(stats)
	HW, M := a.H*a.W, a.N*a.H*a.W
	c.team.For(a.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var variance, ss float64
			if !reuse {
				k := float64(x.at(c * HW))
				var s, q float64
				for n := 0; n < a.N; n++ {
					sn, qn := shiftedSums(x, (n*a.C+c)*HW, HW, k)
					s += sn
					q += qn
				}
				d := s / float64(M)
				mu := k + d
				ss = max(q-s*d, 0)
				variance = ss / float64(M)
				mean[c], inv[c] = float32(mu), float32(1/math.Sqrt(variance+a.Eps))
			}
			mu, invstd := float64(mean[c]), float64(inv[c])
			scale := float32(float64(gamma[c]) * invstd)
			shift := float32(float64(beta[c]) - mu*float64(gamma[c])*invstd)
			for n := 0; n < a.N; n++ {
				affine(y, x, (n*a.C+c)*HW, HW, scale, shift)
			}
			if !update {
				continue
			}
			unbiased := variance
			if M > 1 {
				unbiased = ss / float64(M-1)
			}
			rm[c] = float32((1-a.Momentum)*float64(rm[c]) + a.Momentum*float64(mean[c]))
			rv[c] = float32((1-a.Momentum)*float64(rv[c]) + a.Momentum*unbiased)
		}
	})
}

// BatchNormEval normalizes with the running statistics.
func (c CPU) BatchNormEval(a backend.NormArgs, out, in backend.View) {
	x, y := activations("batch norm", in, out)
	gamma, beta := f32(a.Gamma), f32(a.Beta)
	rm, rv := f32(a.RunningMean), f32(a.RunningVar)
	HW := a.H * a.W
	c.team.For(a.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			invstd := 1 / math.Sqrt(float64(rv[c])+a.Eps)
			scale := float32(float64(gamma[c]) * invstd)
			shift := beta[c] - rm[c]*scale
			for n := 0; n < a.N; n++ {
				affine(y, x, (n*a.C+c)*HW, HW, scale, shift)
			}
		}
	})
}

// BatchNormBack: din = gamma*invstd*(dout - mean(dout) - xhat*mean(dout*xhat)),
// per channel. Each channel reads its dout before writing its din, so din
// may be dout.
func (c CPU) BatchNormBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats backend.View) {
	x, dy, dx := gradients("batch norm backward", in, dout, din)
	gamma, dg, db := f32(a.Gamma), f32(dgamma), f32(dbeta)
	mean, inv := halvesOf(stats)
	HW, M := a.H*a.W, float64(a.N*a.H*a.W)
	c.team.For(a.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			mu, invstd := mean[c], inv[c]
			var sdy, sdyx float64
			for n := 0; n < a.N; n++ {
				sg, sgx := gradSums(dy, x, (n*a.C+c)*HW, HW, float64(mu))
				sdy += sg
				sdyx += sgx
			}
			sdyx *= float64(invstd) // Σ dy*xhat
			dg[c] += float32(sdyx)
			db[c] += float32(sdy)
			// dx = k*(dy - mean(dy) - xhat*mean(dy*xhat))
			k := gamma[c] * invstd
			mdy, mdyx := float32(sdy/M), float32(sdyx/M)
			ka, bx, c0 := k, -k*invstd*mdyx, -k*mdy
			for n := 0; n < a.N; n++ {
				normGrad(dx, dy, x, (n*a.C+c)*HW, HW, mu, ka, bx, c0)
			}
		}
	})
}

// GroupNorm normalizes per (sample, group), in parallel over them.
func (c CPU) GroupNorm(a backend.NormArgs, out, in, stats backend.View, reuse bool) {
	x, y := activations("group norm", in, out)
	gamma, beta := f32(a.Gamma), f32(a.Beta)
	mean, inv := halvesOf(stats)
	HW, cg := a.H*a.W, a.C/a.Groups
	size := cg * HW
	c.team.For(a.N*a.Groups, 1, func(lo, hi int) {
		for ng := lo; ng < hi; ng++ {
			if !reuse {
				k := float64(x.at(ng * size))
				s, q := shiftedSums(x, ng*size, size, k)
				d := s / float64(size)
				ss := max(q-s*d, 0)
				mean[ng], inv[ng] = float32(k+d), float32(1/math.Sqrt(ss/float64(size)+a.Eps))
			}
			// float32 statistics, as backward and a recomputation use them
			mu, invstd := float64(mean[ng]), float64(inv[ng])
			for ci := 0; ci < cg; ci++ {
				c := ng%a.Groups*cg + ci
				scale := float32(float64(gamma[c]) * invstd)
				shift := float32(float64(beta[c]) - mu*float64(gamma[c])*invstd)
				affine(y, x, ng*size+ci*HW, HW, scale, shift)
			}
		}
	})
}

// GroupNormBack computes the parameter gradients per channel first, then din
// per (sample, group), so din may be dout.
func (c CPU) GroupNormBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats backend.View) {
	x, dy, dx := gradients("group norm backward", in, dout, din)
	gamma, dg, db := f32(a.Gamma), f32(dgamma), f32(dbeta)
	mean, inv := halvesOf(stats)
	HW, cg := a.H*a.W, a.C/a.Groups
	size := cg * HW
	c.team.For(a.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var sdy, sdyx float64
			for n := 0; n < a.N; n++ {
				ng := n*a.Groups + c/cg
				mu, invstd := mean[ng], inv[ng]
				sg, sgx := gradSums(dy, x, (n*a.C+c)*HW, HW, float64(mu))
				sdy += sg
				sdyx += sgx * float64(invstd)
			}
			dg[c] += float32(sdyx)
			db[c] += float32(sdy)
		}
	})
	c.team.For(a.N*a.Groups, 1, func(lo, hi int) {
		for ng := lo; ng < hi; ng++ {
			mu, invstd := mean[ng], inv[ng]
			base := ng * size
			var s, sx float64 // sums of dxhat and dxhat*xhat
			for ci := 0; ci < cg; ci++ {
				gm := float64(gamma[ng%a.Groups*cg+ci])
				sg, sgx := gradSums(dy, x, base+ci*HW, HW, float64(mu))
				s += gm * sg
				sx += gm * sgx
			}
			sx *= float64(invstd)
			ms, msx := float32(s/float64(size)), float32(sx/float64(size))
			// dx = invstd*(dy*gamma - ms - xhat*msx)
			bx, c0 := -invstd*invstd*msx, -invstd*ms
			for ci := 0; ci < cg; ci++ {
				gm := gamma[ng%a.Groups*cg+ci]
				normGrad(dx, dy, x, base+ci*HW, HW, mu, invstd*gm, bx, c0)
			}
		}
	})
}

// shiftedSums is kernels.ShiftedSums of x's values [off, off+n).
func shiftedSums(x values, off, n int, k float64) (s, q float64) {
	var sums kernels.Sums
	if x.h != nil {
		sums.AddShiftedHalf(x.dt, x.h[off:off+n], k)
	} else {
		sums.AddShifted(x.f[off:off+n], k)
	}
	return sums.Result()
}

// gradSums is kernels.GradSums of dy's and x's values [off, off+n).
func gradSums(dy, x values, off, n int, mu float64) (sg, sgx float64) {
	var sums kernels.Sums
	if x.h != nil {
		sums.AddGradHalf(x.dt, dy.h[off:off+n], x.h[off:off+n], mu)
	} else {
		sums.AddGrad(dy.f[off:off+n], x.f[off:off+n], mu)
	}
	return sums.Result()
}

// affine is kernels.Affine from x's values [off, off+n) into y's.
func affine(y, x values, off, n int, scale, shift float32) {
	if x.h != nil {
		kernels.AffineHalf(x.dt, y.h[off:off+n], x.h[off:off+n], scale, shift)
	} else {
		kernels.Affine(y.f[off:off+n], x.f[off:off+n], scale, shift)
	}
}

// normGrad is kernels.NormGrad over values [off, off+n) of dx, dy and x;
// dx may be dy.
func normGrad(dx, dy, x values, off, n int, mu, a, b, c float32) {
	if x.h != nil {
		kernels.NormGradHalf(x.dt, dx.h[off:off+n], dy.h[off:off+n], x.h[off:off+n], mu, a, b, c)
	} else {
		kernels.NormGrad(dx.f[off:off+n], dy.f[off:off+n], x.f[off:off+n], mu, a, b, c)
	}
}

// activations is a norm's input and output, of one float type.
func activations(op string, in, out backend.View) (x, y values) {
	if in.DT != out.DT {
		panic(fmt.Sprintf("backend/cpu: %s of %v into %v", op, in, out))
	}
	return valuesOf(in), valuesOf(out)
}

// gradients is a norm backward's input, output gradient and input
// gradient, of one float type.
func gradients(op string, in, dout, din backend.View) (x, dy, dx values) {
	if dout.DT != in.DT || din.DT != in.DT {
		panic(fmt.Sprintf("backend/cpu: %s of %v and %v into %v", op, in, dout, din))
	}
	return valuesOf(in), valuesOf(dout), valuesOf(din)
}

// halvesOf splits a saved-statistics view into mean and invstd.
func halvesOf(stats backend.View) (mean, invstd []float32) {
	v := f32(stats)
	return v[:len(v)/2], v[len(v)/2:]
}
