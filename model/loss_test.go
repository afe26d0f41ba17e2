package model

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// gcRefLoss is Loss's value from its definition, in float64, pixel by
// pixel: the reference the finite differences differentiate.
func gcRefLoss(z gcT, target []uint8, c LossConfig) float64 {
	K, HW := z.C, z.H*z.W
	w := func(k int) float64 {
		if c.Weights == nil {
			return 1
		}
		return c.Weights[k]
	}
	var ceNum, ceDen, focalNum, pixels float64
	inter, pred, truth := make([]float64, K), make([]float64, K), make([]float64, K)
	for n := 0; n < z.N; n++ {
		for p := 0; p < HW; p++ {
			t := int(target[n*HW+p])
			if t == IgnoreIndex {
				continue
			}
			prob := make([]float64, K)
			var sum float64
			for k := range K {
				prob[k] = math.Exp(z.D[z.i(n, k, 0, 0)+p])
				sum += prob[k]
			}
			for k := range K {
				prob[k] /= sum
				pred[k] += prob[k]
			}
			nll := -math.Log(prob[t])
			ceNum += w(t) * nll
			ceDen += w(t)
			focalNum += w(t) * math.Pow(1-prob[t], c.Gamma) * nll
			pixels++
			inter[t] += prob[t]
			truth[t]++
		}
	}
	var loss float64
	switch c.Kind {
	case LossCE, LossCEDice:
		if ceDen > 0 {
			loss = ceNum / ceDen
		}
	case LossFocal:
		if pixels > 0 {
			loss = focalNum / pixels
		}
	}
	if c.Kind == LossDice || c.Kind == LossCEDice {
		var dice float64
		present := 0
		for k := range K {
			if truth[k] > 0 {
				dice += (2*inter[k] + c.DiceSmooth) / (pred[k] + truth[k] + c.DiceSmooth)
				present++
			}
		}
		if present > 0 {
			loss += 1 - dice/float64(present)
		}
	}
	return loss
}

// TestGradLosses holds every loss's value to its float64 definition and
// its gradient to central finite differences of that definition, at
// scale 1 and a grad-scaler-like scale, copied and in place. Class 3 of 4
// is absent from the targets (Dice leaves it out of its mean) and about
// one pixel in five is ignored.
func TestGradLosses(t *testing.T) {
	for _, c := range []LossConfig{
		{Kind: LossCE, Weights: []float64{0.5, 2, 1, 3}},
		{Kind: LossFocal, Gamma: 2},
		{Kind: LossFocal, Gamma: 0.5, Weights: []float64{1, 0.25, 4, 1}},
		{Kind: LossDice, DiceSmooth: 1},
		{Kind: LossDice},
		{Kind: LossCEDice, DiceSmooth: 1, Weights: []float64{1, 2, 1, 1}},
		{Kind: LossCEDice, DiceSmooth: 1e-6},
	} {
		t.Run(fmt.Sprintf("%s/w%v/gamma%g/s%g", c.Kind, c.Weights, c.Gamma, c.DiceSmooth), func(t *testing.T) {
			rng := gcRNG(t.Name())
			dev := testDevice()
			const n, k, h, w = 2, 4, 5, 7
			zv := gcUniform(rng, n*k*h*w, -3, 3)
			target := make([]uint8, n*h*w)
			for i := range target {
				target[i] = uint8(rng.IntN(k - 1))
				if rng.IntN(5) == 0 {
					target[i] = IgnoreIndex
				}
			}
			z64 := gcT{n, k, h, w, gc64(zv)}
			L := func() float64 { return gcRefLoss(z64, target, c) }
			fd := gcFD(L, z64.D)
			gcNontrivial(t, "dlogits", fd)
			env := &Env{Device: dev, Training: true}
			run := func(release bool, scale float32) []float32 {
				t.Helper()
				return gcLossRun(t, env, func() gcLossLayer { return &Loss{Config: c} }, [4]int{n, k, h, w}, zv, target, L, fd, release, scale)
			}
			g := run(false, 1)
			gcEqual(t, "dlogits, in place vs copy", run(true, 1), g)
			run(false, 1024)

			// No counted pixel: every loss is 0 and so is its gradient.
			ignored := make([]uint8, len(target))
			for i := range ignored {
				ignored[i] = IgnoreIndex
			}
			logits := gcTensor(t, dev, n, k, h, w, zv)
			l := Loss{Config: c}
			loss, err := l.Forward(env, logits, gcTarget(ignored))
			if err != nil || loss != 0 {
				t.Fatalf("all ignored: loss %v, %v; want 0", loss, err)
			}
			logits.Release()
			dz, err := l.Backward(env, 1)
			if err != nil {
				t.Fatal(err)
			}
			gcEqual(t, "dlogits, all ignored", dz.Read(), make([]float32, len(zv)))
			dz.Release()
		})
	}
}

