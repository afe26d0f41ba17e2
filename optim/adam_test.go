package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// adamReference is torch.optim.Adam's update in float64 for one parameter
// vector over a sequence of gradients.
func adamReference(w []float64, grads [][]float64, c AdamConfig) []float64 {
	w = append([]float64(nil), w...)
	m, v := make([]float64, len(w)), make([]float64, len(w))
	for t, g := range grads {
		step := float64(t + 1)
		for j := range w {
			gj := g[j] + c.WeightDecay*w[j]
			m[j] = c.Beta1*m[j] + (1-c.Beta1)*gj
			v[j] = c.Beta2*v[j] + (1-c.Beta2)*gj*gj
			bc1, bc2 := 1-math.Pow(c.Beta1, step), 1-math.Pow(c.Beta2, step)
			w[j] -= c.LR / bc1 * m[j] / (math.Sqrt(v[j])/math.Sqrt(bc2) + c.Eps)
		}
	}
	return w
}

func TestAdamMatchesPyTorchRule(t *testing.T) {
	for _, c := range []AdamConfig{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{LR: 3e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1},
	} {
		dev := model.NewDevice(cpu.New(), memory.Options{})
		net, err := model.New(dev, model.Config{Arch: model.Arch{Base: 2, Depth: 1, Classes: 2}}, 7)
		if err != nil {
			t.Fatal(err)
		}
		opt, err := NewAdam(dev, net.Params(), c)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		p := net.Params()[0]
		start := make([]float64, p.Len())
		for j, x := range p.Read() {
			start[j] = float64(x)
		}
		var grads [][]float64
		for range 5 {
			g := make([]float64, p.Len())
			g32 := make([]float32, p.Len())
			for j := range g {
				g32[j] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(5)-3)))
				g[j] = float64(g32[j])
			}
			backend.UploadFloat32(dev.Backend, p.GradView(), g32)
			grads = append(grads, g)
			opt.Update(c.LR, 0)
		}
		want := adamReference(start, grads, c)
		for j, x := range p.Read() {
			if d := math.Abs(float64(x) - want[j]); d > 1e-6*(1+math.Abs(want[j])) {
				t.Fatalf("config %+v: weight %d = %v, reference %v", c, j, x, want[j])
			}
		}
		// Non-trainable buffers (BatchNorm running stats) have no Adam state.
		wantBytes := int64(0)
		for _, p := range net.Params() {
			if p.Trainable {
				wantBytes += 2 * memory.RoundSize(int64(4*p.Len()))
			}
		}
		if got := dev.Pool.Stats().ByCategory[memory.Optimizer].Current; got != wantBytes {
			t.Errorf("optimizer bytes %d, want %d", got, wantBytes)
		}
		opt.Free()
		if got := dev.Pool.Stats().ByCategory[memory.Optimizer].Current; got != 0 {
			t.Errorf("optimizer bytes after Free %d", got)
		}
	}
}

// TestAdamFactorsRoundAsPyTorch: PyTorch forms 1-beta1, 1-beta2, the step
// size and sqrt(1-beta2^t) in float64 (Python floats) and rounds each once
// where it meets a float32 tensor; rounding beta first and subtracting in
// float32 gives other bits (1-float32(0.999) = 0.0010000467 against
// float32(0.001) = 0.001).
func TestAdamFactorsRoundAsPyTorch(t *testing.T) {
	c := AdamConfig{LR: 0.003, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	for _, step := range []int64{1, 2, 10, 1000} {
		f := c.stepFactors(step)
		want := backend.AdamStep{
			StepSize: float32(c.LR / (1 - math.Pow(c.Beta1, float64(step)))), SqrtBC2: float32(math.Sqrt(1 - math.Pow(c.Beta2, float64(step)))),
			Beta1: float32(c.Beta1), Beta2: float32(c.Beta2), OneMinusBeta1: float32(0.1), OneMinusBeta2: float32(0.001),
			Eps: float32(1e-8), WeightDecay: float32(0.01),
		}
		if f != want {
			t.Errorf("step %d: factors %+v, want %+v", step, f, want)
		}
	}
	if f := c.stepFactors(1); f.OneMinusBeta2 == 1-float32(c.Beta2) {
		t.Fatalf("the check cannot tell the two roundings apart")
	}
}

// TestOptimizerStateBytes: each optimizer keeps, per trainable parameter,
// the state tensors PyTorch keeps, in the optimizer category, and frees
// them.
func TestOptimizerStateBytes(t *testing.T) {
	for _, tc := range []struct {
		cfg     Config
		tensors int
		names   []string
	}{
		{Config{Kind: KindAdam, Beta1: 0.9, Beta2: 0.999}, 2, []string{"exp_avg", "exp_avg_sq"}},
		{Config{Kind: KindAdamW, Beta1: 0.9, Beta2: 0.999, WeightDecay: 0.01}, 2, []string{"exp_avg", "exp_avg_sq"}},
		{Config{Kind: KindSGD}, 0, nil},
		{Config{Kind: KindSGD, Momentum: 0.9}, 1, []string{"momentum_buffer"}},
		{Config{Kind: KindRMSprop, Alpha: 0.99}, 1, []string{"square_avg"}},
		{Config{Kind: KindRMSprop, Alpha: 0.99, Momentum: 0.9}, 2, []string{"square_avg", "momentum_buffer"}},
	} {
		dev := model.NewDevice(cpu.New(), memory.Options{})
		net, err := model.New(dev, model.Config{Arch: model.Arch{Base: 2, Depth: 1, Classes: 2}}, 7)
		if err != nil {
			t.Fatal(err)
		}
		opt, err := New(dev, net.Params(), tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		want, trainable := int64(0), 0
		for _, p := range net.Params() {
			if p.Trainable {
				want += int64(tc.tensors) * memory.RoundSize(int64(4*p.Len()))
				trainable++
			}
		}
		if got := dev.Pool.Stats().ByCategory[memory.Optimizer].Current; got != want {
			t.Errorf("%+v: optimizer bytes %d, want %d", tc.cfg, got, want)
		}
		st := opt.State()
		if len(st) != tc.tensors*trainable {
			t.Fatalf("%+v: %d state tensors, want %d", tc.cfg, len(st), tc.tensors*trainable)
		}
		for i, s := range st {
			if s.Name != tc.names[i%tc.tensors] || !s.Param.Trainable {
				t.Errorf("%+v: state %d is %s of %s", tc.cfg, i, s.Name, s.Param.Name)
			}
		}
		opt.Free()
		if got := dev.Pool.Stats().ByCategory[memory.Optimizer].Current; got != 0 {
			t.Errorf("%+v: %d optimizer bytes after Free", tc.cfg, got)
		}
		net.Free()
	}
}
