package kernels

import (
	"fmt"
	"slices"
	"testing"

	"github.com/memunet/memunet/backend"
)

// TestAdamMatchesGo: Adam (AVX2 where the CPU has it) gives adamGo's bits
// with and without weight decay and decoupled decay, at lengths around the
// vector width, with tiny and zero second moments in the mix.
func TestAdamMatchesGo(t *testing.T) {
	for _, a := range []backend.AdamStep{
		{StepSize: 1e-3, SqrtBC2: 0.3, Beta1: 0.9, Beta2: 0.999, OneMinusBeta1: 0.1, OneMinusBeta2: 0.001, Eps: 1e-8},
		{StepSize: 3e-3, SqrtBC2: 0.7, Beta1: 0.8, Beta2: 0.99, OneMinusBeta1: 0.2, OneMinusBeta2: 0.01, Eps: 1e-6, WeightDecay: 0.05},
		{StepSize: 2e-3, SqrtBC2: 0.9, Beta1: 0.9, Beta2: 0.999, OneMinusBeta1: 0.1, OneMinusBeta2: 0.001, Eps: 1e-8, DecoupledScale: 0.999},
	} {
		for _, n := range []int{0, 1, 7, 8, 9, 16, 31, 1001} {
			r := seedFor(fmt.Sprint("adam", n, a.WeightDecay, a.DecoupledScale))
			w, g, m, v := randSlice(r, n), randSlice(r, n), randSlice(r, n), randSlice(r, n)
			for i := range v {
				v[i] *= v[i] // second moments are non-negative
				if i%5 == 0 {
					v[i], m[i] = 0, 0
				}
			}
			ww, wg, wm, wv := slices.Clone(w), slices.Clone(g), slices.Clone(m), slices.Clone(v)
			if a.DecoupledScale != 0 {
				for j := range ww {
					ww[j] *= a.DecoupledScale
				}
			}
			adamGo(a, ww, wg, wm, wv)
			Adam(a, w, g, m, v)
			name := fmt.Sprintf("n=%d wd=%v decoupled=%v", n, a.WeightDecay, a.DecoupledScale)
			sameBits(t, name+" w", w, ww)
			sameBits(t, name+" m", m, wm)
			sameBits(t, name+" v", v, wv)
		}
	}
}
