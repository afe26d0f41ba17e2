package backendtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend"
)

// lossShape is logits (N,K,H,W) with logits uniform in [-scale, scale]
// (100 overflows exp in float32 unless the maximum is subtracted first).
type lossShape struct {
	backend.Shape4
	scale float64
}

var lossShapes = []lossShape{
	{backend.Shape4{N: 1, C: 1, H: 1, W: 1}, 3},
	{backend.Shape4{N: 2, C: 3, H: 5, W: 7}, 3},
	{backend.Shape4{N: 3, C: 2, H: 1, W: 1}, 3},
	{backend.Shape4{N: 1, C: 5, H: 4, W: 3}, 3},
	{backend.Shape4{N: 2, C: 4, H: 3, W: 5}, 100},
	{backend.Shape4{N: 2, C: 3, H: 24, W: 23}, 3},
}

func lossName(dt backend.DType, s lossShape) string {
	return fmt.Sprintf("%s/N%dK%dH%dW%d/scale%g", dt, s.N, s.C, s.H, s.W, s.scale)
}

// targets is n target values: classes below k, with about one in six
// IgnoreIndex.
func (c *check) targets(n, k int) []byte {
	t := make([]byte, n)
	for i := range t {
		if c.rng.IntN(6) == 0 {
			t[i] = backend.IgnoreIndex
		} else {
			t[i] = byte(c.rng.IntN(k))
		}
	}
	return t
}

func (s *suite) testCrossEntropy(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpLoss) {
		for _, sh := range lossShapes {
			s.run(t, lossName(dt, sh), func(c *check) {
				z := c.uniform(sh.Len(), -sh.scale, sh.scale)
				tg := c.targets(sh.N*sh.H*sh.W, sh.C)
				logits, target := c.input(dt, z), c.inputBytes(tg)
				sum, count, err := s.b.CrossEntropy(sh.Shape4, logits, target)
				if err != nil {
					c.Fatalf("error %v for valid targets", err)
				}
				wantSum, wantCount, _ := refCrossEntropy(sh.Shape4, f64(z), tg)
				if count != wantCount {
					c.Errorf("count %d, want %d", count, wantCount)
				}
				c.near("sum", []float32{float32(sum)}, []float64{wantSum}, tolFor(dt, tolReduction))
				c.unchanged("logits", logits, encode(dt, z))
				c.unchanged("target", target, tg)
			})
		}
		// A bad target value in sample 1 (of 3); the others are fine.
		sh := backend.Shape4{N: 3, C: 4, H: 2, W: 3}
		for _, bad := range []byte{4, 17, 254} {
			s.run(t, fmt.Sprintf("%s/BadTarget%d", dt, bad), func(c *check) {
				z := c.uniform(sh.Len(), -3, 3)
				tg := c.targets(sh.N*sh.H*sh.W, sh.C)
				tg[sh.H*sh.W+c.rng.IntN(sh.H*sh.W)] = bad
				logits, target := c.input(dt, z), c.inputBytes(tg)
				_, _, err := s.b.CrossEntropy(sh, logits, target)
				var te *backend.TargetError
				if !errors.As(err, &te) {
					c.Fatalf("error %v (%T), want a *backend.TargetError", err, err)
				}
				if te.Value != int(bad) || te.Sample != 1 || te.Classes != sh.C {
					c.Errorf("%+v, want value %d in sample 1 of %d classes", *te, bad, sh.C)
				}
			})
		}
		s.run(t, fmt.Sprintf("%s/AllIgnored", dt), func(c *check) {
			sh := backend.Shape4{N: 2, C: 3, H: 3, W: 2}
			z := c.uniform(sh.Len(), -3, 3)
			tg := make([]byte, sh.N*sh.H*sh.W)
			for i := range tg {
				tg[i] = backend.IgnoreIndex
			}
			sum, count, err := s.b.CrossEntropy(sh, c.input(dt, z), c.inputBytes(tg))
			if sum != 0 || count != 0 || err != nil {
				c.Errorf("all targets ignored: %v, %d, %v; want 0, 0, nil", sum, count, err)
			}
		})
	}
}

