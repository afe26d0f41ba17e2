package optim

import (
	"math"
)

// ScheduleKind names a learning-rate schedule (config key
// train.schedule.kind).
type ScheduleKind string

const (
	Constant  ScheduleKind = "constant" // the base rate throughout
	StepDecay ScheduleKind = "step"     // torch.optim.lr_scheduler.StepLR, stepped per optimizer step
	Cosine    ScheduleKind = "cosine"   // linear warmup, then cosine decay to MinLR (get_cosine_schedule_with_warmup)
	Plateau   ScheduleKind = "plateau"  // ReduceLROnPlateau on val mIoU (mode max), checked at each validation
	Poly      ScheduleKind = "poly"     // PolynomialLR(total_iters=Total, power=Power): nnU-Net's
)

// Schedule is a learning-rate schedule over a run's optimizer steps. The
// rate of step t (0-based: the rate the (t+1)-th update uses) is, with base
// rate LR:
//
//	constant  LR
//	step      LR * Gamma^floor(t/StepSize)
//	cosine    LR * t/Warmup while t < Warmup, then
//	          MinLR + (LR-MinLR) * (1+cos(pi*p))/2, p = (t-Warmup)/(Total-Warmup)
//	plateau   LR until a validation's val mIoU has not improved on the best
//	          by more than Threshold (relative) for more than Patience
//	          validations; then the rate times Factor (not below MinLR)
//	poly      LR * (1 - min(t, Total)/Total)^Power
//
// as PyTorch's schedulers compute them (the closed forms; plateau is
// ReduceLROnPlateau(mode="max", threshold_mode="rel", cooldown=0), poly
// PolynomialLR(total_iters=Total, power=Power), stepped per optimizer step:
// nnU-Net's PolyLRScheduler, lr0*(1 - epoch/epochs)^0.9, per step).
type Schedule struct {
	Kind      ScheduleKind
	LR, MinLR float64
	Warmup    int // cosine: steps of linear warmup from 0
	Total     int // cosine, poly: the run's steps
	StepSize  int // step: steps between decays
	Gamma     float64
	Patience  int     // plateau: validations without improvement before a decay
	Factor    float64 // plateau: the decay
	Threshold float64 // plateau: relative improvement that counts
	Minimize  bool    // plateau: the score improves downwards (a loss: mode="min")
	Power     float64 // poly: the exponent
}

// ScheduleState is what a plateau schedule remembers between validations:
// saved in checkpoints, so a resumed run decays exactly when the
// uninterrupted one would.
type ScheduleState struct {
	LR             float64  `json:"lr"`
	Best           *float64 `json:"best"` // best val mIoU so far; null before the first validation
	BadValidations int      `json:"bad_validations"`
}

// Start is the state at step 0.
func (s Schedule) Start() ScheduleState { return ScheduleState{LR: s.LR} }

// At is the rate of step t (0-based); st is read by plateau only.
func (s Schedule) At(t int, st ScheduleState) float64 {
	switch s.Kind {
	case StepDecay:
		return s.LR * math.Pow(s.Gamma, float64(t/s.StepSize))
	case Cosine:
		if t < s.Warmup {
			return s.LR * float64(t) / float64(s.Warmup)
		}
		p := float64(t-s.Warmup) / float64(max(1, s.Total-s.Warmup))
		return s.MinLR + (s.LR-s.MinLR)*max(0, 0.5*(1+math.Cos(math.Pi*min(p, 1))))
	case Plateau:
		return st.LR
	case Poly:
		total := max(1, s.Total)
		return s.LR * math.Pow(1-float64(min(t, total))/float64(total), s.Power)
	}
	return s.LR
}

// Validated updates a plateau schedule's state with a validation's score
// (train.monitor; other kinds keep no state): torch's
// ReduceLROnPlateau.step(score), mode max, or min with Minimize.
func (s Schedule) Validated(miou float64, st *ScheduleState) {
	if s.Kind != Plateau {
		return
	}
	better := miou > *orZero(st.Best)*(1+s.Threshold)
	if s.Minimize {
		better = miou < *orZero(st.Best)*(1-s.Threshold)
	}
	finite := !math.IsNaN(miou) && !math.IsInf(miou, 0)
	if (st.Best == nil || better) && finite { // torch: a NaN is a bad epoch; an infinity is never kept either
		st.Best = &miou
		st.BadValidations = 0
	} else {
		st.BadValidations++
	}
	if st.BadValidations > s.Patience {
		if lr := max(st.LR*s.Factor, s.MinLR); st.LR-lr > 1e-8 {
			st.LR = lr
		}
		st.BadValidations = 0
	}
}

func orZero(p *float64) *float64 {
	if p == nil {
		return new(float64)
	}
	return p
}
