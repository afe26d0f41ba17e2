package cpu

import (
	"math"

	"github.com/memunet/memunet/backend"
)

// lossChunk is how many pixels of one sample a task of the loss sums
// takes. Samples are cut at the same places whatever the batch and the
// cores, a sample's chunks add in order, then the samples in order: a
// micro-batch of one keeps every core busy, and the result does not depend
// on how a batch is split into micro-batches or on the cores.
const lossChunk = 4096

// lossChunks is how many chunks a sample of hw pixels has.
func lossChunks(hw int) int { return (hw + lossChunk - 1) / lossChunk }

// pixelChunks runs chunk on every chunk of lossChunk pixels of each of
// samples samples of hw pixels, in parallel, each worker with scratch of
// the given sizes (nil where half is false): ch numbers the chunk (per
// sample, in order), n is its sample, p0 its first pixel and m its length.
func (c CPU) pixelChunks(samples, hw int, half bool, sizes []int, chunk func(ch, n, p0, m int, buf [5][]float32)) {
	per := lossChunks(hw)
	c.team.For(samples*per, 1, func(lo, hi int) {
		buf, whole := c.scratch(half, sizes...)
		defer c.release(whole)
		for ch := lo; ch < hi; ch++ {
			n, p0 := ch/per, ch%per*lossChunk
			chunk(ch, n, p0, min(lossChunk, hw-p0), buf)
		}
	})
}

// logGroup is how many pixels' sums of exps CrossEntropy multiplies
// before it takes their log: one log where it took 64 (a quarter of the
// loss's time); the sum differs from the pixels' logs summed by float64
// rounding, and the gradients not at all.
const logGroup = 64

// CrossEntropy sums -log softmax in float64 per chunk of a sample (in
// parallel), then per sample and over samples in order.
func (c CPU) CrossEntropy(s backend.Shape4, logits, target backend.View) (float64, int, error) {
	z, tg := valuesOf(logits), u8(target)
	K, HW := s.C, s.H*s.W
	per := lossChunks(HW)
	sums := make([]float64, s.N*per)
	counts := make([]int, s.N*per)
	bad := make([]int, s.N*per)
	c.pixelChunks(s.N, HW, z.h != nil, []int{K * lossChunk}, func(ch, n, p0, m int, buf [5][]float32) {
		zc, base, stride := logitChunk(z, K, HW, n, p0, m, buf[0])
		// Local sums, stored once: the chunks' slots share a cache
		// line, which the cores would otherwise pass back and forth.
		// The log-sum-exps are one log per logGroup pixels: their sums
		// of exps multiplied (each in [1, K], K <= 256, so the product
		// stays below 2^512).
		var sum float64
		count := 0
		for g0 := 0; g0 < m; g0 += logGroup {
			prod := 1.0
			for i := g0; i < min(g0+logGroup, m); i++ {
				t, ok := classOf(tg[n*HW+p0+i], K, &bad[ch])
				if !ok {
					continue
				}
				mx, se := softmaxTerms(zc[base+i:], K, stride)
				prod *= se
				sum -= float64(zc[base+i+t*stride] - mx)
				count++
			}
			sum += math.Log(prod)
		}
		sums[ch], counts[ch] = sum, count
	})
	if err := targetError(perSample(bad, per), K); err != nil {
		return 0, 0, err
	}
	var sum float64
	count := 0
	for n := range s.N {
		var sn float64
		for ch := n * per; ch < (n+1)*per; ch++ {
			sn += sums[ch]
			count += counts[ch]
		}
		sum += sn
	}
	return sum, count, nil
}

// logitChunk is the K logits of pixels [p0, p0+m) of sample n as the loss
// reads them, class k of pixel p0+i at zc[base + k*stride + i]: fp32
// logits in place, 16-bit ones widened into buf (K*m values or more).
func logitChunk(z values, K, HW, n, p0, m int, buf []float32) (zc []float32, base, stride int) {
	if z.h == nil {
		return z.f, n*K*HW + p0, HW
	}
	for k := range K {
		off := (n*K+k)*HW + p0
		z.widen(buf[k*m:(k+1)*m], z.h[off:off+m])
	}
	return buf, 0, m
}

// gradChunk is where the gradients of that chunk go, as logitChunk: g's
// own values, or buf, which storeGradChunk narrows into g.
func gradChunk(g values, K, HW, n, p0, m int, buf []float32) (gc []float32, base, stride int) {
	if g.h == nil {
		return g.f, n*K*HW + p0, HW
	}
	return buf, 0, m
}

