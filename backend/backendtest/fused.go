package backendtest

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend"
)

// The fused operations give the bits of the ones they fuse, run one after
// the other by the same backend.

// fusedNormShapes are batchNormShapes and shapes whose planes are whole
// bytes of a ReLU mask (which a backend may fuse per channel).
var fusedNormShapes = append(append([]normShape{}, batchNormShapes...),
	normShape{backend.Shape4{N: 2, C: 17, H: 8, W: 8}, 0},
	normShape{backend.Shape4{N: 3, C: 4, H: 4, W: 6}, 20},
	normShape{backend.Shape4{N: 1, C: 5, H: 16, W: 40}, 0},
)

// testBatchNormReLU: BatchNormReLU gives BatchNorm's statistics and
// running statistics, then ReLU's output in place and its mask (or none),
// bit for bit.
func (s *suite) testBatchNormReLU(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpNorm) {
		for _, sh := range fusedNormShapes {
			M := sh.N * sh.H * sh.W
			for _, mode := range []struct{ reuse, update bool }{{false, true}, {false, false}, {true, false}} {
				if mode.update && M < 2 {
					continue
				}
				for _, withMask := range []bool{true, false} {
					name := fmt.Sprintf("%s/offset%g/reuse=%v,update=%v,mask=%v", shapeName(dt, sh.Shape4), sh.offset, mode.reuse, mode.update, withMask)
					s.run(t, name, func(c *check) { c.batchNormReLU(s.b, dt, sh, mode.reuse, mode.update, withMask) })
				}
			}
		}
	}
}

func (c *check) batchNormReLU(b backend.Backend, dt backend.DType, sh normShape, reuse, update, withMask bool) {
	a := backend.NormArgs{Shape4: sh.Shape4, Eps: normEps, Momentum: normMomentum}
	n := a.Len()
	x := c.normInput(sh.Shape4, sh.offset)
	in := c.input(dt, x)
	c.normParams(&a)
	rm0, rv0 := c.signed(a.C), c.uniform(a.C, 0.5, 2)
	stats0 := append(c.signed(a.C), c.uniform(a.C, 0.5, 2)...) // a recomputation's, as given
	// Each side: its own running statistics, statistics and outputs.
	type side struct {
		a                backend.NormArgs
		out, mask, stats backend.View
	}
	sides := make([]side, 2)
	for i := range sides {
		sd := &sides[i]
		sd.a = a
		sd.a.RunningMean, sd.a.RunningVar = c.input(backend.Float32, append([]float32(nil), rm0...)), c.input(backend.Float32, append([]float32(nil), rv0...))
		sd.out = c.output(dt, n)
		if withMask {
			sd.mask = c.output(backend.Uint8, (n+7)/8)
		}
		if reuse {
			sd.stats = c.input(backend.Float32, append([]float32(nil), stats0...))
		} else {
			sd.stats = c.output(backend.Float32, a.StatsLen(false))
		}
	}
	ref, got := sides[0], sides[1]
	c.b.BatchNorm(ref.a, ref.out, in, ref.stats, reuse, update)
	if withMask {
		c.b.ReLUAndMask(ref.out, ref.mask, ref.out)
	} else {
		c.b.ReLU(ref.out, ref.out)
	}
	b.BatchNormReLU(got.a, got.out, got.mask, in, got.stats, reuse, update)
	c.sameBytes("out, against BatchNorm then ReLU", c.getBytes(got.out), c.getBytes(ref.out), dt.Size())
	if withMask {
		c.sameBytes("mask", c.getBytes(got.mask), c.getBytes(ref.mask), 1)
	}
	c.sameBytes("stats", c.getBytes(got.stats), c.getBytes(ref.stats), 4)
	c.sameBytes("running mean", c.getBytes(got.a.RunningMean), c.getBytes(ref.a.RunningMean), 4)
	c.sameBytes("running var", c.getBytes(got.a.RunningVar), c.getBytes(ref.a.RunningVar), 4)
	c.unchanged("in", in, encode(dt, x))
}

// testBatchNormReLUBack: BatchNormReLUBack gives the bits of the ReLU's
// backward (from its mask or its output) then BatchNormBack in place, in
// place and not.
func (s *suite) testBatchNormReLUBack(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpNorm) {
		for _, sh := range fusedNormShapes {
			for _, fromMask := range []bool{true, false} {
				for _, inPlace := range []bool{false, true} {
					name := fmt.Sprintf("%s/offset%g/mask=%v%s", shapeName(dt, sh.Shape4), sh.offset, fromMask, inPlaceName(inPlace))
					s.run(t, name, func(c *check) { c.batchNormReLUBack(s.b, dt, sh, fromMask, inPlace) })
				}
			}
		}
	}
}

