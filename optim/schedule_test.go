package optim

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// TestSchedulesMatchPyTorch: every rate of every case equals what
// PyTorch's schedulers gave (testdata/schedules/goldens.json, made by
// tools/goldens/make_schedule_goldens.py) within 1e-12 relative: StepLR, the
// cosine-with-warmup LambdaLR, ReduceLROnPlateau fed the same validation
// mIoUs, and PolynomialLR, whose chained per-step factors the closed form
// matches to a few ulps (0 after total_iters).
func TestSchedulesMatchPyTorch(t *testing.T) {
	raw, err := os.ReadFile("../testdata/schedules/goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Kind      ScheduleKind `json:"kind"`
			LR        float64      `json:"lr"`
			StepSize  int          `json:"step_size"`
			Gamma     float64      `json:"gamma"`
			Warmup    int          `json:"warmup"`
			Total     int          `json:"total"`
			MinLR     float64      `json:"min_lr"`
			Patience  int          `json:"patience"`
			Factor    float64      `json:"factor"`
			Threshold float64      `json:"threshold"`
			Power     float64      `json:"power"`
			ValEvery  int          `json:"val_every"`
			MIoUs     []float64    `json:"mious"`
			Steps     int          `json:"steps"`
			Rates     []float64    `json:"rates"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 11 {
		t.Fatalf("%d cases", len(g.Cases))
	}
	for i, c := range g.Cases {
		s := Schedule{Kind: c.Kind, LR: c.LR, MinLR: c.MinLR, Warmup: c.Warmup, Total: c.Total, StepSize: c.StepSize,
			Gamma: c.Gamma, Patience: c.Patience, Factor: c.Factor, Threshold: c.Threshold, Power: c.Power}
		st := s.Start()
		for step := 0; step < c.Steps; step++ {
			got := s.At(step, st)
			if want := c.Rates[step]; math.Abs(got-want) > 1e-12*math.Abs(want) {
				t.Errorf("case %d (%s), step %d: rate %v, PyTorch %v", i, c.Kind, step, got, want)
				break
			}
			if c.ValEvery > 0 && (step+1)%c.ValEvery == 0 {
				s.Validated(c.MIoUs[(step+1)/c.ValEvery-1], &st)
			}
		}
	}
}

// TestPlateauNaN: a score that is not finite (an overflowed val_loss) is
// a bad validation and never the best: torch's ReduceLROnPlateau's
// comparisons with NaN are false, and its infinite start is never kept.
func TestPlateauNaN(t *testing.T) {
	s := Schedule{Kind: Plateau, LR: 1, Factor: 0.5, Patience: 1, Minimize: true}
	st := ScheduleState{LR: 1}
	for i, score := range []float64{math.NaN(), math.Inf(1), 0.5, math.NaN(), math.NaN()} {
		s.Validated(score, &st)
		if st.Best != nil && (math.IsNaN(*st.Best) || math.IsInf(*st.Best, 0)) {
			t.Fatalf("validation %d: %v became the best", i, *st.Best)
		}
		if i == 1 && st.LR != 0.5 {
			t.Errorf("after a NaN and an infinity (patience 1) the LR is %g, want 0.5", st.LR)
		}
	}
	if st.Best == nil || *st.Best != 0.5 || st.LR != 0.25 {
		t.Errorf("best %v, LR %g: want 0.5 and 0.25", st.Best, st.LR)
	}
}
