package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
)

// adamStep forms the factors as the optimizer does for step t of
// Adam(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay).
func adamStep(lr float64, t int, weightDecay float32) backend.AdamStep {
	b1, b2 := 0.9, 0.999
	return backend.AdamStep{
		StepSize:      float32(lr / (1 - math.Pow(b1, float64(t)))),
		SqrtBC2:       float32(math.Sqrt(1 - math.Pow(b2, float64(t)))),
		Beta1:         float32(b1),
		Beta2:         float32(b2),
		OneMinusBeta1: float32(1 - b1),
		OneMinusBeta2: float32(1 - b2),
		Eps:           1e-8,
		WeightDecay:   weightDecay,
	}
}

// testAdam checks one Adam step against the documented formula. The learning
// rate is large (0.05) so that the update, not w's rounding, dominates
// the comparison.
func (s *suite) testAdam(t *testing.T) {
	for _, n := range []int{1, 13, 1001} {
		for _, step := range []int{1, 3, 1000} {
			for _, wd := range []float32{0, 0.01, -1} { // -1: AdamW's decoupled 0.01
				s.run(t, fmt.Sprintf("n%d/t%d/wd%g", n, step, wd), func(c *check) {
					a := adamStep(0.05, step, max(wd, 0))
					if wd < 0 {
						a.DecoupledScale = float32(1 - 0.05*0.01)
					}
					w0, g0 := c.signed(n), c.uniform(n, -2, 2)
					m0, v0 := c.uniform(n, -0.1, 0.1), c.uniform(n, 0, 0.01)
					if n > 2 {
						// a parameter that has seen no gradient yet
						g0[1], m0[1], v0[1] = 0, 0, 0
					}
					w, g, m, v := c.input(backend.Float32, w0), c.input(backend.Float32, g0), c.input(backend.Float32, m0), c.input(backend.Float32, v0)
					s.b.Adam(a, w, g, m, v)
					wantW, wantM, wantV := refAdam(a, w0, g0, m0, v0)
					c.near("m", c.get(m), wantM, tolElementwise)
					c.near("v", c.get(v), wantV, tolElementwise)
					c.near("w", c.get(w), wantW, tolElementwise)
					c.unchanged("g", g, encode(backend.Float32, g0))
				})
			}
		}
	}
}

// testUnscaleCheck checks g *= inv (one float32 multiplication each, exact)
// for every view of a list (one, or three of odd sizes) and the one finite
// answer for them all: false for a NaN or an infinity already in any view,
// and for finite values that overflow when multiplied; true for no views.
func (s *suite) testUnscaleCheck(t *testing.T) {
	if !s.b.UnscaleCheck(nil, 0.5) {
		t.Error("UnscaleCheck of no views returned false, want true")
	}
	cases := []struct {
		name   string
		inv    float32
		poison float32 // put into one value of g unless 0
		finite bool
	}{
		{"finite", 1.0 / 3, 0, true},
		{"finite/inv=2^-16", 0x1p-16, 0, true},
		{"NaN", 1.0 / 1024, float32(math.NaN()), false},
		{"+Inf", 0.5, float32(math.Inf(1)), false},
		{"-Inf", 0.5, float32(math.Inf(-1)), false},
		{"overflow", 4, -1e38, false},
	}
	for _, cs := range cases {
		for _, sizes := range [][]int{{1}, {333}, {7, 1, 333}} {
			s.run(t, fmt.Sprintf("%s/n%v", cs.name, sizes), func(c *check) {
				g0 := make([][]float32, len(sizes))
				gs := make([]backend.View, len(sizes))
				for i, n := range sizes {
					g0[i] = c.uniform(n, -1000, 1000)
				}
				if cs.poison != 0 { // in any one view: each view's kernel counts
					v := c.rng.IntN(len(sizes))
					g0[v][c.rng.IntN(sizes[v])] = cs.poison
				}
				for i := range sizes {
					gs[i] = c.input(backend.Float32, g0[i])
				}
				finite := s.b.UnscaleCheck(gs, cs.inv)
				if finite != cs.finite {
					c.Errorf("UnscaleCheck returned %v, want %v", finite, cs.finite)
				}
				for i, g := range gs {
					want := make([]float32, sizes[i])
					for j, v := range g0[i] {
						want[j] = float32(float64(v) * float64(cs.inv)) // exact product, rounded once
					}
					c.same(fmt.Sprintf("g[%d]", i), c.get(g), want)
				}
			})
		}
	}
}

