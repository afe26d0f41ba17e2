package oracle

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"gorgonia.org/tensor"
)

// TestUNet runs one training step of a tiny UNet in memunet and in the
// oracle, on the same weights and batch, for every decoder upsampling and
// norm: the loss, the logits, the gradient of every trainable parameter and
// (with batch norm) the updated running statistics must match.
//
// The subtests do not run in parallel: gorgonia's graph building is not safe
// for concurrent use (package-level state, see the package doc).
func TestUNet(t *testing.T) {
	i := 0
	for _, up := range []model.UpMode{model.UpBilinear, model.UpTranspose} {
		for _, norm := range []model.NormKind{model.NormBatch, model.NormGroup, model.NormNone} {
			i++
			seed := uint64(700 + i)
			t.Run(fmt.Sprintf("%s_%s", up, norm), func(t *testing.T) {
				checkUNet(t, up, norm, seed, tensor.Float64, unetTol)
			})
		}
	}
}

// TestUNetFloat32 builds the oracle in float32 (the dtype a "plain gorgonia"
// training run would use) for two configurations; both sides then round to
// float32, in different orders, hence the looser float32Tol.
func TestUNetFloat32(t *testing.T) {
	for i, c := range []struct {
		up   model.UpMode
		norm model.NormKind
	}{{model.UpBilinear, model.NormBatch}, {model.UpTranspose, model.NormGroup}} {
		t.Run(fmt.Sprintf("%s_%s", c.up, c.norm), func(t *testing.T) {
			checkUNet(t, c.up, c.norm, uint64(750+i), tensor.Float32, float32Tol)
		})
	}
}

