package optim

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/model"
)

// GradScaler is PyTorch's dynamic loss scaling (torch.cuda.amp.GradScaler)
// for fp16: the loss gradient is multiplied by Scale so that small
// activation gradients survive 16-bit storage; before the optimizer step the
// parameter gradients are divided by it again. A step whose gradients hold an
// inf or NaN is skipped and the scale multiplied by BackoffFactor; after
// GrowthInterval clean steps in a row it is multiplied by GrowthFactor. The
// scale is constant within an accumulation cycle: it changes only in Update,
// once per optimizer step.
type GradScaler struct {
	Enabled        bool
	Scale          float64 // PyTorch's init_scale: 65536
	GrowthFactor   float64 // 2
	BackoffFactor  float64 // 0.5
	GrowthInterval int     // 2000
	// GrowthTracker counts clean steps since the last change of scale.
	GrowthTracker int
	// Skipped counts optimizer steps skipped for inf/NaN gradients.
	Skipped int
}

// LossScale is the factor for the loss gradient: Scale, or 1 when disabled.
func (s *GradScaler) LossScale() float64 {
	if !s.Enabled {
		return 1
	}
	return s.Scale
}

// Unscale divides every trainable gradient by the scale (multiplying by its
// float32 reciprocal, as PyTorch does) on b and reports whether all of them
// are finite, in one check for them all (on a GPU: one copy a step, as
// PyTorch's found_inf). With the scaler disabled it only checks.
func (s *GradScaler) Unscale(b backend.Optimizer, params []*model.Param) (finite bool) {
	inv := float32(1)
	if s.Enabled {
		inv = float32(1 / s.Scale)
	}
	return b.UnscaleCheck(Grads(params), inv)
}

// UnscaleRecorded is Unscale with its answer left in r's step record,
// read with the step's losses (StepRecorder.ReadRecord).
func (s *GradScaler) UnscaleRecorded(r backend.StepRecorder, params []*model.Param) {
	inv := float32(1)
	if s.Enabled {
		inv = float32(1 / s.Scale)
	}
	r.RecordUnscaleCheck(Grads(params), inv)
}

// Rule is Update's rule for a device that keeps the scale
// (backend.StepQueue): none where the scaler is off.
func (s *GradScaler) Rule() backend.ScalerRule {
	if !s.Enabled {
		return backend.ScalerRule{}
	}
	return backend.ScalerRule{Growth: s.GrowthFactor, Backoff: s.BackoffFactor, Interval: s.GrowthInterval}
}

// Update adjusts the scale after an optimizer step whose gradients were
// finite or not (the step having been skipped if not).
func (s *GradScaler) Update(finite bool) {
	if !finite {
		s.Skipped++
	}
	if !s.Enabled {
		return
	}
	if !finite {
		s.Scale *= s.BackoffFactor
		s.GrowthTracker = 0
		return
	}
	s.GrowthTracker++
	if s.GrowthTracker == s.GrowthInterval {
		s.Scale *= s.GrowthFactor
		s.GrowthTracker = 0
	}
}
