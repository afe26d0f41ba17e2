package config

import (
	"fmt"
	"math"

	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/optim"
)

// The train section's optimizer, schedule and loss keys are the config's
// own: checked here, once, and handed to optim and model as values their
// constructors trust (OptimizerConfig, LRSchedule, LossConfig).

// validateOptimizer checks train.optimizer and its settings.
func (t Train) validateOptimizer() error {
	switch optim.Kind(t.Optimizer) {
	case optim.KindAdam, optim.KindAdamW, optim.KindRMSprop:
	case optim.KindSGD:
		if t.Nesterov && (t.Momentum <= 0 || t.Dampening != 0) {
			return fmt.Errorf("train.nesterov needs train.momentum > 0 and train.dampening 0 (PyTorch's rule)")
		}
	default:
		return fmt.Errorf("train.optimizer: %q: must be adam, adamw, sgd or rmsprop", t.Optimizer)
	}
	if !(t.Momentum >= 0 && t.Momentum < 1) || !(t.Dampening >= 0 && t.Dampening <= 1) {
		return fmt.Errorf("train.momentum %g must be in [0, 1) and train.dampening %g in [0, 1]", t.Momentum, t.Dampening)
	}
	if optim.Kind(t.Optimizer) == optim.KindRMSprop && !(t.Alpha > 0 && t.Alpha < 1) {
		return fmt.Errorf("train.alpha: %g: RMSprop's smoothing must be in (0, 1), e.g. 0.99", t.Alpha)
	}
	return nil
}

// validateSchedule checks train.schedule against train.lr.
func (t Train) validateSchedule() error {
	s := t.Schedule
	switch optim.ScheduleKind(s.Kind) {
	case optim.Constant:
	case optim.StepDecay:
		if s.StepSize < 1 || !(s.Gamma > 0 && s.Gamma <= 1) {
			return fmt.Errorf("train.schedule: step needs step_size >= 1 (now %d) and 0 < gamma <= 1 (now %g)", s.StepSize, s.Gamma)
		}
	case optim.Cosine:
		if s.Warmup < 0 || !(s.MinLR >= 0 && s.MinLR <= t.LR) {
			return fmt.Errorf("train.schedule: cosine needs warmup >= 0 (now %d) and 0 <= min_lr <= train.lr (now %g)", s.Warmup, s.MinLR)
		}
	case optim.Plateau:
		if s.Patience < 0 || !(s.Factor > 0 && s.Factor < 1) || !(s.Threshold >= 0) || !(s.MinLR >= 0) {
			return fmt.Errorf("train.schedule: plateau needs patience >= 0 (now %d), 0 < factor < 1 (now %g), threshold >= 0 (now %g) and min_lr >= 0 (now %g)",
				s.Patience, s.Factor, s.Threshold, s.MinLR)
		}
	case optim.Poly:
		if !(s.Power > 0) || math.IsInf(s.Power, 0) {
			return fmt.Errorf("train.schedule: poly needs a finite power > 0 (now %g), e.g. 0.9 (nnU-Net's)", s.Power)
		}
	default:
		return fmt.Errorf("train.schedule.kind: %q: must be constant, step, cosine, plateau or poly", s.Kind)
	}
	return nil
}

// validateLoss checks train.loss for a model of classes classes.
func (t Train) validateLoss(classes int) error {
	l := t.Loss
	switch model.LossKind(l.Kind) {
	case model.LossCE, model.LossDice, model.LossCEDice, model.LossFocal:
	default:
		return fmt.Errorf("train.loss.kind: %q: must be ce, dice, ce+dice or focal", l.Kind)
	}
	if w := l.ClassWeights.Values; w != nil && len(w) != classes {
		return fmt.Errorf("train.loss.class_weights: %d weights for %d classes (model.classes): give one per class, or auto", len(w), classes)
	}
	for i, w := range l.ClassWeights.Values {
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("train.loss.class_weights[%d]: %g: weights must be finite and >= 0", i, w)
		}
	}
	if !(l.Gamma >= 0 && l.Gamma <= 10) {
		return fmt.Errorf("train.loss.gamma: %g: focal's exponent must be in [0, 10] (2 is usual)", l.Gamma)
	}
	if !(l.DiceSmooth >= 0) || math.IsInf(l.DiceSmooth, 0) {
		return fmt.Errorf("train.loss.dice_smooth: %g: must be a finite number >= 0", l.DiceSmooth)
	}
	return nil
}
