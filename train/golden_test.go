package train

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/optim"
	"github.com/memunet/memunet/safetensors"
)

// Tolerances against PyTorch, |memunet - torch| <= tol*(1 + |torch|)
// entrywise. Both compute in float32 but sum in different orders (PyTorch's
// convolutions are oneDNN GEMMs, memunet's its own; memunet's norms sum in
// float64), so they agree to float32 rounding, compounded through the
// network (the deepest BatchNorm normalizes over 32 values): the worst seen
// are 8e-6 (logits), 5e-8 (loss), 1.5e-7 (gradients, ratio to 1+|g| of
// gradients of O(0.1)), 6e-8 (running statistics) and 9.5e-6 (weights after
// three Adam steps, whose m/sqrt(v) magnifies the gradients' relative
// differences); the bounds leave a margin of at least 10 while an indexing
// or formula error is O(1e-2) or more.
const (
	goldenTolForward = 1e-4
	goldenTolGrad    = 1e-5
	goldenTolAdam    = 1e-4
)

// TestPyTorchGoldens holds one training step of two tiny UNets to PyTorch:
// logits, loss and every parameter's gradient from the same weights and
// batch, BatchNorm's running statistics after the step, and the whole
// state_dict after three Adam steps (L2 weight decay on). The tensors are
// testdata/goldens (see testdata/README.md; tools/goldens/make_goldens.py made them).
func TestPyTorchGoldens(t *testing.T) {
	forGoldens(t, filepath.Join("..", "testdata", "goldens"), 2, func(t *testing.T, g *safetensors.File) {
		// Every convolution algorithm within the same tolerances:
		// Winograd's (where it takes the shape: the 16x16 level) adds
		// float32 rounding of the same order as the direct way's.
		for _, algo := range []backend.ConvAlgo{backend.ConvDirect, backend.ConvWinograd, backend.ConvAuto} {
			t.Run(algo.String(), func(t *testing.T) { checkGolden(t, g, algo) })
		}
	})
}

// forGoldens runs check on each golden file of dir, at least least of them.
func forGoldens(t *testing.T, dir string, least int, check func(*testing.T, *safetensors.File)) {
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil || len(files) < least {
		t.Fatalf("golden files: %v, %v", files, err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".safetensors"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			g, err := safetensors.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			check(t, g)
		})
	}
}

// TestPyTorchGoldens3D holds the 3D UNet to PyTorch as TestPyTorchGoldens
// holds the 2D one (testdata/goldens/3d: 16^3 volumes with trilinear and
// batch norm, transposed and group norm, and an anisotropic network with
// pooling kernels [1,2,2], [2,2,2] and widths capped at 6).
func TestPyTorchGoldens3D(t *testing.T) {
	forGoldens(t, filepath.Join("..", "testdata", "goldens", "3d"), 3, func(t *testing.T, g *safetensors.File) {
		checkGolden(t, g, backend.ConvDirect)
	})
}