// TestLossPlainIsCrossEntropy: the unweighted cross-entropy takes
// CrossEntropy's path, so default runs are unchanged to the bit.
func TestLossPlainIsCrossEntropy(t *testing.T) {
	for _, c := range []LossConfig{{Kind: LossCE}, {Kind: LossCE, Weights: []float64{1, 1, 1}}} {
		dev := testDevice()
		rng := gcRNG(t.Name())
		zv := gcUniform(rng, 2*3*4*5, -3, 3)
		target := make([]uint8, 2*4*5)
		for i := range target {
			target[i] = uint8(rng.IntN(3))
		}
		env := &Env{Device: dev}
		var ce CrossEntropy
		logits := gcTensor(t, dev, 2, 3, 4, 5, zv)
		want, err := ce.Forward(env, logits, gcTarget(target))
		if err != nil {
			t.Fatal(err)
		}
		l := Loss{Config: c}
		got, err := l.Forward(env, logits, gcTarget(target))
		if err != nil {
			t.Fatal(err)
		}
		// Weights of 1 go the general way and agree to rounding.
		if c.Plain() && got != want || math.Abs(got-want) > 1e-12*want {
			t.Errorf("%+v: loss %v, CrossEntropy %v", c, got, want)
		}
		logits.Release()
	}
}

// TestWeightedCrossEntropyMatchesPyTorch: class-weighted cross-entropy
// with ignored pixels is nn.CrossEntropyLoss(weight=w, ignore_index=255):
// value and gradient (testdata/losses, tools/goldens/make_loss_goldens.py). A
// zero weight and no weights are among the cases.
func TestWeightedCrossEntropyMatchesPyTorch(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "losses", "goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Shape   [4]int
			Logits  []float64
			Target  []uint8
			Weights []float64
			Loss    float64
			Grad    []float64
		}
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Cases) < 3 {
		t.Fatalf("%d cases", len(golden.Cases))
	}
	for i, c := range golden.Cases {
		dev := testDevice()
		n, k, h, w := c.Shape[0], c.Shape[1], c.Shape[2], c.Shape[3]
		z := make([]float32, len(c.Logits))
		for j, v := range c.Logits {
			z[j] = float32(v)
		}
		logits := gcTensor(t, dev, n, k, h, w, z)
		l := Loss{Config: LossConfig{Kind: LossCE, Weights: c.Weights}}
		env := &Env{Device: dev, Training: true}
		loss, err := l.Forward(env, logits, gcTarget(c.Target))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(loss-c.Loss) > 1e-6*(1+math.Abs(c.Loss)) {
			t.Errorf("case %d (weights %v): loss %.9g, PyTorch %.9g", i, c.Weights, loss, c.Loss)
		}
		dz, err := l.Backward(env, 1)
		if err != nil {
			t.Fatal(err)
		}
		gcClose(t, fmt.Sprintf("case %d dlogits", i), dz.Read(), c.Grad, 1e-6)
		dz.Release()
		logits.Release()
	}
}
