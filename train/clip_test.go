package train

import (
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/optim"
)

// gradNorm is the global L2 norm of tr's trainable gradients now, summed
// here in float64 in plain order, divided by scale.
func gradNorm(tr *Trainer, scale float64) float64 {
	sum := 0.0
	for _, p := range tr.Net.Params() {
		if p.Trainable {
			for _, g := range p.ReadGrad() {
				sum += sq(float64(g) / scale)
			}
		}
	}
	return math.Sqrt(sum)
}

// TestClipGradNormStep: a step with train.clip_grad_norm takes the same
// update, bit for bit, as the step without it on gradients scaled by hand
// by max/(norm+1e-6), the norm summed here from the downloaded gradients;
// with accumulation it is the accumulated gradient's, once a step. The
// step reports the norm before clipping. In fp16 the norm is the unscaled
// gradients'.
func TestClipGradNormStep(t *testing.T) {
	for _, accum := range []int{1, 2} {
		c := tinyConfig()
		c.Train.Optimizer, c.Train.Momentum, c.Train.Nesterov, c.Train.LR, c.Train.WeightDecay = "sgd", 0.99, true, 0.01, 3e-5
		c.Train.BatchSize, c.Train.Accumulate = 4/accum, accum
		ref := testTrainer(t, c)
		var norm, limit float64
		ref.AfterBackward = func() {
			norm = gradNorm(ref, 1)
			limit = norm / 3
			coef := optim.ClipCoef(norm, limit)
			for _, p := range ref.Net.Params() {
				if p.Trainable {
					g := p.ReadGrad()
					for i := range g {
						g[i] *= coef
					}
					backend.UploadFloat32(ref.Device.Backend, p.GradView(), g)
				}
			}
		}
		if res, err := ref.Step(); err != nil || res.Clipping {
			t.Fatalf("accumulate %d, no clipping: clipping %v, %v", accum, res.Clipping, err)
		}
		c.Train.ClipGradNorm = limit
		clip := testTrainer(t, c)
		res, err := clip.Step()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Clipping || math.Abs(res.GradNorm-norm) > 1e-12*norm {
			t.Errorf("accumulate %d: the step reports norm %v (clipping %v), want %v", accum, res.GradNorm, res.Clipping, norm)
		}
		want := paramsCopy(ref.Net)
		for _, p := range clip.Net.Params() {
			if !equalBits(p.Read(), want[p.Name]) {
				t.Errorf("accumulate %d: %s differs from the update on gradients scaled by hand", accum, p.Name)
			}
		}
	}

	c := tinyConfig()
	c.Train.Precision, c.Train.ClipGradNorm = backend.Float16, 1e-3
	tr := testTrainer(t, c)
	var norm float64
	tr.AfterBackward = func() { norm = gradNorm(tr, tr.Scaler.Scale) }
	res, err := tr.Step()
	if err != nil || res.Skipped {
		t.Fatalf("fp16 step: skipped %v, %v", res.Skipped, err)
	}
	if !res.Clipping || math.Abs(res.GradNorm-norm) > 1e-12*norm || !(norm > 1e-3) {
		t.Errorf("fp16: the step reports norm %v, want the unscaled gradients' %v (above the max 1e-3)", res.GradNorm, norm)
	}
}