// goldenF32 is the named float32 tensor of g.
func goldenF32(t *testing.T, g *safetensors.File, name string) []float32 {
	t.Helper()
	tn, ok := g.Get(name)
	if !ok {
		t.Fatalf("the golden file has no %s", name)
	}
	v := make([]float32, tn.Numel())
	if err := tn.Float32(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// goldenClose checks got against want with |got-want| <= tol*(1+|want|)
// and returns the worst ratio.
func goldenClose(t *testing.T, what string, got, want []float32, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, PyTorch %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		e := math.Abs(float64(got[i])-float64(want[i])) / (1 + math.Abs(float64(want[i])))
		if math.IsNaN(e) {
			e = math.Inf(1)
		}
		if e > tol {
			t.Fatalf("%s[%d] = %.9g, PyTorch %.9g (|diff|/(1+|want|) = %.3g > %.3g)", what, i, got[i], want[i], e, tol)
		}
		worst = max(worst, e)
	}
	return worst
}

// goldenArch is the model a golden file was made with.
func goldenArch(t *testing.T, g *safetensors.File) model.Config {
	var arch struct {
		InChannels  int      `json:"in_channels"`
		Classes     int      `json:"classes"`
		Base        int      `json:"base"`
		Depth       int      `json:"depth"`
		Up          string   `json:"up"`
		Norm        string   `json:"norm"`
		Groups      int      `json:"groups"`
		Dims        int      `json:"dims"`
		PoolKernels [][3]int `json:"pool_kernels"`
		MaxChannels *int     `json:"max_channels"`
	}
	if err := json.Unmarshal([]byte(g.Metadata["memunet_model"]), &arch); err != nil {
		t.Fatalf("memunet_model metadata: %v", err)
	}
	a := model.Arch{InChannels: arch.InChannels, Classes: arch.Classes, Base: arch.Base, Depth: arch.Depth, Up: model.UpMode(arch.Up), Norm: model.NormKind(arch.Norm), Groups: arch.Groups, Dims: arch.Dims}
	a.PoolKernels = arch.PoolKernels
	if arch.MaxChannels != nil {
		a.MaxChannels = *arch.MaxChannels
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	return model.Config{Arch: a}
}

// goldenRun is a fresh model with a golden file's initial state_dict, and
// its batch, on the CPU.
type goldenRun struct {
	t      *testing.T
	dev    *model.Device
	net    *model.UNet
	x      *model.Tensor
	target backend.View
}

func newGoldenRun(t *testing.T, g *safetensors.File, cfg model.Config) *goldenRun {
	targetT, ok := g.Get("target")
	if !ok || targetT.DType != safetensors.U8 {
		t.Fatalf("the golden file has no U8 target")
	}
	dev := model.NewDevice(cpu.New(), memory.Options{})
	net, err := model.New(dev, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(net.Free)
	for _, p := range net.Params() {
		p.Write(goldenF32(t, g, "weights."+p.Name))
	}
	inT, ok := g.Get("input")
	if !ok {
		t.Fatal("the golden file has no input")
	}
	sh := inT.Shape // (N,C,H,W) or (N,C,D,H,W)
	var x *model.Tensor
	if len(sh) == 5 {
		x, err = model.NewVolume(dev, memory.Activations, backend.Float32, sh[0], sh[1], sh[2], sh[3], sh[4])
	} else {
		x, err = model.NewTensor(dev, memory.Activations, backend.Float32, sh[0], sh[1], sh[2], sh[3])
	}
	if err != nil {
		t.Fatal(err)
	}
	x.Write(goldenF32(t, g, "input"))
	buf, err := dev.Pool.Alloc(memory.Activations, int64(len(targetT.Data)))
	if err != nil {
		t.Fatal(err)
	}
	target := backend.Whole(buf, backend.Uint8)
	dev.Backend.Upload(target, targetT.Data)
	return &goldenRun{t, dev, net, x, target}
}

// step runs forward, the loss and backward in training mode and returns
// the loss; check compares the logits before they are released.
func (r *goldenRun) step(check func(logits []float32)) float64 {
	t := r.t
	env := &model.Env{Device: r.dev, Training: true}
	r.net.ZeroGrad()
	logits, err := r.net.Forward(env, r.x)
	if err != nil {
		t.Fatal(err)
	}
	if check != nil {
		check(logits.Read())
	}
	var ce model.CrossEntropy
	loss, err := ce.Forward(env, logits, r.target)
	logits.Release()
	if err != nil {
		t.Fatal(err)
	}
	dlogits, err := ce.Backward(env, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.net.Backward(env, dlogits); err != nil {
		t.Fatal(err)
	}
	return loss
}

func checkGolden(t *testing.T, g *safetensors.File, algo backend.ConvAlgo) {
	var opt struct {
		LR          float64    `json:"lr"`
		Betas       [2]float64 `json:"betas"`
		Eps         float64    `json:"eps"`
		WeightDecay float64    `json:"weight_decay"`
		Steps       int        `json:"steps"`
	}
	if err := json.Unmarshal([]byte(g.Metadata["adam"]), &opt); err != nil {
		t.Fatalf("adam metadata: %v", err)
	}
	cfg := goldenArch(t, g)
	cfg.ConvAlgo = algo
	logitsWant := goldenF32(t, g, "logits")

	run := newGoldenRun(t, g, cfg)
	net := run.net
	worst := map[string]float64{}
	loss := run.step(func(logits []float32) {
		worst["logits"] = goldenClose(t, "logits", logits, logitsWant, goldenTolForward)
	})
	worst["loss"] = goldenClose(t, "loss", []float32{float32(loss)}, goldenF32(t, g, "loss"), goldenTolForward)
	grads, stats := 0, 0
	for _, p := range net.Params() {
		if p.Trainable {
			worst["grad"] = max(worst["grad"], goldenClose(t, "grad."+p.Name, p.ReadGrad(), goldenF32(t, g, "grad."+p.Name), goldenTolGrad))
			grads++
		} else if _, ok := g.Get("after1." + p.Name); ok {
			worst["running"] = max(worst["running"], goldenClose(t, "after1."+p.Name, p.Read(), goldenF32(t, g, "after1."+p.Name), goldenTolForward))
			stats++
		}
	}
	for _, bn := range net.BatchNorms() {
		name := bn.CountName()
		if tn, ok := g.Get("after1." + name); ok {
			if n, err := tn.Int64(); err != nil || n[0] != bn.NumBatchesTracked {
				t.Errorf("%s: %d, PyTorch %v (%v)", name, bn.NumBatchesTracked, n, err)
			}
		}
	}
	if grads == 0 || cfg.Norm == model.NormBatch && stats == 0 {
		t.Fatalf("checked %d gradients and %d running statistics", grads, stats)
	}

	// Three Adam steps from the same start on the same batch.
	run = newGoldenRun(t, g, cfg)
	net = run.net
	adam, err := optim.NewAdam(run.dev, net.Params(), optim.AdamConfig{LR: opt.LR, Beta1: opt.Betas[0], Beta2: opt.Betas[1], Eps: opt.Eps, WeightDecay: opt.WeightDecay})
	if err != nil {
		t.Fatal(err)
	}
	defer adam.Free()
	lossesWant := goldenF32(t, g, "adam3.loss")
	for i := range opt.Steps {
		l := run.step(nil)
		worst["adam loss"] = max(worst["adam loss"], goldenClose(t, fmt.Sprintf("adam3.loss[%d]", i), []float32{float32(l)}, lossesWant[i:i+1], goldenTolForward))
		adam.Update(opt.LR, 0)
	}
	for _, p := range net.Params() {
		worst["adam"] = max(worst["adam"], goldenClose(t, "adam3."+p.Name, p.Read(), goldenF32(t, g, "adam3."+p.Name), goldenTolAdam))
	}
	t.Logf("worst |diff|/(1+|torch|): %v", worst)
}
