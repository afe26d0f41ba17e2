package predict

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
)

// TestProbabilities: probabilities sum to 1 per pixel and their argmax is
// the device's; flip averaging of a mirror-symmetric batch equals the plain
// probabilities, and for any batch equals the mean with the mirror's.
func TestProbabilities(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes = 4, 2, 3
	p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n, h, w, k = 2, 12, 16, 3
	images := make([]float32, n*3*h*w)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range images {
		images[i] = float32(rng.NormFloat64())
	}
	probs, err := p.Probabilities(images, n, h, w, false)
	if err != nil {
		t.Fatal(err)
	}
	for img := range n {
		for px := range h * w {
			var s float64
			for c := range k {
				s += float64(probs[img*k*h*w+c*h*w+px])
			}
			if math.Abs(s-1) > 1e-5 {
				t.Fatalf("image %d pixel %d: probabilities sum to %v", img, px, s)
			}
		}
	}
	dev, err := p.Predict(images, n, h, w)
	if err != nil {
		t.Fatal(err)
	}
	if got := Argmax(probs, n, k, h, w); !slices.Equal(got, dev) {
		t.Error("the probabilities' argmax differs from the device's")
	}
	flipped, err := p.Probabilities(images, n, h, w, true)
	if err != nil {
		t.Fatal(err)
	}
	mirrored, err := p.Probabilities(mirror(images, h, w), n, h, w, false)
	if err != nil {
		t.Fatal(err)
	}
	back := mirror(mirrored, h, w)
	for i := range probs {
		if want := (probs[i] + back[i]) / 2; math.Abs(float64(flipped[i]-want)) > 1e-7 {
			t.Fatalf("value %d: flip average %v, want %v", i, flipped[i], want)
		}
	}
	if slices.Equal(flipped, probs) {
		t.Error("flip averaging changed nothing on a random batch")
	}
}

// TestPredictSplitProbsMatchesDevice: without flip, the host path's loss
// and scores are the device path's.
func TestPredictSplitProbsMatchesDevice(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes = 4, 2, 4
	cfg.Data.Size, cfg.Data.Count = 16, 24
	p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ds, idx, err := p.Split("val")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := p.PredictSplit(ds, idx, func(int, []uint8, []uint8) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	host, err := p.PredictSplitProbs(ds, idx, false, func(int, []uint8, []uint8, []float32) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(dev.ValLoss-host.ValLoss)) > 1e-5*(1+float64(dev.ValLoss)) || dev.ValMIoU != host.ValMIoU || dev.ValPixelAcc != host.ValPixelAcc {
		t.Errorf("device %+v, host %+v", dev, host)
	}
}