func (s *suite) testCrossEntropyBack(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpLoss) {
		for _, sh := range lossShapes {
			for _, k := range []float32{0.37, 0} {
				for _, inPlace := range []bool{false, true} {
					name := fmt.Sprintf("%s/k%g", lossName(dt, sh), k)
					if inPlace {
						name += "/dlogits=logits"
					} else {
						name += "/dlogits"
					}
					s.run(t, name, func(c *check) {
						z := c.uniform(sh.Len(), -sh.scale, sh.scale)
						tg := c.targets(sh.N*sh.H*sh.W, sh.C)
						logits, target := c.input(dt, z), c.inputBytes(tg)
						dlogits := logits
						if !inPlace {
							dlogits = c.output(dt, sh.Len())
						}
						s.b.CrossEntropyBack(sh.Shape4, dlogits, logits, target, k)
						c.near("dlogits", c.get(dlogits), refCrossEntropyBack(sh.Shape4, f64(z), tg, float64(k)), tolFor(dt, tolElementwise))
						c.unchanged("target", target, tg)
						if !inPlace {
							c.unchanged("logits", logits, encode(dt, z))
						}
					})
				}
			}
		}
		s.run(t, fmt.Sprintf("%s/AllIgnored", dt), func(c *check) {
			sh := backend.Shape4{N: 2, C: 3, H: 3, W: 2}
			z := c.uniform(sh.Len(), -3, 3)
			tg := make([]byte, sh.N*sh.H*sh.W)
			for i := range tg {
				tg[i] = backend.IgnoreIndex
			}
			dlogits := c.output(dt, sh.Len())
			s.b.CrossEntropyBack(sh, dlogits, c.input(dt, z), c.inputBytes(tg), 0.5)
			c.same("dlogits", c.get(dlogits), make([]float32, sh.Len()))
		})
	}
}

var metricShapes = []backend.Shape4{
	{N: 1, C: 1, H: 1, W: 1},
	{N: 2, C: 3, H: 5, W: 7},
	{N: 3, C: 5, H: 2, W: 2},
	{N: 1, C: 2, H: 1, W: 9},
	{N: 2, C: 4, H: 12, W: 11},
}

// tiedLogits is n logits on a grid of five values, so that most pixels
// have tied classes.
func (c *check) tiedLogits(n int) []float32 {
	z := make([]float32, n)
	for i := range z {
		z[i] = float32(c.rng.IntN(5)-2) / 2
	}
	if allZero(z) {
		z[0] = 1
	}
	return z
}

func (s *suite) testConfusion(t *testing.T) {
	for _, dt := range floatTypes {
		for _, sh := range metricShapes {
			s.run(t, shapeName(dt, sh), func(c *check) {
				z := c.tiedLogits(sh.Len())
				tg := c.targets(sh.N*sh.H*sh.W, sh.C)
				for i := range tg {
					if c.rng.IntN(10) == 0 {
						tg[i] = byte(sh.C + c.rng.IntN(255-sh.C)) // not a class: not counted
					}
				}
				logits, target := c.input(dt, z), c.inputBytes(tg)
				counts := make([]int64, sh.C*sh.C)
				for i := range counts {
					counts[i] = int64(c.rng.IntN(1000))
				}
				want := append([]int64{}, counts...)
				refConfusion(sh, want, z, tg)
				s.b.Confusion(sh, counts, logits, target)
				for i := range want {
					if counts[i] != want[i] {
						c.Errorf("counts[target %d, predicted %d] = %d, want %d", i/sh.C, i%sh.C, counts[i], want[i])
					}
				}
				c.unchanged("logits", logits, encode(dt, z))
			})
		}
	}
}

func (s *suite) testArgmax(t *testing.T) {
	for _, dt := range floatTypes {
		for _, sh := range metricShapes {
			s.run(t, shapeName(dt, sh), func(c *check) {
				z := c.tiedLogits(sh.Len())
				logits := c.input(dt, z)
				classes := c.output(backend.Uint8, sh.N*sh.H*sh.W)
				s.b.Argmax(sh, classes, logits)
				c.sameBytes("classes", c.getBytes(classes), refArgmax(sh, z), 1)
			})
		}
	}
}