func (c *check) batchNormReLUBack(b backend.Backend, dt backend.DType, sh normShape, fromMask, inPlace bool) {
	a := backend.NormArgs{Shape4: sh.Shape4, Eps: normEps, Momentum: normMomentum}
	n := a.Len()
	x, g := c.normInput(a.Shape4, sh.offset), c.signed(n)
	in := c.input(dt, x)
	c.normParams(&a)
	stats := c.input(backend.Float32, statsOf(normSets(a, false), f64(x)))
	// The ReLU's output: a sign-mixed tensor through ReLU (zeros, and
	// signed zeros from the input's own rounding, included).
	relu := c.input(dt, c.signed(n))
	c.b.ReLU(relu, relu)
	if fromMask {
		mask := c.output(backend.Uint8, (n+7)/8)
		c.b.ReLUMask(mask, relu)
		relu = mask
	}
	dg0, db0 := c.signed(a.C), c.signed(a.C)
	refDg, refDb := c.input(backend.Float32, append([]float32(nil), dg0...)), c.input(backend.Float32, append([]float32(nil), db0...))
	gotDg, gotDb := c.input(backend.Float32, append([]float32(nil), dg0...)), c.input(backend.Float32, append([]float32(nil), db0...))
	refDin := c.input(dt, append([]float32(nil), g...))
	if fromMask {
		c.b.ReLUBackMask(refDin, refDin, relu)
	} else {
		c.b.ReLUBack(refDin, refDin, relu)
	}
	c.b.BatchNormBack(a, refDin, refDg, refDb, refDin, in, stats)
	dout := c.input(dt, g)
	din := dout
	if !inPlace {
		din = c.output(dt, n)
	}
	b.BatchNormReLUBack(a, din, gotDg, gotDb, dout, in, stats, relu)
	c.sameBytes("din, against the ReLU's backward then BatchNormBack", c.getBytes(din), c.getBytes(refDin), dt.Size())
	c.sameBytes("dgamma", c.getBytes(gotDg), c.getBytes(refDg), 4)
	c.sameBytes("dbeta", c.getBytes(gotDb), c.getBytes(refDb), 4)
	if !inPlace {
		c.unchanged("dout", dout, encode(dt, g))
	}
}

// upsampleConcatSkips are the skip widths the fused upsampling is tried
// with.
var upsampleConcatSkips = []int{1, 3}

// testUpsampleConcat: UpsampleConcat gives Upsample2 then Concat's bits.
func (s *suite) testUpsampleConcat(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpUpsample) {
		for _, sh := range upsampleShapes {
			for _, skipC := range upsampleConcatSkips {
				s.run(t, fmt.Sprintf("%s/skip%d", shapeName(dt, sh), skipC), func(c *check) {
					x, sk := c.signed(sh.Len()), c.signed(sh.N*skipC*4*sh.H*sh.W)
					in, skip := c.input(dt, x), c.input(dt, sk)
					up, want := c.output(dt, 4*sh.Len()), c.output(dt, len(sk)+4*sh.Len())
					c.b.Upsample2(sh, up, in)
					c.b.Concat(sh.N, want, skip, up)
					out := c.output(dt, len(sk)+4*sh.Len())
					s.b.UpsampleConcat(sh, out, skip, in)
					c.sameBytes("out, against Upsample2 then Concat", c.getBytes(out), c.getBytes(want), dt.Size())
					c.unchanged("in", in, encode(dt, x))
					c.unchanged("skip", skip, encode(dt, sk))
				})
			}
		}
	}
}

// testUpsampleConcatBack: UpsampleConcatBack gives Split then
// Upsample2Back's bits.
func (s *suite) testUpsampleConcatBack(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpUpsample) {
		for _, sh := range upsampleShapes {
			for _, skipC := range upsampleConcatSkips {
				s.run(t, fmt.Sprintf("%s/skip%d", shapeName(dt, sh), skipC), func(c *check) {
					skipN := sh.N * skipC * 4 * sh.H * sh.W
					g := c.signed(skipN + 4*sh.Len())
					dout := c.input(dt, g)
					wantSkip, dup, wantIn := c.output(dt, skipN), c.output(dt, 4*sh.Len()), c.output(dt, sh.Len())
					c.b.Split(sh.N, wantSkip, dup, dout)
					c.b.Upsample2Back(sh, wantIn, dup)
					dskip, din := c.output(dt, skipN), c.output(dt, sh.Len())
					s.b.UpsampleConcatBack(sh, dskip, din, dout)
					c.sameBytes("dskip, against Split", c.getBytes(dskip), c.getBytes(wantSkip), dt.Size())
					c.sameBytes("din, against Upsample2Back", c.getBytes(din), c.getBytes(wantIn), dt.Size())
					c.unchanged("dout", dout, encode(dt, g))
				})
			}
		}
	}
}
