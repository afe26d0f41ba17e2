package backendtest

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend"
)

const (
	normEps      = 1e-5
	normMomentum = 0.1
)

// normShape is a norm case: the activation's shape and an offset added to
// every channel's mean (a large one tests that the variance does not come
// from a cancelling E[x²]-E[x]² in float32).
type normShape struct {
	backend.Shape4
	offset float64
}

var batchNormShapes = []normShape{
	{backend.Shape4{N: 2, C: 3, H: 5, W: 7}, 0},
	{backend.Shape4{N: 1, C: 5, H: 3, W: 3}, 0},
	{backend.Shape4{N: 3, C: 1, H: 2, W: 1}, 0},
	{backend.Shape4{N: 1, C: 3, H: 1, W: 2}, 0},
	{backend.Shape4{N: 4, C: 2, H: 1, W: 1}, 0},
	{backend.Shape4{N: 1, C: 3, H: 1, W: 1}, 0}, // one value per channel: xhat = 0 (no update: PyTorch refuses to train on it)
	{backend.Shape4{N: 2, C: 2, H: 4, W: 5}, 50},
	{backend.Shape4{N: 2, C: 17, H: 12, W: 11}, 0},
}

type groupCase struct {
	backend.Shape4
	groups []int // 1, middle values, C
}

var groupNormShapes = []groupCase{
	{backend.Shape4{N: 2, C: 6, H: 3, W: 5}, []int{1, 2, 3, 6}},
	{backend.Shape4{N: 3, C: 4, H: 2, W: 1}, []int{1, 2, 4}},
	{backend.Shape4{N: 1, C: 1, H: 5, W: 7}, []int{1}},
	{backend.Shape4{N: 2, C: 4, H: 1, W: 1}, []int{1, 2, 4}}, // groups of one value at G=C
	{backend.Shape4{N: 2, C: 16, H: 12, W: 11}, []int{1, 4, 16}},
}

func shapeName(dt backend.DType, s backend.Shape4) string {
	return fmt.Sprintf("%s/N%dC%dH%dW%d", dt, s.N, s.C, s.H, s.W)
}

// normInput is x with each channel shifted and scaled at random (means in
// offset±2, spreads 0.5 to 2).
func (c *check) normInput(s backend.Shape4, offset float64) []float32 {
	off, scale := c.uniform(s.C, offset-2, offset+2), c.uniform(s.C, 0.5, 2)
	x := c.signed(s.Len())
	for i := range x {
		ch := channel(s, i)
		x[i] = off[ch] + scale[ch]*x[i]
	}
	return x
}

// normParams makes gamma and beta (fp32 inputs) and returns their values.
func (c *check) normParams(a *backend.NormArgs) (gamma, beta []float32) {
	gamma, beta = c.uniform(a.C, -1.5, 1.5), c.signed(a.C)
	a.Gamma, a.Beta = c.input(backend.Float32, gamma), c.input(backend.Float32, beta)
	return gamma, beta
}

// statsOf is the saved statistics (mean, then invstd) of x as float32.
func statsOf(sets [][]int, x []float64) []float32 {
	mean, variance := refNormStats(sets, x)
	inv := invstd(variance, normEps)
	out := make([]float32, 0, 2*len(sets))
	for _, m := range mean {
		out = append(out, float32(m))
	}
	for _, v := range inv {
		out = append(out, float32(v))
	}
	return out
}

// halves splits saved statistics into mean and invstd as float64.
func halves(stats []float32) (mean, inv []float64) {
	return f64(stats[:len(stats)/2]), f64(stats[len(stats)/2:])
}

func (s *suite) testBatchNorm(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpNorm) {
		for _, sh := range batchNormShapes {
			M := sh.N * sh.H * sh.W
			for _, mode := range []struct{ reuse, update bool }{{false, true}, {false, false}, {true, false}} {
				if mode.update && M < 2 {
					continue
				}
				name := fmt.Sprintf("%s/offset%g/reuse=%v,update=%v", shapeName(dt, sh.Shape4), sh.offset, mode.reuse, mode.update)
				s.run(t, name, func(c *check) { c.batchNorm(dt, sh, mode.reuse, mode.update) })
			}
		}
	}
}

