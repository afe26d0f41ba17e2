//go:build cudaemu

package emu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// TestRecordedLossMatchesHost: weighted cross-entropy, focal, Dice and
// their sums formed on the emulated GPU (StepRecorder.RecordLoss, its
// gradient's coefficients there too, read in a step's record or a queued
// step's) give the loss and the gradient of the host's way (LossSums read,
// the value and LossBack's coefficients on the host) bit for bit: fp32 and
// fp16 logits, odd sizes, ignored pixels and a class absent from the
// targets, a loss scale that is not a power of two.
func TestRecordedLossMatchesHost(t *testing.T) {
	cases := map[string]model.LossConfig{
		"weighted ce": {Kind: model.LossCE, Weights: []float64{0.5, 2, 1.25, 3}},
		"focal":       {Kind: model.LossFocal, Gamma: 2, Weights: []float64{1, 2, 3, 0.5}},
		"dice":        {Kind: model.LossDice, DiceSmooth: 1},
		"ce+dice":     {Kind: model.LossCEDice, Weights: []float64{0.7, 1.3, 1, 2}, DiceSmooth: 0.5},
	}
	const N, K, H, W, scale = 3, 4, 7, 9, float32(1000.0 / 3)
	rng := rand.New(rand.NewPCG(7, 9))
	vals := make([]float32, N*K*H*W)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64() * 2)
	}
	targets := make([]byte, N*H*W)
	for i := range targets {
		targets[i] = byte(rng.IntN(K - 1)) // class K-1 absent
		if i%11 == 0 {
			targets[i] = backend.IgnoreIndex
		}
	}
	for name, cfg := range cases {
		for _, dt := range []backend.DType{backend.Float32, backend.Float16} {
			t.Run(name+"/"+dt.String(), func(t *testing.T) {
				gpu, err := emu.Backend(1 << 30)
				if err != nil {
					t.Fatal(err)
				}
				dev := model.NewDevice(gpu, memory.Options{})
				wide, err := model.NewTensor(dev, memory.Activations, backend.Float32, N, K, H, W)
				if err != nil {
					t.Fatal(err)
				}
				wide.Write(vals)
				logits := wide
				if dt != backend.Float32 {
					if logits, err = model.NewTensor(dev, memory.Activations, dt, N, K, H, W); err != nil {
						t.Fatal(err)
					}
					gpu.Convert(logits.View(), wide.View())
				}
				buf, err := dev.Pool.Alloc(memory.Activations, int64(len(targets)))
				if err != nil {
					t.Fatal(err)
				}
				target := backend.Whole(buf, backend.Uint8)
				gpu.Upload(target, targets)
				env := &model.Env{Device: dev, Training: true, Precision: dt}
				grad := func(l *model.Loss) []float32 {
					d, err := l.Backward(env, scale)
					if err != nil {
						t.Fatal(err)
					}
					defer d.Release()
					return d.Read()
				}

				host := model.Loss{Config: cfg}
				want, err := host.Forward(env, logits, target)
				if err != nil {
					t.Fatal(err)
				}
				wantGrad := grad(&host)

				recorded := model.Loss{Config: cfg}
				if err := recorded.ForwardRecorded(env, logits, target, gpu, 0, 0); err != nil {
					t.Fatal(err)
				}
				sums, counts, _, err := gpu.ReadRecord(1, K)
				if err != nil {
					t.Fatal(err)
				}
				recordedGrad := grad(&recorded)

				gpu.StartQueue(backend.QueueStart{Scale: float64(scale) * 2})
				gpu.OpenStep(0, 2) // the loss scale: scale*2/2
				queued := model.Loss{Config: cfg}
				if err := queued.ForwardRecorded(env, logits, target, gpu, 0, backend.EntryOf(0)); err != nil {
					t.Fatal(err)
				}
				queuedGrad := grad(&queued)
				_, recs, err := gpu.ReadQueue(1, 1, K)
				if err != nil {
					t.Fatal(err)
				}
				if got := sums[0] / float64(counts[0]); math.Float64bits(got) != math.Float64bits(want) || recs[0].Sum != want || recs[0].Count != 1 {
					t.Errorf("loss %v recorded, %v queued (count %d), %v on the host", got, recs[0].Sum, recs[0].Count, want)
				}
				for i := range wantGrad {
					w := math.Float32bits(wantGrad[i])
					if math.Float32bits(recordedGrad[i]) != w || math.Float32bits(queuedGrad[i]) != w {
						t.Fatalf("dlogits[%d]: %v recorded, %v queued, %v on the host", i, recordedGrad[i], queuedGrad[i], wantGrad[i])
					}
				}
				if err := gpu.Sync(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