// storeGradChunk narrows a 16-bit chunk's gradients from buf into g.
func storeGradChunk(g values, K, HW, n, p0, m int, buf []float32) {
	if g.h == nil {
		return
	}
	for k := range K {
		off := (n*K+k)*HW + p0
		g.narrow(g.h[off:off+m], buf[k*m:(k+1)*m])
	}
}

// perSample is each sample's first nonzero value among its per chunks.
func perSample(bad []int, per int) []int {
	out := make([]int, len(bad)/per)
	for ch, v := range bad {
		if n := ch / per; out[n] == 0 {
			out[n] = v
		}
	}
	return out
}

// classOf is target value v as one of K classes: ok is false for an
// ignored pixel and for a value that is neither, which *bad keeps (+1) for
// targetError.
func classOf(v uint8, K int, bad *int) (t int, ok bool) {
	t = int(v)
	switch {
	case t == backend.IgnoreIndex:
		return t, false
	case t >= K:
		*bad = t + 1
		return t, false
	}
	return t, true
}

// targetError is the *backend.TargetError of the first sample with a bad
// target value (bad[n] is that value + 1, 0 for none), nil if none has.
func targetError(bad []int, classes int) error {
	for n, v := range bad {
		if v != 0 {
			return &backend.TargetError{Value: v - 1, Sample: n, Classes: classes}
		}
	}
	return nil
}

// CrossEntropyBack writes the softmax gradient pixel by pixel, in parallel
// over chunks of a sample; each pixel's K logits are read before any
// gradient is written, so dlogits may be logits.
func (c CPU) CrossEntropyBack(s backend.Shape4, dlogits, logits, target backend.View, k float32) {
	z, g, tg := valuesOf(logits), valuesOf(dlogits), u8(target)
	K, HW := s.C, s.H*s.W
	c.pixelChunks(s.N, HW, anyHalf(z, g), []int{K * lossChunk, K * lossChunk}, func(ch, n, p0, m int, buf [5][]float32) {
		e := make([]float64, K)
		zc, zb, zs := logitChunk(z, K, HW, n, p0, m, buf[0])
		gc, gb, gs := gradChunk(g, K, HW, n, p0, m, buf[1])
		for i := range m {
			t := int(tg[n*HW+p0+i])
			if t == backend.IgnoreIndex || k == 0 {
				for c := range K {
					gc[gb+c*gs+i] = 0
				}
				continue
			}
			_, se := softmaxExps(zc[zb+i:], K, zs, e)
			for c := range K {
				prob := float32(e[c] / se)
				if c == t {
					prob--
				}
				gc[gb+c*gs+i] = k * prob
			}
		}
		storeGradChunk(g, K, HW, n, p0, m, buf[1])
	})
}

// softmaxTerms returns, for the K logits z[0], z[stride], ..., their maximum
// and the sum of exp(z - max), from which softmax and log-sum-exp follow
// without overflow.
func softmaxTerms(z []float32, K, stride int) (mx float32, se float64) {
	mx = float32(math.Inf(-1))
	for k := 0; k < K; k++ {
		mx = max(mx, z[k*stride])
	}
	for k := 0; k < K; k++ {
		se += expShifted(float64(z[k*stride] - mx))
	}
	return mx, se
}

// expShifted is math.Exp(d) for a logit minus the maximum: the maximum's
// own term, d = 0, is 1 exactly without the call (half the calls for two
// classes).
func expShifted(d float64) float64 {
	if d == 0 {
		return 1
	}
	return math.Exp(d)
}

// LossSums sums in float64 per chunk of a sample (in parallel), then per
// sample and over samples in order, as CrossEntropy.
func (c CPU) LossSums(s backend.Shape4, logits, target backend.View, gamma float32, sums []float64) error {
	z, tg := valuesOf(logits), u8(target)
	K, HW := s.C, s.H*s.W
	if len(sums) != 4*K {
		panic("backend/cpu: loss sums need 4 values per class")
	}
	per := lossChunks(HW)
	part := make([]float64, s.N*per*4*K)
	bad := make([]int, s.N*per)
	c.pixelChunks(s.N, HW, z.h != nil, []int{K * lossChunk}, func(ch, n, p0, m int, buf [5][]float32) {
		e := make([]float64, K)
		zc, base, stride := logitChunk(z, K, HW, n, p0, m, buf[0])
		ps := part[ch*4*K : (ch+1)*4*K]
		for i := range m {
			t, ok := classOf(tg[n*HW+p0+i], K, &bad[ch])
			if !ok {
				continue
			}
			zp := zc[base+i:]
			mx, se := softmaxExps(zp, K, stride, e)
			ps[t] += focalTerm(e, t, se, float64(zp[t*stride]-mx), float64(gamma))
			ps[K+t]++
			ps[2*K+t] += e[t] / se
			for c := range K {
				ps[3*K+c] += e[c] / se
			}
		}
	})
	if err := targetError(perSample(bad, per), K); err != nil {
		return err
	}
	sample := make([]float64, 4*K)
	for n := range s.N {
		clear(sample)
		for ch := n * per; ch < (n+1)*per; ch++ {
			for i, v := range part[ch*4*K : (ch+1)*4*K] {
				sample[i] += v
			}
		}
		for i, v := range sample {
			sums[i] += v
		}
	}
	return nil
}