func (c *check) batchNorm(dt backend.DType, sh normShape, reuse, update bool) {
	a := backend.NormArgs{Shape4: sh.Shape4, Eps: normEps, Momentum: normMomentum}
	x := c.normInput(sh.Shape4, sh.offset)
	in := c.input(dt, x)
	gamma, beta := c.normParams(&a)
	rm0, rv0 := c.signed(a.C), c.uniform(a.C, 0.5, 2)
	a.RunningMean, a.RunningVar = c.input(backend.Float32, rm0), c.input(backend.Float32, rv0)
	out := c.output(dt, a.Len())
	sets := normSets(a, false)
	var stats backend.View
	var given []float32
	if reuse {
		// statistics unrelated to x: a recomputation must use them as given
		given = append(c.signed(a.C), c.uniform(a.C, 0.5, 2)...)
		stats = c.input(backend.Float32, given)
	} else {
		stats = c.output(backend.Float32, a.StatsLen(false))
	}
	c.b.BatchNorm(a, out, in, stats, reuse, update)

	var mean, inv []float64
	var variance []float64
	if reuse {
		mean, inv = halves(given)
		c.unchanged("stats", stats, encode(backend.Float32, given))
	} else {
		mean, variance = refNormStats(sets, f64(x))
		inv = invstd(variance, a.Eps)
		got := c.get(stats)
		c.near("stats mean", got[:a.C], mean, tolReduction)
		c.near("stats invstd", got[a.C:], inv, tolReduction)
	}
	tol := tolElementwise
	if !reuse {
		tol = tolReduction // out carries the error of the statistics
	}
	c.near("out", c.get(out), refNormApply(a.Shape4, sets, f64(x), mean, inv, f64(gamma), f64(beta)), tolFor(dt, tol))
	if update {
		M := float64(a.N * a.H * a.W)
		wantM, wantV := make([]float64, a.C), make([]float64, a.C)
		for ch := range wantM {
			wantM[ch] = (1-a.Momentum)*float64(rm0[ch]) + a.Momentum*mean[ch]
			wantV[ch] = (1-a.Momentum)*float64(rv0[ch]) + a.Momentum*variance[ch]*M/(M-1)
		}
		c.near("running mean", c.get(a.RunningMean), wantM, tolReduction)
		c.near("running var (unbiased)", c.get(a.RunningVar), wantV, tolReduction)
	} else {
		c.unchanged("running mean", a.RunningMean, encode(backend.Float32, rm0))
		c.unchanged("running var", a.RunningVar, encode(backend.Float32, rv0))
	}
	c.unchanged("in", in, encode(dt, x))
}

func (s *suite) testBatchNormEval(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpNorm) {
		for _, sh := range batchNormShapes {
			s.run(t, fmt.Sprintf("%s/offset%g", shapeName(dt, sh.Shape4), sh.offset), func(c *check) {
				a := backend.NormArgs{Shape4: sh.Shape4, Eps: normEps, Momentum: normMomentum}
				x := c.normInput(sh.Shape4, sh.offset)
				in := c.input(dt, x)
				gamma, beta := c.normParams(&a)
				rm, rv := c.uniform(a.C, sh.offset-2, sh.offset+2), c.uniform(a.C, 0.25, 4)
				a.RunningMean, a.RunningVar = c.input(backend.Float32, rm), c.input(backend.Float32, rv)
				out := c.output(dt, a.Len())
				s.b.BatchNormEval(a, out, in)
				sets := normSets(a, false)
				c.near("out", c.get(out), refNormApply(a.Shape4, sets, f64(x), f64(rm), invstd(f64(rv), a.Eps), f64(gamma), f64(beta)), tolFor(dt, tolElementwise))
				c.unchanged("running mean", a.RunningMean, encode(backend.Float32, rm))
				c.unchanged("running var", a.RunningVar, encode(backend.Float32, rv))
			})
		}
	}
}

func inPlaceName(inPlace bool) string {
	if inPlace {
		return "/din=dout"
	}
	return "/din"
}

func (s *suite) testBatchNormBack(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpNorm) {
		for _, sh := range batchNormShapes {
			for _, inPlace := range []bool{false, true} {
				s.run(t, fmt.Sprintf("%s/offset%g%s", shapeName(dt, sh.Shape4), sh.offset, inPlaceName(inPlace)), func(c *check) {
					a := backend.NormArgs{Shape4: sh.Shape4, Eps: normEps, Momentum: normMomentum}
					c.normBack(dt, a, false, sh.offset, inPlace)
				})
			}
		}
	}
}