// lossGammas are the focal exponents checked: cross-entropy, a fractional
// one (whose (1-p)^(γ-1) is singular at p = 1) and the usual 2.
var lossGammas = []float32{0, 0.5, 2}

func (s *suite) testLossSums(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpLoss) {
		for _, sh := range lossShapes {
			for _, gamma := range lossGammas {
				s.run(t, fmt.Sprintf("%s/gamma%g", lossName(dt, sh), gamma), func(c *check) {
					z := c.uniform(sh.Len(), -sh.scale, sh.scale)
					tg := c.targets(sh.N*sh.H*sh.W, sh.C)
					logits, target := c.input(dt, z), c.inputBytes(tg)
					// LossSums adds to what is there.
					sums := make([]float64, 4*sh.C)
					start := make([]float64, len(sums))
					for i := range sums {
						sums[i] = float64(c.rng.IntN(7))
						start[i] = sums[i]
					}
					if err := s.b.LossSums(sh.Shape4, logits, target, gamma, sums); err != nil {
						c.Fatalf("error %v for valid targets", err)
					}
					want := refLossSums(sh.Shape4, f64(z), tg, float64(gamma))
					got := make([]float32, len(sums))
					for i := range want {
						want[i] += start[i]
						got[i] = float32(sums[i])
					}
					c.near("sums", got, want, tolFor(dt, tolReduction))
					for cl := range sh.C { // counts are exact
						if sums[sh.C+cl] != want[sh.C+cl] {
							c.Errorf("class %d: count %v, want %v", cl, sums[sh.C+cl], want[sh.C+cl])
						}
					}
					c.unchanged("logits", logits, encode(dt, z))
					c.unchanged("target", target, tg)
				})
			}
		}
		sh := backend.Shape4{N: 3, C: 4, H: 2, W: 3}
		for _, bad := range []byte{4, 254} {
			s.run(t, fmt.Sprintf("%s/BadTarget%d", dt, bad), func(c *check) {
				z := c.uniform(sh.Len(), -3, 3)
				tg := c.targets(sh.N*sh.H*sh.W, sh.C)
				tg[2*sh.H*sh.W+c.rng.IntN(sh.H*sh.W)] = bad
				err := s.b.LossSums(sh, c.input(dt, z), c.inputBytes(tg), 2, make([]float64, 4*sh.C))
				var te *backend.TargetError
				if !errors.As(err, &te) || te.Value != int(bad) || te.Sample != 2 || te.Classes != sh.C {
					c.Errorf("error %v, want a *backend.TargetError for value %d in sample 2", err, bad)
				}
			})
		}
	}
}

func (s *suite) testLossBack(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpLoss) {
		for _, sh := range lossShapes {
			for _, gamma := range lossGammas {
				for _, inPlace := range []bool{false, true} {
					name := fmt.Sprintf("%s/gamma%g", lossName(dt, sh), gamma)
					if inPlace {
						name += "/dlogits=logits"
					}
					s.run(t, name, func(c *check) {
						z := c.uniform(sh.Len(), -sh.scale, sh.scale)
						tg := c.targets(sh.N*sh.H*sh.W, sh.C)
						coef := make([]float32, 3*sh.C)
						for i := range coef {
							coef[i] = float32(c.rng.Float64()*2 - 0.5)
						}
						logits, target := c.input(dt, z), c.inputBytes(tg)
						dlogits := logits
						if !inPlace {
							dlogits = c.output(dt, sh.Len())
						}
						s.b.LossBack(sh.Shape4, dlogits, logits, target, gamma, coef)
						c.near("dlogits", c.get(dlogits), refLossBack(sh.Shape4, f64(z), tg, float64(gamma), f64(coef)), tolFor(dt, tolElementwise))
						c.unchanged("target", target, tg)
						if !inPlace {
							c.unchanged("logits", logits, encode(dt, z))
						}
					})
				}
			}
		}
	}
}
