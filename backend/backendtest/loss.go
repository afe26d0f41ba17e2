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

func (s *suite) crossEntropy(t *testing.T) {
	for _, dt := range s.layerTypes() {
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

func (s *suite) crossEntropyBack(t *testing.T) {
	for _, dt := range s.layerTypes() {
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

func (s *suite) confusion(t *testing.T) {
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

func (s *suite) argmax(t *testing.T) {
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
