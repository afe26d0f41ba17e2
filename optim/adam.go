package optim

import (
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// AdamConfig holds Adam's hyperparameters; PyTorch's defaults are
// LR 1e-3, Beta1 0.9, Beta2 0.999, Eps 1e-8, WeightDecay 0.
type AdamConfig struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
}

// Adam is torch.optim.Adam (amsgrad off, weight decay added to the gradient
// as L2, not decoupled): for each trainable parameter p with gradient g, at
// step t = 1, 2, ...
//
//	g = g + wd*p
//	m = b1*m + (1-b1)*g
//	v = b2*v + (1-b2)*g*g
//	p = p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//
// The moments live on the device (optimizer category); the update runs
// there (backend.Optimizer.Adam).
type Adam struct {
	Hyper AdamConfig
	Step  int64
	// Decoupled makes it torch.optim.AdamW: p *= 1 - lr*wd before the
	// update, and no L2 on the gradient.
	Decoupled bool
	params    []*model.Param
	m, v      []backend.View // fp32, one per trainable param
	dev       *model.Device
}

// NewAdam allocates zeroed moments for every trainable parameter on dev.
func NewAdam(dev *model.Device, params []*model.Param, cfg AdamConfig) (*Adam, error) {
	a := &Adam{Hyper: cfg, dev: dev}
	moment := func(p *model.Param) (backend.View, error) {
		buf, err := dev.Pool.Alloc(memory.Optimizer, int64(4*p.Len()))
		if err != nil {
			return backend.View{}, err
		}
		v := backend.Whole(buf, backend.Float32)
		dev.Backend.Fill(v, 0)
		return v, nil
	}
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		m, err := moment(p)
		if err != nil {
			a.Free()
			return nil, err
		}
		v, err := moment(p)
		if err != nil {
			dev.Pool.MustFree(m.Buf)
			a.Free()
			return nil, err
		}
		a.params, a.m, a.v = append(a.params, p), append(a.m, m), append(a.v, v)
	}
	return a, nil
}

// stepFactors are the float32 factors of step t, formed as PyTorch forms
// them: each a float64 expression (1-beta1, lr/(1-beta1^t), ...) rounded to
// float32 once.
func (c AdamConfig) stepFactors(t int64) backend.AdamStep {
	bc1, bc2 := c.biasCorrections(t)
	return backend.AdamStep{
		StepSize: float32(c.LR / bc1), SqrtBC2: float32(math.Sqrt(bc2)),
		Beta1: float32(c.Beta1), Beta2: float32(c.Beta2),
		OneMinusBeta1: float32(1 - c.Beta1), OneMinusBeta2: float32(1 - c.Beta2),
		Eps: float32(c.Eps), WeightDecay: float32(c.WeightDecay),
	}
}

// biasCorrections are 1-beta1^t and 1-beta2^t.
func (c AdamConfig) biasCorrections(t int64) (bc1, bc2 float64) {
	return 1 - math.Pow(c.Beta1, float64(t)), 1 - math.Pow(c.Beta2, float64(t))
}

// Update applies one step at rate lr to every trainable parameter from its
// gradient (see Optimizer.Update for at).
func (a *Adam) Update(lr float64, at backend.StepEntry) {
	if at == 0 {
		a.Step++
	}
	a.Hyper.LR = lr
	f := a.Hyper.stepFactors(a.Step) // queued: the entry's StepSize and SqrtBC2 replace these
	f.Entry = at
	if a.Decoupled {
		f.DecoupledScale, f.WeightDecay = float32(1-lr*a.Hyper.WeightDecay), 0
	}
	for i, p := range a.params {
		a.dev.Backend.Adam(f, p.View(), p.GradView(), a.m[i], a.v[i])
	}
}

// Params are the parameters Adam updates.
func (a *Adam) Params() []*model.Param { return a.params }

// Free returns the moments to the pool.
func (a *Adam) Free() {
	for i := range a.m {
		a.dev.Pool.MustFree(a.m[i].Buf)
		a.dev.Pool.MustFree(a.v[i].Buf)
	}
	a.m, a.v, a.params = nil, nil, nil
}

func (a *Adam) Steps() int64 { return a.Step }

// BiasCorrections are biasCorrections of the n step counts after Step.
func (a *Adam) BiasCorrections(n int) []float64 {
	out := make([]float64, 0, 2*n)
	for i := range int64(n) {
		bc1, bc2 := a.Hyper.biasCorrections(a.Step + 1 + i)
		out = append(out, bc1, bc2)
	}
	return out
}
func (a *Adam) SetSteps(n int64) { a.Step = n }

// Config is Adam's settings as an optimizer Config.
func (a *Adam) Config() Config {
	k := KindAdam
	if a.Decoupled {
		k = KindAdamW
	}
	c := a.Hyper
	return Config{Kind: k, LR: c.LR, WeightDecay: c.WeightDecay, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps}
}

// State is exp_avg and exp_avg_sq of every parameter.
func (a *Adam) State() []StateTensor {
	var out []StateTensor
	for i, p := range a.params {
		out = append(out, StateTensor{p, "exp_avg", a.m[i]}, StateTensor{p, "exp_avg_sq", a.v[i]})
	}
	return out
}