// normBack checks BatchNormBack (group false) or GroupNormBack with the
// statistics of x as saved by a forward pass.
func (c *check) normBack(dt backend.DType, a backend.NormArgs, group bool, offset float64, inPlace bool) {
	x, g := c.normInput(a.Shape4, offset), c.signed(a.Len())
	in, dout := c.input(dt, x), c.input(dt, g)
	gamma, _ := c.normParams(&a)
	dg0, db0 := c.signed(a.C), c.signed(a.C)
	dgamma, dbeta := c.input(backend.Float32, dg0), c.input(backend.Float32, db0)
	sets := normSets(a, group)
	saved := statsOf(sets, f64(x))
	stats := c.input(backend.Float32, saved)
	din := dout
	if !inPlace {
		din = c.output(dt, a.Len())
	}
	if group {
		c.b.GroupNormBack(a, din, dgamma, dbeta, dout, in, stats)
	} else {
		c.b.BatchNormBack(a, din, dgamma, dbeta, dout, in, stats)
	}
	mean, inv := halves(saved)
	wantDg, wantDb := f64(dg0), f64(db0)
	wantDin := refNormBack(a.Shape4, sets, wantDg, wantDb, f64(g), f64(x), mean, inv, f64(gamma))
	c.near("din", c.get(din), wantDin, tolFor(dt, tolReduction))
	c.near("dgamma (accumulated)", c.get(dgamma), wantDg, tolReduction)
	c.near("dbeta (accumulated)", c.get(dbeta), wantDb, tolReduction)
	c.unchanged("stats", stats, encode(backend.Float32, saved))
	if !inPlace {
		c.unchanged("dout", dout, encode(dt, g))
	}
}

func (s *suite) testGroupNorm(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpNorm) {
		for _, sh := range groupNormShapes {
			for _, groups := range sh.groups {
				for _, reuse := range []bool{false, true} {
					s.run(t, fmt.Sprintf("%s/G%d/reuse=%v", shapeName(dt, sh.Shape4), groups, reuse), func(c *check) {
						a := backend.NormArgs{Shape4: sh.Shape4, Groups: groups, Eps: normEps}
						x := c.normInput(a.Shape4, 0)
						in := c.input(dt, x)
						gamma, beta := c.normParams(&a)
						out := c.output(dt, a.Len())
						sets := normSets(a, true)
						ng := a.N * groups
						var stats backend.View
						var given []float32
						if reuse {
							given = append(c.signed(ng), c.uniform(ng, 0.5, 2)...)
							stats = c.input(backend.Float32, given)
						} else {
							stats = c.output(backend.Float32, a.StatsLen(true))
						}
						c.b.GroupNorm(a, out, in, stats, reuse)
						var mean, inv []float64
						tol := tolElementwise
						if reuse {
							mean, inv = halves(given)
							c.unchanged("stats", stats, encode(backend.Float32, given))
						} else {
							var variance []float64
							mean, variance = refNormStats(sets, f64(x))
							inv = invstd(variance, a.Eps)
							got := c.get(stats)
							c.near("stats mean", got[:ng], mean, tolReduction)
							c.near("stats invstd", got[ng:], inv, tolReduction)
							tol = tolReduction
						}
						c.near("out", c.get(out), refNormApply(a.Shape4, sets, f64(x), mean, inv, f64(gamma), f64(beta)), tolFor(dt, tol))
						c.unchanged("in", in, encode(dt, x))
					})
				}
			}
		}
	}
}

func (s *suite) testGroupNormBack(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpNorm) {
		for _, sh := range groupNormShapes {
			for _, groups := range sh.groups {
				for _, inPlace := range []bool{false, true} {
					s.run(t, fmt.Sprintf("%s/G%d%s", shapeName(dt, sh.Shape4), groups, inPlaceName(inPlace)), func(c *check) {
						a := backend.NormArgs{Shape4: sh.Shape4, Groups: groups, Eps: normEps}
						c.normBack(dt, a, true, 0, inPlace)
					})
				}
			}
		}
	}
}
