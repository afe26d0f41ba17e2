package predict

import (
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
)

// TestPlanBatchIsExact: the planned pool peaks of a batch are the peaks a
// fresh pool measures predicting it, byte for byte, for each precision and
// odd sizes; the host part grows with the source pixels, and does not
// shrink with overlays.
func TestPlanBatchIsExact(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes = 4, 2, 3
	for _, tc := range []struct {
		prec    backend.DType
		n, h, w int
	}{
		{backend.Float32, 1, 16, 16},
		{backend.Float32, 3, 20, 12},
		{backend.Float16, 2, 28, 36},
		{backend.BFloat16, 1, 12, 44},
	} {
		p, err := newPredictor(cfg, cpu.New(), tc.prec, 0, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		need, err := p.PlanBatch(tc.n, tc.h, tc.w, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		images := make([]float32, tc.n*cfg.Model.InChannels*tc.h*tc.w)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range images {
			images[i] = float32(rng.NormFloat64())
		}
		if _, err := p.Predict(images, tc.n, tc.h, tc.w); err != nil {
			t.Fatal(err)
		}
		st := p.Pool().Stats()
		if need.PeakAllocated != st.Allocated.Peak || need.PeakReserved != st.Reserved.Peak {
			t.Errorf("%v %dx%dx%d: planned allocated %d reserved %d, measured %d and %d",
				tc.prec, tc.n, tc.h, tc.w, need.PeakAllocated, need.PeakReserved, st.Allocated.Peak, st.Reserved.Peak)
		}
		withFiles, _ := p.PlanBatch(tc.n, tc.h, tc.w, 1000, false)
		withOverlay, _ := p.PlanBatch(tc.n, tc.h, tc.w, 1000, true)
		// The pictures are held through every phase; an overlay adds to
		// the writing phase only, which need not be the largest.
		if withFiles.Host-need.Host < 4000 || withOverlay.Host < withFiles.Host || withOverlay.Total() <= need.Total() {
			t.Errorf("host need: %d, with 1000 source pixels %d, with overlays %d", need.Host, withFiles.Host, withOverlay.Host)
		}
		p.Close()
	}
}

// TestPlanBatchRefusesBadSizes: a size the model cannot take is the
// model's error, not a plan.
func TestPlanBatchRefusesBadSizes(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes = 4, 2, 3
	p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.PlanBatch(1, 18, 16, 0, false); err == nil {
		t.Error("18x16 with depth 2 planned")
	}
}
