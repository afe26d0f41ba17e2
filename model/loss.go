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
	// recorder and slot, where ForwardRecorded left the sums on the device;
	// at, where the step is queued there.
	recorder backend.StepRecorder
	slot     int
	at       backend.StepEntry
}

// Forward returns the mean loss. In training it keeps logits and target.
// A target value outside [0,K) other than IgnoreIndex is an error.
func (l *CrossEntropy) Forward(env *Env, logits *Tensor, target backend.View) (float64, error) {
	defer env.Profile.begin(KindLoss)()
	checkTarget("cross entropy", logits, target)
	f := env.frame(backend.OpLoss)
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

// ForwardRecorded is a training Forward that leaves the loss's sums in
// slot of r, the backend's step record, unread (the trainer reads the
// step's slots in one copy; a bad target is an error then). at, where
// set, is the step's entry in r's queue (r is a backend.StepQueue), whose
// loss scale Backward takes in place of its own.
func (l *CrossEntropy) ForwardRecorded(env *Env, logits *Tensor, target backend.View, r backend.StepRecorder, slot int,
	at backend.StepEntry) error {
	defer env.Profile.begin(KindLoss)()
	checkTarget("cross entropy", logits, target)
	f := env.frame(backend.OpLoss)
	z := f.view(logits)
	if f.err == nil {
		r.RecordCrossEntropy(logits.shape4(), z, target, slot)
	}
	if err := f.finish(); err != nil {
		return err
	}
	checkQueued("cross entropy", env, r, at)
	l.logits, l.target, l.recorder, l.slot, l.at = logits.Retain(), target, r, slot, at
	return nil
}

// Backward returns dlogits = scale * (softmax(logits) - onehot(target)) / count
// at non-ignored pixels and 0 at ignored ones. scale multiplies the loss's
// gradient (1 for plain training; the grad scaler's scale, or 1/accumulate).
// After ForwardRecorded the count stays on the device.
func (l *CrossEntropy) Backward(env *Env, scale float32) (*Tensor, error) {
	defer env.Profile.begin(KindLoss)()
	logits := l.logits
	if logits == nil {
		panic("model: cross entropy backward without a training forward")
	}
	var k float32
	if l.count > 0 {
		k = scale / float32(l.count)
	}
	dlogits, err := backwardInto(env, logits, func(g, z backend.View) {
		switch {
		case l.at != 0:
			l.recorder.(backend.StepQueue).QueuedCrossEntropyBack(logits.shape4(), g, z, l.target, l.slot, l.at.Index())
			return
		case l.recorder != nil:
			l.recorder.RecordedCrossEntropyBack(logits.shape4(), g, z, l.target, l.slot, scale)
			return
		}
		env.Backend.CrossEntropyBack(logits.shape4(), g, z, l.target, k)
	})
	if err == nil {
		l.Forget()
	}
	return dlogits, err
}

// checkTarget panics unless target is a Uint8 class index a pixel of
// logits: a caller's mistake, named after the loss (what).
func checkTarget(what string, logits *Tensor, target backend.View) {
	if target.DT != backend.Uint8 || target.Len != logits.Len()/logits.C {
		panic(fmt.Sprintf("model: %s: target %v for logits %v", what, target, logits.Shape()))
	}
}

// checkQueued panics where a loss (what) is queued as step at on a
// recorder that queues no steps: a caller's mistake.
func checkQueued(what string, env *Env, r backend.StepRecorder, at backend.StepEntry) {
	if _, queued := r.(backend.StepQueue); at != 0 && !queued {
		panic(fmt.Sprintf("model: %s queued as step %d on %s, which queues no steps", what, at.Index(), env.Backend.Name()))
	}
}

// backwardInto makes the gradient of logits (in their buffer when the
// caller released its reference to them), has write fill it from the
// logits' values (g, z: as the backend computes on them), and drops the
// saved logits.
func backwardInto(env *Env, logits *Tensor, write func(g, z backend.View)) (*Tensor, error) {
	dlogits, err := gradTensorLike(env, logits)
	if err != nil {
		return nil, err
	}
	f := env.frame(backend.OpLoss)
	z, g := f.view(logits), f.writer(dlogits)
	if f.err != nil {
		f.finish()
		if dlogits != logits {
			dlogits.Release()
		}
		return nil, f.err
	}
	if dlogits == logits {
		dlogits.Retain() // reused in place; the saved reference is released below
	}
	write(g, z)
	f.finish()
	logits.Release()
	return dlogits, nil
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *CrossEntropy) Forget() { l.logits, l.target, l.recorder, l.at = nil, backend.View{}, nil, 0 }

// LossKind is a training loss (config key train.loss.kind).
type LossKind string

const (
	LossCE     LossKind = "ce"      // cross-entropy, optionally class-weighted
	LossDice   LossKind = "dice"    // soft Dice
	LossCEDice LossKind = "ce+dice" // their sum (milesial's Pytorch-UNet)
	LossFocal  LossKind = "focal"   // focal loss, softmax form
)

// LossKinds lists the losses.
func LossKinds() []LossKind { return []LossKind{LossCE, LossDice, LossCEDice, LossFocal} }

// LossConfig is a loss and its settings.
type LossConfig struct {
	Kind LossKind
	// Weights are per-class weights of the cross-entropy or focal terms
	// (nil: all 1), as PyTorch's CrossEntropyLoss(weight=...): the weighted
	// cross-entropy is Σ w[t]·(-log p_t) / Σ w[t] over counted pixels.
	Weights []float64
	// Gamma is focal's exponent: Σ w[t]·(1-p_t)^Gamma·(-log p_t) / #pixels.
	Gamma float64
	// DiceSmooth is s in Dice's (2·I_c + s) / (P_c + T_c + s).
	DiceSmooth float64
}

// Plain reports the unweighted cross-entropy, which CrossEntropy computes.
func (c LossConfig) Plain() bool { return (c.Kind == LossCE || c.Kind == "") && c.Weights == nil }

// Loss is the configured loss over pixels, as CrossEntropy's contract has
// it (logits (N,K,H,W), target (N,H,W) classes or IgnoreIndex; ignored
// pixels count nowhere). Over the batch's counted pixels, with p the
// softmax, T_c the pixels of class c, I_c = Σ_{t=c} p_c, P_c = Σ p_c:
//
//	ce:      Σ w[t]·(-log p_t) / Σ w[t]  (PyTorch's weighted mean)
//	focal:   Σ w[t]·(1-p_t)^γ·(-log p_t) / #pixels
//	dice:    1 - mean over classes with T_c > 0 of (2·I_c + s) / (P_c + T_c + s)
//	ce+dice: ce + dice
//
// Dice is over the whole batch per class (segmentation_models_pytorch's
// DiceLoss, absent classes left out of the mean); with no counted pixel
// every term is 0. The plain cross-entropy is CrossEntropy's exact path.
type Loss struct {
	Config LossConfig
	ce     CrossEntropy
	logits *Tensor
	target backend.View
	sums   []float64 // LossSums of the saved forward
	// recorder and at, where ForwardRecorded left the sums on the device
	// (at: the step's entry in its queue).
	recorder backend.StepRecorder
	at       backend.StepEntry
}

// gamma is the exponent of the focal term LossSums and LossBack use.
func (l *Loss) gamma() float64 {
	if l.Config.Kind == LossFocal {
		return l.Config.Gamma
	}
	return 0
}

// Recordable reports whether ForwardRecorded can take the loss c: in
// training, on a backend that records a step.
func (c LossConfig) Recordable(env *Env) (backend.StepRecorder, bool) {
	r, ok := env.Backend.(backend.StepRecorder)
	return r, ok && env.saves()
}

// terms is c as the device forms it (backend.LossTerms).
func (c LossConfig) terms() backend.LossTerms {
	t := backend.LossTerms{CE: c.hasCE(), Focal: c.Kind == LossFocal, Dice: c.hasDice(), Smooth: c.DiceSmooth, Weights: c.Weights}
	if t.Focal {
		t.Gamma = float32(c.Gamma)
	}
	return t
}

// ForwardRecorded is CrossEntropy.ForwardRecorded for any loss Recordable
// says it takes: the plain cross-entropy's, or the others' value and sums
// on the device (StepRecorder.RecordLoss), whose gradient's coefficients
// Backward forms there too.
func (l *Loss) ForwardRecorded(env *Env, logits *Tensor, target backend.View, r backend.StepRecorder, slot int,
	at backend.StepEntry) error {
	if l.Config.Plain() {
		return l.ce.ForwardRecorded(env, logits, target, r, slot, at)
	}
	defer env.Profile.begin(KindLoss)()
	checkTarget("loss", logits, target)
	checkQueued("loss", env, r, at)
	f := env.frame(backend.OpLoss)
	z := f.view(logits)
	if f.err == nil {
		r.RecordLoss(logits.shape4(), z, target, l.Config.terms(), slot)
	}
	if err := f.finish(); err != nil {
		return err
	}
	l.logits, l.target, l.recorder, l.at = logits.Retain(), target, r, at
	return nil
}

// Forward returns the loss; in training it keeps logits and target.
func (l *Loss) Forward(env *Env, logits *Tensor, target backend.View) (float64, error) {
	if l.Config.Plain() {
		return l.ce.Forward(env, logits, target)
	}
	defer env.Profile.begin(KindLoss)()
	checkTarget("loss", logits, target)
	sums := make([]float64, 4*logits.C)
	f := env.frame(backend.OpLoss)
	z := f.view(logits)
	var lossErr error
	if f.err == nil {
		lossErr = env.Backend.LossSums(logits.shape4(), z, target, float32(l.gamma()), sums)
	}
	if err := f.finish(); err != nil {
		return 0, err
	}
	if lossErr != nil {
		return 0, lossErr
	}
	if env.saves() {
		l.logits, l.target, l.sums = logits.Retain(), target, sums
	}
	return l.Config.value(sums), nil
}

// weight is class c's weight.
func (c LossConfig) weight(k int) float64 {
	if c.Weights == nil {
		return 1
	}
	return c.Weights[k]
}

// hasCE and hasDice say which terms the loss has: the (weighted or focal)
// cross-entropy term, the Dice term.
func (c LossConfig) hasCE() bool   { return c.Kind != LossDice }
func (c LossConfig) hasDice() bool { return c.Kind == LossDice || c.Kind == LossCEDice }

// ceDenominator is what the cross-entropy term's sum is divided by: the
// weighted pixel count (PyTorch's weighted mean), or for focal the count.
func (c LossConfig) ceDenominator(sums []float64) float64 {
	K := len(sums) / 4
	var den float64
	for k := range K {
		if c.Kind == LossFocal {
			den += sums[K+k]
		} else {
			den += c.weight(k) * sums[K+k]
		}
	}
	return den
}

// presentClasses is the classes with a pixel in the batch's targets, over
// which Dice is averaged.
func presentClasses(sums []float64) int {
	K, present := len(sums)/4, 0
	for k := range K {
		if sums[K+k] > 0 {
			present++
		}
	}
	return present
}

// value is the loss from LossSums' sums.
func (c LossConfig) value(sums []float64) float64 {
	K := len(sums) / 4
	var loss float64
	if c.hasCE() {
		var num float64
		for k := range K {
			num += c.weight(k) * sums[k]
		}
		if den := c.ceDenominator(sums); den > 0 {
			loss += num / den
		}
	}
	if present := presentClasses(sums); c.hasDice() && present > 0 {
		var sum float64
		for k := range K {
			if T := sums[K+k]; T > 0 {
				sum += (2*sums[2*K+k] + c.DiceSmooth) / (sums[3*K+k] + T + c.DiceSmooth)
			}
		}
		loss += 1 - sum/float64(present)
	}
	return loss
}

// coefficients are LossBack's 3K coefficients for the loss times scale.
func (c LossConfig) coefficients(sums []float64, scale float64) []float32 {
	K := len(sums) / 4
	coef := make([]float32, 3*K)
	if den := c.ceDenominator(sums); c.hasCE() && den > 0 {
		for k := range K {
			coef[k] = float32(scale * c.weight(k) / den)
		}
	}
	if present := presentClasses(sums); c.hasDice() && present > 0 {
		m := scale / float64(present)
		for k := range K {
			T := sums[K+k]
			if T == 0 {
				continue
			}
			// d/dp_ic of -d_c/|C| = -(2·[t=c]·D - (2·I_c + s)) / (D²·|C|)
			D := sums[3*K+k] + T + c.DiceSmooth
			coef[K+k] = float32(-2 * m / D)
			coef[2*K+k] = float32(m * (2*sums[2*K+k] + c.DiceSmooth) / (D * D))
		}
	}
	return coef
}

// Backward returns dlogits, the loss's gradient times scale (1 for plain
// training; the grad scaler's scale, or 1/accumulate).
func (l *Loss) Backward(env *Env, scale float32) (*Tensor, error) {
	if l.Config.Plain() {
		return l.ce.Backward(env, scale)
	}
	defer env.Profile.begin(KindLoss)()
	logits := l.logits
	if logits == nil {
		panic("model: loss backward without a training forward")
	}
	dlogits, err := backwardInto(env, logits, func(g, z backend.View) {
		switch {
		case l.at != 0:
			l.recorder.(backend.StepQueue).QueuedLossBack(logits.shape4(), g, z, l.target, l.Config.terms(), l.at.Index())
		case l.recorder != nil:
			l.recorder.RecordedLossBack(logits.shape4(), g, z, l.target, l.Config.terms(), scale)
		default:
			coef := l.Config.coefficients(l.sums, float64(scale))
			env.Backend.LossBack(logits.shape4(), g, z, l.target, float32(l.gamma()), coef)
		}
	})
	if err == nil {
		l.Forget()
	}
	return dlogits, err
}

// Forget drops what Forward kept, without releasing it (see Layer).
func (l *Loss) Forget() {
	l.ce.Forget()
	l.logits, l.target, l.sums, l.recorder, l.at = nil, backend.View{}, nil, nil, 0
}
