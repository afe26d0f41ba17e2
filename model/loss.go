package model

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// IgnoreIndex is the target value whose pixels are left out of the loss.
const IgnoreIndex = backend.IgnoreIndex

// CrossEntropy is PyTorch's CrossEntropyLoss(ignore_index=255,
// reduction="mean") over pixels: logits (N,K,H,W), target (N,H,W) class
// indices in [0,K) or IgnoreIndex, a Uint8 view of a buffer on the same
// device. The loss is the mean over non-ignored pixels of
// -log softmax(logits)[target]; with no such pixel it is 0 (PyTorch gives
// NaN) and so is the gradient.
type CrossEntropy struct {
	logits *Tensor
	target backend.View
	count  int
}

// Forward returns the mean loss. In training it keeps logits and target.
// A target value outside [0,K) other than IgnoreIndex is an error.
func (l *CrossEntropy) Forward(env *Env, logits *Tensor, target backend.View) (float64, error) {
	defer env.Profile.begin(KindLoss)()
	if target.DT != backend.Uint8 || target.Len != logits.N*logits.H*logits.W {
		panic(fmt.Sprintf("model: cross entropy: target %v for logits %v", target, logits.Shape()))
	}
	f := env.frame()
	z := f.view(logits)
	var sum float64
	var count int
	var lossErr error
	if f.err == nil {
		sum, count, lossErr = env.Backend.CrossEntropy(logits.shape4(), z, target)
	}
	if err := f.finish(); err != nil {
		return 0, err
	}
	if lossErr != nil {
		return 0, lossErr
	}
	loss := sum
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
	var k float32
	if l.count > 0 {
		k = scale / float32(l.count)
	}
	env.Backend.CrossEntropyBack(logits.shape4(), g, z, l.target, k)
	f.finish()
	logits.Release()
	l.logits, l.target = nil, backend.View{}
	return dlogits, nil
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *CrossEntropy) Forget() { l.logits, l.target = nil, backend.View{} }
