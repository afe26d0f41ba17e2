package model

import (
	"fmt"
	"math"
)

// IgnoreIndex is the target value whose pixels are left out of the loss.
const IgnoreIndex = 255

// CrossEntropy is PyTorch's CrossEntropyLoss(ignore_index=255,
// reduction="mean") over pixels: logits (N,K,H,W), target (N,H,W) class
// indices in [0,K) or IgnoreIndex. The loss is the mean over non-ignored
// pixels of -log softmax(logits)[target]; with no such pixel it is 0 (PyTorch
// gives NaN) and so is the gradient.
type CrossEntropy struct {
	logits *Tensor
	target []uint8
	count  int
}

// Forward returns the mean loss. In training it keeps logits and target.
// A target value outside [0,K) other than IgnoreIndex is an error.
func (l *CrossEntropy) Forward(env *Env, logits *Tensor, target []uint8) (float64, error) {
	defer env.Profile.begin(KindLoss)()
	K, HW := logits.C, logits.H*logits.W
	if len(target) != logits.N*HW && !env.dry() { // a dry run has no targets
		panic(fmt.Sprintf("model: cross entropy: %d targets for logits %v", len(target), logits.Shape()))
	}
	f := env.frame()
	z := f.view(logits)
	if err := f.err; err != nil {
		f.finish()
		return 0, err
	}
	defer f.finish()
	sums := make([]float64, logits.N)
	counts := make([]int, logits.N)
	bad := make([]int, logits.N)
	env.forEach(logits.N, 1, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for p := 0; p < HW; p++ {
				t := int(target[n*HW+p])
				if t == IgnoreIndex {
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
	var loss float64
	count := 0
	for n := range sums {
		if bad[n] != 0 {
			return 0, fmt.Errorf("model: cross entropy: target value %d in sample %d is not a class of %d (nor the ignore index %d)", bad[n]-1, n, K, IgnoreIndex)
		}
		loss += sums[n]
		count += counts[n]
	}
	if count > 0 {
		loss /= float64(count)
	}
	if env.saves() {
		l.logits, l.target, l.count = logits.Retain(), target, count
	}
	return loss, nil
}

// Backward returns dlogits = scale * (softmax(logits) - onehot(target)) / count
// at non-ignored pixels and 0 at ignored ones. scale multiplies the loss's
// gradient (1 for plain training; the grad scaler's scale, or 1/accumulate).
func (l *CrossEntropy) Backward(env *Env, scale float32) (*Tensor, error) {
	defer env.Profile.begin(KindLoss)()
	logits := l.logits
	if logits == nil {
		panic("model: cross entropy backward without a training forward")
	}
	dlogits, err := gradTensorLike(env, logits)
	if err != nil {
		return nil, err
	}
	f := env.frame()
	z, g := f.view(logits), f.writer(dlogits)
	if f.err != nil {
		f.finish()
		if dlogits != logits {
			dlogits.Release()
		}
		return nil, f.err
	}
	if dlogits == logits {
		dlogits.Retain() // reused in place; our saved reference is released below
	}
	K, HW := logits.C, logits.H*logits.W
	var k0 float32
	if l.count > 0 {
		k0 = scale / float32(l.count)
	}
	env.forEach(logits.N*HW, 1<<10, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			n, p := i/HW, i%HW
			t := int(l.target[i])
			if t == IgnoreIndex || k0 == 0 {
				for k := 0; k < K; k++ {
					g[(n*K+k)*HW+p] = 0
				}
				continue
			}
			mx, se := softmaxTerms(z[n*K*HW+p:], K, HW)
			for k := 0; k < K; k++ {
				idx := (n*K+k)*HW + p
				prob := float32(math.Exp(float64(z[idx]-mx)) / se)
				if k == t {
					prob--
				}
				g[idx] = k0 * prob
			}
		}
	})
	f.finish()
	logits.Release()
	l.logits, l.target = nil, nil
	return dlogits, nil
}

func (l *CrossEntropy) forget() { l.logits, l.target = nil, nil }

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