// testSumSquares checks Σ g² over every view of a list (one, three of odd
// sizes, one of several SumSquaresBlock blocks) against a float64 sum in
// plain order, within 1e-12 relative, the views left as they were; 0 for
// no views, +Inf for an infinity in any view, NaN for a NaN.
func (s *suite) testSumSquares(t *testing.T) {
	if got := s.b.SumSquares(nil); got != 0 {
		t.Errorf("SumSquares of no views = %v, want 0", got)
	}
	for _, poison := range []float32{0, float32(math.Inf(-1)), float32(math.NaN())} {
		for _, sizes := range [][]int{{1}, {333}, {7, 1, 333}, {2*backend.SumSquaresBlock + 5, 3}} {
			s.run(t, fmt.Sprintf("poison%v/n%v", poison, sizes), func(c *check) {
				g0 := make([][]float32, len(sizes))
				for i, n := range sizes {
					g0[i] = c.uniform(n, -3e3, 3e3)
				}
				if poison != 0 {
					v := c.rng.IntN(len(sizes))
					g0[v][c.rng.IntN(sizes[v])] = poison
				}
				gs := make([]backend.View, len(sizes))
				want := 0.0
				for i := range sizes {
					gs[i] = c.input(backend.Float32, g0[i])
					for _, x := range g0[i] {
						want += float64(x) * float64(x)
					}
				}
				got := s.b.SumSquares(gs)
				switch {
				case math.IsNaN(float64(poison)):
					if !math.IsNaN(got) {
						c.Errorf("SumSquares with a NaN = %v, want NaN", got)
					}
				case poison != 0:
					if !math.IsInf(got, 1) {
						c.Errorf("SumSquares with an infinity = %v, want +Inf", got)
					}
				case !(math.Abs(got-want) <= 1e-12*want):
					c.Errorf("SumSquares = %.17g, want %.17g (relative error %.3g)", got, want, math.Abs(got-want)/want)
				}
				for i, g := range gs {
					c.unchanged(fmt.Sprintf("g[%d]", i), g, encode(backend.Float32, g0[i]))
				}
			})
		}
	}
}

// testSGD checks SGD steps: plain, with weight decay, momentum (the first step
// and later ones), dampening and Nesterov.
func (s *suite) testSGD(t *testing.T) {
	for _, n := range []int{1, 13, 1001} {
		for _, a := range []backend.SGDStep{
			{LR: 0.1},
			{LR: 0.05, WeightDecay: 0.01},
			{LR: 0.05, Momentum: 0.9, First: true},
			{LR: 0.05, Momentum: 0.9},
			{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 1e-3},
			{LR: 0.05, Momentum: 0.9, Nesterov: true},
		} {
			s.run(t, fmt.Sprintf("n%d/m%g/first%v/nesterov%v/wd%g/damp%g", n, a.Momentum, a.First, a.Nesterov, a.WeightDecay, a.Dampening), func(c *check) {
				w0, g0, b0 := c.signed(n), c.uniform(n, -2, 2), c.uniform(n, -0.5, 0.5)
				w, g := c.input(backend.Float32, w0), c.input(backend.Float32, g0)
				var buf backend.View
				if a.Momentum != 0 {
					buf = c.input(backend.Float32, b0)
				}
				s.b.SGD(a, w, g, buf)
				wantW, wantB := refSGD(a, w0, g0, b0)
				c.near("w", c.get(w), wantW, tolElementwise)
				if a.Momentum != 0 {
					c.near("buf", c.get(buf), wantB, tolElementwise)
				}
				c.unchanged("g", g, encode(backend.Float32, g0))
			})
		}
	}
}

// testRMSprop checks RMSprop steps, with and without momentum and weight decay.
func (s *suite) testRMSprop(t *testing.T) {
	for _, n := range []int{1, 13, 1001} {
		for _, a := range []backend.RMSpropStep{
			{LR: 0.01, Alpha: 0.99, OneMinusAlpha: float32(1 - 0.99), Eps: 1e-8},
			{LR: 0.01, Alpha: 0.9, OneMinusAlpha: float32(1 - 0.9), Eps: 1e-6, WeightDecay: 1e-8, Momentum: 0.999},
		} {
			s.run(t, fmt.Sprintf("n%d/m%g", n, a.Momentum), func(c *check) {
				w0, g0 := c.signed(n), c.uniform(n, -2, 2)
				sq0, b0 := c.uniform(n, 0, 0.1), c.uniform(n, -0.5, 0.5)
				w, g, sq := c.input(backend.Float32, w0), c.input(backend.Float32, g0), c.input(backend.Float32, sq0)
				var buf backend.View
				if a.Momentum != 0 {
					buf = c.input(backend.Float32, b0)
				}
				s.b.RMSprop(a, w, g, sq, buf)
				wantW, wantSq, wantB := refRMSprop(a, w0, g0, sq0, b0)
				c.near("sq", c.get(sq), wantSq, tolElementwise)
				c.near("w", c.get(w), wantW, tolElementwise)
				if a.Momentum != 0 {
					c.near("buf", c.get(buf), wantB, tolElementwise)
				}
			})
		}
	}
}
