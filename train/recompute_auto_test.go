package train

import (
	"strings"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// TestChooseRecompute: model.checkpoint: auto picks, among every set of
// levels, one whose planned reserved peak fits memory.capacity with the
// least recompute (checked against planning all of them); without a
// capacity it recomputes nothing, and when nothing fits, everything.
func TestChooseRecompute(t *testing.T) {
	base := planGridConfig(32, 8, "bilinear", "batch")
	base.Model.Depth = 3
	none, err := PlanConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	all := base
	all.Model.Checkpoint = config.Checkpoint{All: true}
	allRow, err := PlanConfig(all)
	if err != nil {
		t.Fatal(err)
	}
	recompute := func(levels []int) float64 {
		mc := base.ModelConfig()
		mc.Recompute = levels
		net, err := model.New(model.NewDevice(noop.New(cpu.New()), memory.Options{}), mc, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer net.Free()
		_, rec := net.FLOPs(32, 32)
		return rec
	}
	for _, frac := range []float64{0.25, 0.5, 0.75} {
		capacity := allRow.PeakReservedBytes + int64(frac*float64(none.PeakReservedBytes-allRow.PeakReservedBytes))
		c := base
		c.Model.Checkpoint, c.Memory.Capacity = config.Checkpoint{Auto: true}, config.ByteSize(capacity)
		chosen, note, err := ChooseRecompute(c, cpu.New())
		if err != nil {
			t.Fatal(err)
		}
		levels := chosen.Model.Checkpoint.Levels
		row, err := PlanConfig(chosen)
		if err != nil {
			t.Fatal(err)
		}
		if row.PeakReservedBytes > capacity || !strings.Contains(note, "fits memory.capacity") {
			t.Errorf("capacity %d: chose %v, planned %d: %s", capacity, levels, row.PeakReservedBytes, note)
		}
		// Nothing that fits recomputes less.
		best := recompute(levels)
		for mask := range 1 << (base.Model.Depth + 1) {
			var ls []int
			for l := range base.Model.Depth + 1 {
				if mask&(1<<l) != 0 {
					ls = append(ls, l)
				}
			}
			vc := base
			vc.Model.Checkpoint = config.Checkpoint{Levels: ls}
			r, err := PlanConfig(vc)
			if err != nil {
				t.Fatal(err)
			}
			if r.PeakReservedBytes <= capacity && recompute(ls) < best {
				t.Errorf("capacity %d: chose %v (recompute %.0f) but %v fits with %.0f", capacity, levels, best, ls, recompute(ls))
			}
		}
		t.Logf("capacity %d (%.0f%% of the way from all to none): %s", capacity, 100*frac, note)
		// Plan shows the choice in the config row.
		rows, _, err := Plan(c, []string{"config"}, capacity)
		if err != nil || rows[0].Checkpoint.String() != chosen.Model.Checkpoint.String() || rows[0].Fits == nil || !*rows[0].Fits {
			t.Errorf("plan's config row: %+v (%v), want checkpoint %s fitting", rows, err, chosen.Model.Checkpoint)
		}
	}
	c := base
	c.Model.Checkpoint = config.Checkpoint{Auto: true}
	if got, _, _ := ChooseRecompute(c, cpu.New()); got.Model.Checkpoint.String() != "none" {
		t.Errorf("no capacity: %s, want none", got.Model.Checkpoint)
	}
	c.Memory.Capacity = config.ByteSize(allRow.PeakReservedBytes - 1)
	if got, note, _ := ChooseRecompute(c, cpu.New()); !got.Model.Checkpoint.All || !strings.Contains(note, "no set of levels fits") {
		t.Errorf("nothing fits: %s, %q", got.Model.Checkpoint, note)
	}
}

// TestRecomputeAutoTrains: a run with model.checkpoint: auto trains with
// the chosen levels under its capacity and says so in its fit log.
func TestRecomputeAutoTrains(t *testing.T) {
	c := planGridConfig(32, 8, "bilinear", "batch")
	none, err := PlanConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Model.Checkpoint, c.Memory.Capacity = config.Checkpoint{Auto: true}, config.ByteSize(none.PeakReservedBytes*9/10)
	tr := testTrainer(t, c)
	if tr.Config.Model.Checkpoint.Auto || len(tr.Config.Model.Checkpoint.Levels) == 0 || len(tr.FitLog) == 0 || !strings.HasPrefix(tr.FitLog[0], "model.checkpoint: auto: ") {
		t.Fatalf("trainer's model.checkpoint %s, fit log %q", tr.Config.Model.Checkpoint, tr.FitLog)
	}
	for range 2 {
		if _, err := tr.Step(); err != nil {
			t.Fatal(err)
		}
	}
}
