package train

import (
	"math"

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
type Adam struct {
	Config AdamConfig
	Step   int64
	params []*model.Param
	m, v   []*memory.Buffer // optimizer category, one per trainable param
	pool   *memory.Pool
}

// NewAdam allocates zeroed moments for every trainable parameter.
func NewAdam(pool *memory.Pool, params []*model.Param, cfg AdamConfig) (*Adam, error) {
	a := &Adam{Config: cfg, pool: pool}
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		m, err := pool.AllocFloat32Zeroed(memory.Optimizer, p.Len())
		if err != nil {
			a.Free()
			return nil, err
		}
		v, err := pool.AllocFloat32Zeroed(memory.Optimizer, p.Len())
		if err != nil {
			pool.MustFree(m)
			a.Free()
			return nil, err
		}
		a.params, a.m, a.v = append(a.params, p), append(a.m, m), append(a.v, v)
	}
	return a, nil
}

// Update applies one step to every trainable parameter from its gradient.
func (a *Adam) Update() {
	a.Step++
	c := a.Config
	bc1 := 1 - math.Pow(c.Beta1, float64(a.Step))
	bc2 := 1 - math.Pow(c.Beta2, float64(a.Step))
	stepSize := float32(c.LR / bc1)
	sqrtBC2 := float32(math.Sqrt(bc2))
	b1, b2, eps, wd := float32(c.Beta1), float32(c.Beta2), float32(c.Eps), float32(c.WeightDecay)
	for i, p := range a.params {
		w, g := p.Data(), p.Grad()
		m, v := a.m[i].Float32(), a.v[i].Float32()
		for j := range w {
			gj := g[j]
			if wd != 0 {
				gj += wd * w[j]
			}
			m[j] = b1*m[j] + (1-b1)*gj
			v[j] = b2*v[j] + (1-b2)*gj*gj
			denom := float32(math.Sqrt(float64(v[j])))/sqrtBC2 + eps
			w[j] -= stepSize * m[j] / denom
		}
	}
}

// Free returns the moments to the pool.
func (a *Adam) Free() {
	for i := range a.m {
		a.pool.MustFree(a.m[i])
		a.pool.MustFree(a.v[i])
	}
	a.m, a.v, a.params = nil, nil, nil
}
