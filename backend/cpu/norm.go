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
	x, y := activations("batch norm", in, out)
	c.batchNorm(a, x, stats, reuse, update, func(off, n int, scale, shift float32) { affine(y, x, off, n, scale, shift) })
}

// BatchNormReLU is BatchNorm with the ReLU (and its mask) applied to each
// block of a plane's output while it is in cache, where the planes are
// whole bytes of the mask (else BatchNorm, then the ReLU's pass).
func (c CPU) BatchNormReLU(a backend.NormArgs, out, mask, in, stats backend.View, reuse, update bool) {
	x, y := activations("batch norm", in, out)
	m := u8(mask)
	if (a.H*a.W)%8 != 0 || !mask.None() && len(m) != (out.Len+7)/8 {
		backend.Composed{Backend: c}.BatchNormReLU(a, out, mask, in, stats, reuse, update)
		return
	}
	inf := infBits(out.DT)
	c.batchNorm(a, x, stats, reuse, update, func(off, n int, scale, shift float32) {
		if x.h == nil { // one pass in registers
			var bits []uint8
			if m != nil {
				bits = m[off/8 : (off+n+7)/8]
			}
			kernels.AffineReLUMask(y.f[off:off+n], x.f[off:off+n], bits, scale, shift)
			return
		}
		for lo := off; lo < off+n; lo += fuseBlock {
			k := min(fuseBlock, off+n-lo)
			affine(y, x, lo, k, scale, shift)
			reluBlock(y, lo, k, m, inf)
		}
	})
}

// fuseBlock is the values of a plane a fused pass works on at a time: 8
// KiB of float32, in L1 from one step to the next; a multiple of 16 (the
// sums' chains) and of 8 (mask bytes).
const fuseBlock = 2048

// reluBlock applies the ReLU in place to y's values [off, off+n) and,
// where mask is given, packs their signs into it (off and n multiples of
// 8, or n reaching y's end).
func reluBlock(y values, off, n int, mask []uint8, inf uint16) {
	var bits []uint8
	if mask != nil {
		bits = mask[off/8 : (off+n+7)/8]
	}
	if y.h != nil {
		v := y.h[off : off+n]
		kernels.ReLU16(v, v, inf)
		if bits != nil {
			kernels.ReLUMask16(bits, v, inf)
		}
		return
	}
	v := y.f[off : off+n]
	kernels.ReLU(v, v)
	if bits != nil {
		kernels.ReLUMask(bits, v)
	}
}

// batchNorm is BatchNorm's statistics and running statistics, and apply
// for each plane with the channel's scale and shift.
func (c CPU) batchNorm(a backend.NormArgs, x values, stats backend.View, reuse, update bool, apply func(off, n int, scale, shift float32)) {
	if reuse && update {
		panic("backend/cpu: batch norm: running statistics cannot be updated from reused statistics")
	}
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
				apply((n*a.C+c)*HW, HW, scale, shift)
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
	c.batchNormBack(a, x, dy, dx, dgamma, stats, dbeta, func(off, n int, mu float64) (float64, float64) { return gradSums(dy, x, off, n, mu) })
}

// BatchNormReLUBack is the ReLU's backward into din, block by block of
// each plane, each block's sums taken while it is in cache, then
// BatchNormBack's din in place: BatchNormBack's bits without the pass
// between, where the planes are whole bytes of a mask (else the two
// operations).
func (c CPU) BatchNormReLUBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats, relu backend.View) {
	x, dy, dx := gradients("batch norm backward", in, dout, din)
	var m []uint8
	var y values
	if relu.DT == backend.Uint8 {
		if m = u8(relu); len(m) != (dout.Len+7)/8 {
			panic(fmt.Sprintf("backend/cpu: batch norm and relu backward of %v with mask %v", dout, relu))
		}
	} else {
		if y = valuesOf(relu); relu.DT != dout.DT || relu.Len != dout.Len {
			panic(fmt.Sprintf("backend/cpu: batch norm and relu backward of %v with %v", dout, relu))
		}
	}
	if (a.H*a.W)%8 != 0 {
		backend.Composed{Backend: c}.BatchNormReLUBack(a, din, dgamma, dbeta, dout, in, stats, relu)
		return
	}
	inf := infBits(dout.DT)
	c.batchNormBack(a, x, dx, dx, dgamma, stats, dbeta, func(off, n int, mu float64) (float64, float64) {
		var s kernels.Sums          // on the stack: no pointer to it leaves this function
		if m != nil && x.h == nil { // one pass in registers
			s.AddReLUBackMaskGrad(dx.f[off:off+n], dy.f[off:off+n], x.f[off:off+n], m[off/8:(off+n+7)/8], mu)
			return s.Result()
		}
		for lo := off; lo < off+n; lo += fuseBlock {
			k := min(fuseBlock, off+n-lo)
			reluBackBlock(dx, dy, lo, k, m, y, inf)
			addGradSums(&s, dx, x, lo, k, mu)
		}
		return s.Result()
	})
}

// reluBackBlock is the ReLU's backward of dy's values [off, off+n) into
// dx's: from the mask where there is one, else from the ReLU's output y.
func reluBackBlock(dx, dy values, off, n int, mask []uint8, y values, inf uint16) {
	if mask != nil {
		bits := mask[off/8 : (off+n+7)/8]
		if dy.h != nil {
			kernels.ReLUBackwardMask16(dx.h[off:off+n], dy.h[off:off+n], bits)
		} else {
			kernels.ReLUBackwardMask(dx.f[off:off+n], dy.f[off:off+n], bits)
		}
		return
	}
	if dy.h != nil {
		kernels.ReLUBackward16(dx.h[off:off+n], dy.h[off:off+n], y.h[off:off+n], inf)
	} else {
		kernels.ReLUBackward(dx.f[off:off+n], dy.f[off:off+n], y.f[off:off+n])
	}
}

// batchNormBack is BatchNormBack with the gradient sums of a plane's
// values [off, off+n) from sums (which may write dy first), then din
// from dy.
func (c CPU) batchNormBack(a backend.NormArgs, x, dy, dx values, dgamma, stats, dbeta backend.View, sums func(off, n int, mu float64) (sg, sgx float64)) {
	gamma, dg, db := f32(a.Gamma), f32(dgamma), f32(dbeta)
	mean, inv := halvesOf(stats)
	HW, M := a.H*a.W, float64(a.N*a.H*a.W)
	c.team.For(a.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			mu, invstd := mean[c], inv[c]
			var sdy, sdyx float64
			for n := 0; n < a.N; n++ {
				sg, sgx := sums((n*a.C+c)*HW, HW, float64(mu))
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
	addGradSums(&sums, dy, x, off, n, mu)
	return sums.Result()
}

// addGradSums adds dy's and x's values [off, off+n) to sums.
func addGradSums(sums *kernels.Sums, dy, x values, off, n int, mu float64) {
	if x.h != nil {
		sums.AddGradHalf(x.dt, dy.h[off:off+n], x.h[off:off+n], mu)
	} else {
		sums.AddGrad(dy.f[off:off+n], x.f[off:off+n], mu)
	}
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