// LossBack computes each pixel's gradient from its K logits, read before
// any is written, so dlogits may be logits; in parallel over chunks of a
// sample, as CrossEntropyBack.
func (c CPU) LossBack(s backend.Shape4, dlogits, logits, target backend.View, gamma float32, coef []float32) {
	z, g, tg := valuesOf(logits), valuesOf(dlogits), u8(target)
	K, HW := s.C, s.H*s.W
	if len(coef) != 3*K {
		panic("backend/cpu: loss gradient needs 3 coefficients per class")
	}
	c.pixelChunks(s.N, HW, anyHalf(z, g), []int{K * lossChunk, K * lossChunk}, func(ch, n, p0, m int, buf [5][]float32) {
		e := make([]float64, K)
		zc, zb, zs := logitChunk(z, K, HW, n, p0, m, buf[0])
		gc, gb, gs := gradChunk(g, K, HW, n, p0, m, buf[1])
		for i := range m {
			t := int(tg[n*HW+p0+i])
			if t == backend.IgnoreIndex {
				for c := range K {
					gc[gb+c*gs+i] = 0
				}
				continue
			}
			zp := zc[zb+i:]
			mx, se := softmaxExps(zp, K, zs, e)
			f := focalFactor(e, t, se, float64(zp[t*zs]-mx), float64(gamma))
			a := float64(coef[t]) * f
			dot := 0.0
			for c := range K {
				dot += e[c] / se * lossD(coef, K, c, t)
			}
			for c := range K {
				prob := e[c] / se
				v := a*prob + prob*(lossD(coef, K, c, t)-dot)
				if c == t {
					v -= a
				}
				gc[gb+c*gs+i] = float32(v)
			}
		}
		storeGradChunk(g, K, HW, n, p0, m, buf[1])
	})
}

// lossD is LossBack's d_c at a pixel with target t.
func lossD(coef []float32, K, c, t int) float64 {
	d := float64(coef[2*K+c])
	if c == t {
		d += float64(coef[K+c])
	}
	return d
}

// softmaxExps fills e with exp(z - max) of the K logits z[0], z[stride],
// ... and returns the max and the sum of e.
func softmaxExps(z []float32, K, stride int, e []float64) (mx float32, se float64) {
	mx = float32(math.Inf(-1))
	for k := range K {
		mx = max(mx, z[k*stride])
	}
	for k := range K {
		e[k] = expShifted(float64(z[k*stride] - mx))
		se += e[k]
	}
	return mx, se
}

// oneMinusP is 1 - p_t summed from the other classes' terms, exact where
// p_t is near 1.
func oneMinusP(e []float64, t int, se float64) float64 {
	q := 0.0
	for c, v := range e {
		if c != t {
			q += v
		}
	}
	return q / se
}

// focalTerm is (1-p_t)^gamma·(-log p_t), with log p_t = zt - log se
// (zt = z_t - max).
func focalTerm(e []float64, t int, se, zt, gamma float64) float64 {
	nll := math.Log(se) - zt
	if gamma == 0 {
		return nll
	}
	return math.Pow(oneMinusP(e, t, se), gamma) * nll
}

// focalFactor is F = (1-p)^γ - γ·p·(1-p)^(γ-1)·log p, the focal term's
// derivative by z_t over cross-entropy's; its limit 0 where 1-p is 0.
func focalFactor(e []float64, t int, se, zt, gamma float64) float64 {
	if gamma == 0 {
		return 1
	}
	q := oneMinusP(e, t, se)
	if q <= 0 {
		return 0
	}
	logp := zt - math.Log(se)
	return math.Pow(q, gamma) - gamma*(e[t]/se)*math.Pow(q, gamma-1)*logp
}
