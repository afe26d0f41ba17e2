package cpu

import (
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// CrossEntropy sums -log softmax per sample in float64, in parallel over
// samples, then over samples in order.
func (CPU) CrossEntropy(s backend.Shape4, logits, target backend.View) (float64, int, error) {
	z, tg := f32(logits), u8(target)
	K, HW := s.C, s.H*s.W
	sums := make([]float64, s.N)
	counts := make([]int, s.N)
	bad := make([]int, s.N)
	kernels.ParallelFor(s.N, 1, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for p := 0; p < HW; p++ {
				t := int(tg[n*HW+p])
				if t == backend.IgnoreIndex {
					continue
				}
				if t >= K {
					bad[n] = t + 1
					continue
				}
				mx, se := softmaxTerms(z[n*K*HW+p:], K, HW)
				sums[n] += math.Log(se) - float64(z[(n*K+t)*HW+p]-mx)
				counts[n]++
			}
		}
	})
	var sum float64
	count := 0
	for n := range sums {
		if bad[n] != 0 {
			return 0, 0, &backend.TargetError{Value: bad[n] - 1, Sample: n, Classes: K}
		}
		sum += sums[n]
		count += counts[n]
	}
	return sum, count, nil
}

// CrossEntropyBack writes the softmax gradient pixel by pixel; each pixel
// reads its K logits before writing, so dlogits may be logits.
func (CPU) CrossEntropyBack(s backend.Shape4, dlogits, logits, target backend.View, k float32) {
	z, g, tg := f32(logits), f32(dlogits), u8(target)
	K, HW := s.C, s.H*s.W
	kernels.ParallelFor(s.N*HW, 1<<10, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			n, p := i/HW, i%HW
			t := int(tg[i])
			if t == backend.IgnoreIndex || k == 0 {
				for c := 0; c < K; c++ {
					g[(n*K+c)*HW+p] = 0
				}
				continue
			}
			mx, se := softmaxTerms(z[n*K*HW+p:], K, HW)
			for c := 0; c < K; c++ {
				idx := (n*K+c)*HW + p
				prob := float32(math.Exp(float64(z[idx]-mx)) / se)
				if c == t {
					prob--
				}
				g[idx] = k * prob
			}
		}
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
		se += math.Exp(float64(z[k*stride] - mx))
	}
	return mx, se
}
