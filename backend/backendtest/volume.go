package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
)

// pool3Cases are volumes and windows: 2x2x2 and 1x2x2 (anisotropic) over
// odd sizes (the last slice, row and column no window covers), 2x1x2,
// a single window, and a larger one with several slices per plane.
var pool3Cases = []struct {
	s backend.Shape5
	k backend.Scale3
}{
	{backend.Shape5{N: 2, C: 3, D: 3, H: 5, W: 7}, backend.Scale3{D: 2, H: 2, W: 2}},
	{backend.Shape5{N: 1, C: 3, D: 3, H: 5, W: 7}, backend.Scale3{D: 1, H: 2, W: 2}},
	{backend.Shape5{N: 1, C: 2, D: 4, H: 3, W: 5}, backend.Scale3{D: 2, H: 1, W: 2}},
	{backend.Shape5{N: 1, C: 1, D: 2, H: 2, W: 2}, backend.Scale3{D: 2, H: 2, W: 2}},
	{backend.Shape5{N: 2, C: 5, D: 8, H: 12, W: 10}, backend.Scale3{D: 2, H: 2, W: 2}},
}

// upsample3Cases are volumes and factors: 2x2x2 and 1x2x2 over odd sizes,
// single voxels and slices (the clamped edges), and a larger one.
var upsample3Cases = []struct {
	s backend.Shape5
	f backend.Scale3
}{
	{backend.Shape5{N: 2, C: 3, D: 3, H: 5, W: 7}, backend.Scale3{D: 2, H: 2, W: 2}},
	{backend.Shape5{N: 1, C: 3, D: 3, H: 5, W: 7}, backend.Scale3{D: 1, H: 2, W: 2}},
	{backend.Shape5{N: 1, C: 1, D: 1, H: 1, W: 1}, backend.Scale3{D: 2, H: 2, W: 2}},
	{backend.Shape5{N: 2, C: 2, D: 1, H: 4, W: 1}, backend.Scale3{D: 2, H: 2, W: 2}},
	{backend.Shape5{N: 1, C: 2, D: 4, H: 3, W: 2}, backend.Scale3{D: 2, H: 1, W: 2}},
	{backend.Shape5{N: 2, C: 5, D: 6, H: 9, W: 12}, backend.Scale3{D: 2, H: 2, W: 2}},
}

func shape5Name(dt backend.DType, s backend.Shape5, f backend.Scale3) string {
	return fmt.Sprintf("%s/N%dC%dD%dH%dW%d_%dx%dx%d", dt, s.N, s.C, s.D, s.H, s.W, f.D, f.H, f.W)
}

func (s *suite) testMaxPool3(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpPool) {
		for _, tc := range pool3Cases {
			sh, k := tc.s, tc.k
			for _, withArgmax := range []bool{true, false} {
				name := shape5Name(dt, sh, k)
				if withArgmax {
					name += "/argmax"
				} else {
					name += "/noargmax"
				}
				s.run(t, name, func(c *check) {
					x := c.poolInput(sh.Len())
					in := c.input(dt, x)
					on := sh.Pooled(k).Len()
					out := c.output(dt, on)
					var argmax backend.View
					if withArgmax {
						argmax = c.output(backend.Uint8, on)
					}
					s.b.MaxPool3(sh, k, out, argmax, in)
					want, pos, nans := refMaxPool3(sh, k, x)
					c.same("out", c.get(out), want)
					c.unchanged("in", in, encode(dt, x))
					if !withArgmax {
						return
					}
					o := sh.Pooled(k)
					c.sameArgmax(c.getBytes(argmax), pos, nans, k.Volume(), func(i, q int) float32 {
						p, od, oh, ow := i/(o.D*o.H*o.W), i/(o.H*o.W)%o.D, i/o.W%o.H, i%o.W
						kd, kh, kw := q/(k.H*k.W), q/k.W%k.H, q%k.W
						return x[at5(1, sh.D, sh.H, sh.W, p, 0, od*k.D+kd, oh*k.H+kh, ow*k.W+kw)]
					})
				})
			}
		}
	}
}

func (s *suite) testMaxPool3Back(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpPool) {
		for _, tc := range pool3Cases {
			sh, k := tc.s, tc.k
			s.run(t, shape5Name(dt, sh, k), func(c *check) {
				on := sh.Pooled(k).Len()
				g := c.signed(on)
				pos := make([]byte, on)
				for i := range pos {
					pos[i] = byte(c.rng.IntN(k.Volume()))
				}
				dout, argmax := c.input(dt, g), c.inputBytes(pos)
				din := c.output(dt, sh.Len())
				s.b.MaxPool3Back(sh, k, din, dout, argmax)
				c.same("din", c.get(din), refMaxPool3Back(sh, k, g, pos))
				c.unchanged("argmax", argmax, pos)
			})
		}
	}
}

func (s *suite) testUpsample3(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpUpsample) {
		for _, tc := range upsample3Cases {
			sh, f := tc.s, tc.f
			s.run(t, shape5Name(dt, sh, f), func(c *check) {
				x := c.signed(sh.Len())
				in := c.input(dt, x)
				out := c.output(dt, sh.Scaled(f).Len())
				s.b.Upsample3(sh, f, out, in)
				c.near("out", c.get(out), refUpsample3(sh, f, f64(x)), tolFor(dt, tolElementwise))
				c.unchanged("in", in, encode(dt, x))
			})
		}
	}
}

// testUpsample3Back checks Upsample3Back against the reference and, on the
// backend's own results, the adjoint identity <Up(x), g> = <x, UpBack(g)>.
func (s *suite) testUpsample3Back(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpUpsample) {
		for _, tc := range upsample3Cases {
			sh, f := tc.s, tc.f
			s.run(t, shape5Name(dt, sh, f), func(c *check) {
				on := sh.Scaled(f).Len()
				x, g := c.signed(sh.Len()), c.signed(on)
				in, dout := c.input(dt, x), c.input(dt, g)
				din := c.output(dt, sh.Len())
				s.b.Upsample3Back(sh, f, din, dout)
				d := c.get(din)
				c.near("din", d, refUpsample3Back(sh, f, f64(g)), tolFor(dt, tolElementwise))
				c.unchanged("dout", dout, encode(dt, g))

				out := c.output(dt, on)
				s.b.Upsample3(sh, f, out, in)
				y := c.get(out)
				var lhs, rhs, mag float64
				for i := range y {
					lhs += float64(y[i]) * float64(g[i])
					mag += math.Abs(float64(y[i]) * float64(g[i]))
				}
				for i := range x {
					rhs += float64(x[i]) * float64(d[i])
					mag += math.Abs(float64(x[i]) * float64(d[i]))
				}
				tol := tolFor(dt, tolElementwise)
				if e := math.Abs(lhs-rhs) / (1 + mag); e > tol {
					c.Errorf("<Upsample3(x), g> = %v but <x, Upsample3Back(g)> = %v (error %.3g, tol %.3g)", lhs, rhs, e, tol)
				}
			})
		}
	}
}