// checkUNet compares one training step of a tiny UNet (Base 4, Depth 2,
// batch 2 of 3x16x16, 3 classes, about 1/8 of the target pixels ignored).
func checkUNet(t *testing.T, up model.UpMode, norm model.NormKind, seed uint64, dt tensor.Dtype, tol float64) {
	const N, H, W = 2, 16, 16
	cfg := model.Config{Arch: model.Arch{InChannels: 3, Classes: 3, Base: 4, Depth: 2, Up: up, Norm: norm, Groups: 8}}
	dev := model.NewDevice(cpu.New(), memory.Options{})
	m, err := model.New(dev, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	rng := newRand(seed)
	// Move norm weights off 1 and biases off 0 so that their
	// gradients, and the paths through them, are exercised.
	for _, p := range m.Params() {
		if !p.Trainable || len(p.Shape) != 1 {
			continue
		}
		off := 0.0
		if p.Name[len(p.Name)-len("weight"):] == "weight" {
			off = 1
		}
		vals := randn(rng, p.Len())
		for j, v := range vals {
			vals[j] = float32(off + 0.2*float64(v))
		}
		p.Write(vals)
	}
	shape := [4]int{N, cfg.InChannels, H, W}
	image := randn(rng, size(shape))
	target := make([]uint8, N*H*W)
	ignored := 0
	for j := range target {
		if rng.IntN(8) == 0 {
			target[j] = model.IgnoreIndex
			ignored++
		} else {
			target[j] = uint8(rng.IntN(cfg.Classes))
		}
	}
	if ignored == 0 {
		t.Fatal("no ignored pixel in the targets")
	}

	// The oracle copies the weights and running statistics now,
	// before memunet's forward updates the running statistics.
	net, err := BuildUNet(m, shape, image, target, dt)
	if err != nil {
		t.Fatal(err)
	}
	want, err := net.Run()
	if err != nil {
		t.Fatal(err)
	}

	env := &model.Env{Device: dev, Training: true}
	x := tensorOf(t, dev, shape, image)
	logits, err := m.Forward(env, x)
	if err != nil {
		t.Fatal(err)
	}
	x.Release()
	worst := compare(t, "logits", logits.Read(), want.Logits, tol)
	var ce model.CrossEntropy
	loss, err := ce.Forward(env, logits, targetView(target))
	if err != nil {
		t.Fatal(err)
	}
	logits.Release()
	worst = max(worst, compare(t, "loss", []float32{float32(loss)}, []float64{want.Loss}, tol))
	dlogits, err := ce.Backward(env, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(env, dlogits); err != nil {
		t.Fatal(err)
	}
	if a := dev.Pool.Stats().ByCategory[memory.Activations].Current; a != 0 {
		t.Errorf("%d activation bytes still allocated after backward", a)
	}
	checked, running := 0, 0
	for _, p := range m.Params() {
		if p.Trainable {
			g, ok := want.Grads[p.Name]
			if !ok {
				t.Errorf("the oracle has no gradient for %s", p.Name)
				continue
			}
			if allZero(g) {
				t.Errorf("the oracle's gradient of %s is all zero", p.Name)
			}
			worst = max(worst, compare(t, "d"+p.Name, p.ReadGrad(), g, tol))
			checked++
			continue
		}
		r, ok := want.Running[p.Name]
		if !ok {
			t.Errorf("the oracle has no running statistic %s", p.Name)
			continue
		}
		worst = max(worst, compare(t, p.Name, p.Read(), r, tol))
		running++
	}
	if checked != len(want.Grads) || checked == 0 {
		t.Errorf("compared %d gradients, the oracle has %d", checked, len(want.Grads))
	}
	if norm == model.NormBatch && running == 0 {
		t.Error("no running statistic compared")
	}
	t.Logf("loss %.6g; %d gradients, %d running statistics; worst error %.3g", loss, checked, running, worst)
}

func allZero(xs []float64) bool {
	for _, x := range xs {
		if x != 0 {
			return false
		}
	}
	return true
}

// TestNetSetBatch reruns a built graph on a second batch (as a "plain
// gorgonia" training loop would) and checks that it gives what a graph built
// on that batch gives.
func TestNetSetBatch(t *testing.T) {
	dev := model.NewDevice(cpu.New(), memory.Options{})
	cfg := model.Config{Arch: model.Arch{InChannels: 3, Classes: 3, Base: 4, Depth: 2, Up: model.UpTranspose, Norm: model.NormBatch}}
	m, err := model.New(dev, cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	rng := newRand(9)
	shape := [4]int{2, 3, 8, 8}
	batch := func(ignoreEvery int) ([]float32, []uint8) {
		target := make([]uint8, 2*8*8)
		for j := range target {
			target[j] = uint8(rng.IntN(cfg.Classes))
			if j%ignoreEvery == 0 {
				target[j] = model.IgnoreIndex
			}
		}
		return randn(rng, size(shape)), target
	}
	imgA, tgA := batch(5)
	imgB, tgB := batch(3) // a different count of valid pixels
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			net, err := BuildUNet(m, shape, imgA, tgA, dt)
			if err != nil {
				t.Fatal(err)
			}
			a, err := net.Run()
			if err != nil {
				t.Fatal(err)
			}
			if err := net.SetBatch(imgB, tgB); err != nil {
				t.Fatal(err)
			}
			got, err := net.Run()
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := BuildUNet(m, shape, imgB, tgB, dt)
			if err != nil {
				t.Fatal(err)
			}
			want, err := fresh.Run()
			if err != nil {
				t.Fatal(err)
			}
			if a.Loss == got.Loss {
				t.Fatalf("loss %g on both batches", a.Loss)
			}
			if got.Loss != want.Loss {
				t.Errorf("loss after SetBatch %.17g, built on the batch %.17g", got.Loss, want.Loss)
			}
			for name, g := range want.Grads {
				for j := range g {
					if got.Grads[name][j] != g[j] {
						t.Errorf("%s[%d]: gradient after SetBatch %.17g, built on the batch %.17g", name, j, got.Grads[name][j], g[j])
						break
					}
				}
			}
			if err := net.SetBatch(imgB, tgB[1:]); err == nil {
				t.Error("SetBatch took a target of the wrong length")
			}
		})
	}
}
