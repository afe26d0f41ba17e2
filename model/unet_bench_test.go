package model

import (
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// BenchmarkUNetStep is one training step without optimizer (forward, loss,
// backward) of the UNet at base 16, depth 4, batch 4, 3x128x128, 2 classes.
// It reports GFLOP/s over the convolutions (2*C*OC*K*K*OH*OW per image
// forward, x3 for a training step) and the step's peak allocated bytes,
// total and split by category at the peak.
func BenchmarkUNetStep(b *testing.B) {
	for _, bc := range []struct {
		name      string
		batch, hw int
		base      int
	}{
		{"small/b2x64x64/base8", 2, 64, 8},
		{"large/b4x128x128/base16", 4, 128, 16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dev := testDevice()
			m, err := New(dev, Config{Arch: Arch{InChannels: 3, Classes: 2, Base: bc.base, Depth: 4}}, 1)
			if err != nil {
				b.Fatal(err)
			}
			env := &Env{Device: dev, Training: true}
			x, _ := NewTensor(dev, memory.Activations, backend.Float32, bc.batch, 3, bc.hw, bc.hw)
			rng := rand.New(rand.NewPCG(1, 2))
			vals := make([]float32, x.Len())
			for i := range vals {
				vals[i] = rng.Float32()
			}
			x.Write(vals)
			classes := make([]uint8, bc.batch*bc.hw*bc.hw)
			for i := range classes {
				classes[i] = uint8(rng.IntN(2))
			}
			target := testTarget(dev, classes)
			var stats memory.Stats
			b.ResetTimer()
			for range b.N {
				dev.Pool.ResetPeak()
				m.ZeroGrad()
				logits, err := m.Forward(env, x)
				if err != nil {
					b.Fatal(err)
				}
				var ce CrossEntropy
				if _, err := ce.Forward(env, logits, target); err != nil {
					b.Fatal(err)
				}
				logits.Release()
				dlogits, err := ce.Backward(env, 1)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Backward(env, dlogits); err != nil {
					b.Fatal(err)
				}
				stats = dev.Pool.Stats()
			}
			b.StopTimer()
			fwd, _ := m.FLOPs(bc.hw, bc.hw)
			flops := 3 * float64(bc.batch) * fwd
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(float64(stats.Allocated.Peak), "peak-B")
			for _, c := range memory.Categories() {
				b.ReportMetric(float64(stats.AtPeak[c]), c.String()+"-B")
			}
		})
	}
}
