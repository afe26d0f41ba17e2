package train

import (
	"slices"
	"testing"

	"github.com/memunet/memunet/config"
)

// TestOffloadMatchesRecompute: memory.offload: checkpoints trains bit for
// bit as recompute alone (the inputs come back exactly), holds less on
// the device, keeps the inputs in its host pool only during the step, and
// plan predicts both pools exactly.
func TestOffloadMatchesRecompute(t *testing.T) {
	base := tinyConfig()
	for _, levels := range []config.Checkpoint{{All: true}, {Levels: []int{0, 2}}} {
		rec := base
		rec.Model.Checkpoint = levels
		off := rec
		off.Memory.Offload = config.OffloadCheckpoints
		a, b := testTrainer(t, rec), testTrainer(t, off)
		var peakA, peakB int64
		for step := 0; step < 3; step++ {
			ra, err := a.Step()
			if err != nil {
				t.Fatal(err)
			}
			rb, err := b.Step()
			if err != nil {
				t.Fatal(err)
			}
			if ra.Loss != rb.Loss {
				t.Errorf("%v, step %d: loss %v with offload, %v without", levels, step, rb.Loss, ra.Loss)
			}
			peakA, peakB = max(peakA, ra.Peak), max(peakB, rb.Peak)
			if n := b.Device.Host.Stats().Allocated.Current; n != 0 {
				t.Errorf("%v, step %d: %d bytes still offloaded after the step", levels, step, n)
			}
		}
		pa, pb := paramsCopy(a.Net), paramsCopy(b.Net)
		for name, w := range pa {
			if !slices.Equal(w, pb[name]) {
				t.Errorf("%v: %s differs after 3 steps with offload", levels, name)
			}
		}
		if peakB >= peakA || b.OffloadedPeak() == 0 {
			t.Errorf("%v: device peak %d with offload, %d without; %d bytes offloaded", levels, peakB, peakA, b.OffloadedPeak())
		}
		plan, err := PlanConfig(off)
		if err != nil {
			t.Fatal(err)
		}
		if plan.PeakByPhase[PhaseBackward] != peakB && plan.PeakByPhase[PhaseForward] != peakB {
			t.Errorf("%v: plan's step peaks %v, measured %d", levels, plan.PeakByPhase, peakB)
		}
		if plan.OffloadedPeakBytes != b.OffloadedPeak() {
			t.Errorf("%v: plan offloads %d bytes, the run %d", levels, plan.OffloadedPeakBytes, b.OffloadedPeak())
		}
	}
	// Offloading needs recompute to offload from.
	bad := base
	bad.Memory.Offload = config.OffloadCheckpoints
	if err := bad.Validate(); err == nil {
		t.Error("memory.offload: checkpoints without model.checkpoint accepted")
	}
}
