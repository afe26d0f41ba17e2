package kernels

import (
	"math"

	"github.com/memunet/memunet/backend"
)

// Adam applies one Adam step (see backend.AdamStep) to matching w, g, m and
// v: AVX2 where the CPU has it (adamAVX2, 8 values a step, the tail in Go),
// the same float32 operations in the same order otherwise (the square root
// correctly rounded either way), so both agree bit for bit.
func Adam(a backend.AdamStep, w, g, m, v []float32) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	if a.DecoupledScale != 0 {
		for j := range w {
			w[j] *= a.DecoupledScale
		}
	}
	bestElementwise().adam(a, w, g, m, v)
}

// adam is the update after the decoupled decay.
func (e elementwiseImpl) adam(a backend.AdamStep, w, g, m, v []float32) {
	n := 0
	if e.avx2 {
		n = adamAsm(&a, w, g, m, v)
	}
	adamGo(a, w[n:], g[n:], m[n:], v[n:])
}

// adamGo is adam in Go.
func adamGo(a backend.AdamStep, w, g, m, v []float32) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for j, gj := range g {
		if a.WeightDecay != 0 {
			gj += a.WeightDecay * w[j]
		}
		mj := a.Beta1*m[j] + a.OneMinusBeta1*gj
		vj := a.Beta2*v[j] + a.OneMinusBeta2*gj*gj
		m[j], v[j] = mj, vj
		denom := float32(math.Sqrt(float64(vj)))/a.SqrtBC2 + a.Eps
		w[j] -= a.StepSize * mj / denom
	}
}
