package cpu

import (
	"fmt"
	"math"

	"github.com/memunet/memunet/backend"
)

// Adam updates one parameter serially (the optimizer is a few percent of a
// step).
func (CPU) Adam(a backend.AdamStep, w, g, m, v backend.View) {
	ws, gs, ms, vs := f32(w), f32(g), f32(m), f32(v)
	if len(gs) != len(ws) || len(ms) != len(ws) || len(vs) != len(ws) {
		panic(fmt.Sprintf("backend/cpu: adam on %v, %v, %v, %v", w, g, m, v))
	}
	for j := range ws {
		if a.DecoupledScale != 0 {
			ws[j] *= a.DecoupledScale
		}
		gj := gs[j]
		if a.WeightDecay != 0 {
			gj += a.WeightDecay * ws[j]
		}
		ms[j] = a.Beta1*ms[j] + a.OneMinusBeta1*gj
		vs[j] = a.Beta2*vs[j] + a.OneMinusBeta2*gj*gj
		denom := float32(math.Sqrt(float64(vs[j])))/a.SqrtBC2 + a.Eps
		ws[j] -= a.StepSize * ms[j] / denom
	}
}

// UnscaleCheck multiplies g by inv and reports whether all of it is finite.
func (CPU) UnscaleCheck(g backend.View, inv float32) bool {
	finite := true
	xs := f32(g)
	for i, v := range xs {
		v *= inv
		xs[i] = v
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			finite = false
		}
	}
	return finite
}

// SGD updates one parameter serially.
func (CPU) SGD(a backend.SGDStep, w, g, buf backend.View) {
	ws, gs, bs := f32(w), f32(g), f32(buf)
	if len(gs) != len(ws) || (a.Momentum != 0 && len(bs) != len(ws)) {
		panic(fmt.Sprintf("backend/cpu: sgd on %v, %v, %v", w, g, buf))
	}
	for j := range ws {
		d := gs[j]
		if a.WeightDecay != 0 {
			d += a.WeightDecay * ws[j]
		}
		if a.Momentum != 0 {
			if a.First {
				bs[j] = d
			} else {
				bs[j] = a.Momentum*bs[j] + (1-a.Dampening)*d
			}
			if a.Nesterov {
				d += a.Momentum * bs[j]
			} else {
				d = bs[j]
			}
		}
		ws[j] -= a.LR * d
	}
}

// RMSprop updates one parameter serially.
func (CPU) RMSprop(a backend.RMSpropStep, w, g, sq, buf backend.View) {
	ws, gs, ss, bs := f32(w), f32(g), f32(sq), f32(buf)
	if len(gs) != len(ws) || len(ss) != len(ws) || (a.Momentum != 0 && len(bs) != len(ws)) {
		panic(fmt.Sprintf("backend/cpu: rmsprop on %v, %v, %v, %v", w, g, sq, buf))
	}
	for j := range ws {
		d := gs[j]
		if a.WeightDecay != 0 {
			d += a.WeightDecay * ws[j]
		}
		ss[j] = a.Alpha*ss[j] + a.OneMinusAlpha*d*d
		avg := float32(math.Sqrt(float64(ss[j]))) + a.Eps
		if a.Momentum != 0 {
			bs[j] = a.Momentum*bs[j] + d/avg
			ws[j] -= a.LR * bs[j]
		} else {
			ws[j] -= a.LR * d / avg
		}
	}
}
