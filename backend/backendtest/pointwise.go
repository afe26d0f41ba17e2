package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
)

// Bit-level views of float values, for the operations that must keep or
// produce exact patterns (ReLU and its backward).

// patterns decodes a float view's bytes into one bit pattern per value.
func patterns(dt backend.DType, b []byte) []uint32 {
	if dt == backend.Float32 {
		return decode32(b)
	}
	h := decode16(b)
	out := make([]uint32, len(h))
	for i, v := range h {
		out[i] = uint32(v)
	}
	return out
}

// valueOf is the float32 value of pattern p of dt.
func valueOf(dt backend.DType, p uint32) float32 {
	if dt == backend.Float32 {
		return math.Float32frombits(p)
	}
	return widen(dt, uint16(p))
}

// unpattern encodes bit patterns of dt as bytes.
func unpattern(dt backend.DType, p []uint32) []byte {
	if dt == backend.Float32 {
		return encode32(p)
	}
	h := make([]uint16, len(p))
	for i, v := range p {
		h[i] = uint16(v)
	}
	return encode16(h)
}

// specialPatterns are the bit patterns of +0, -0, ±Inf, NaNs of both signs
// (quiet, and with only a low payload bit), the smallest subnormals and the
// largest finite values of dt.
func specialPatterns(dt backend.DType) []uint32 {
	switch dt {
	case backend.Float32:
		return []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001,
			1, 0x80000001, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000}
	case backend.Float16:
		return []uint32{0, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfc01, 1, 0x8001, 0x7bff, 0xfbff, 0x3c00, 0xbc00}
	}
	return []uint32{0, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0xff81, 1, 0x8001, 0x7f7f, 0xff7f, 0x3f80, 0xbf80}
}

// mixedPatterns is n patterns of dt: the specials, then alternately random
// bit patterns (every class of value) and values uniform in [-1, 1).
func (c *check) mixedPatterns(dt backend.DType, n int) []uint32 {
	p := specialPatterns(dt)
	for len(p) < n {
		if len(p)%2 == 0 {
			r := c.rng.Uint32()
			if dt != backend.Float32 {
				r &= 0xffff
			}
			p = append(p, r)
			continue
		}
		f := float32(2*c.rng.Float64() - 1)
		if dt == backend.Float32 {
			p = append(p, math.Float32bits(f))
		} else {
			p = append(p, uint32(narrow(dt, f)))
		}
	}
	return p[:n]
}

func (s *suite) testReLU(t *testing.T) {
	for _, dt := range floatTypes {
		for _, n := range []int{14, 101, 40001} {
			for _, inPlace := range []bool{false, true} {
				name := fmt.Sprintf("%s/n%d", dt, n)
				if inPlace {
					name += "/out=in"
				} else {
					name += "/out"
				}
				s.run(t, name, func(c *check) {
					x := c.mixedPatterns(dt, n)
					in := c.alloc(dt, n)
					c.b.Upload(in, unpattern(dt, x))
					out := in
					if !inPlace {
						out = c.output(dt, n)
					}
					s.b.ReLU(out, in)
					got := patterns(dt, c.getBytes(out))
					bad := 0
					for i, p := range x {
						v, g := valueOf(dt, p), got[i]
						var ok bool
						var want string
						switch {
						case v != v:
							ok, want = valueOf(dt, g) != valueOf(dt, g), "NaN"
						case v > 0:
							ok, want = g == p, fmt.Sprintf("%#x", p)
						default:
							ok, want = g == 0, "+0"
						}
						if !ok {
							bad++
							if bad <= 5 {
								c.Errorf("relu(%#x = %v) = %#x, want %s", p, v, g, want)
							}
						}
					}
					if bad > 0 {
						c.Errorf("%d of %d values wrong", bad, n)
					}
					if !inPlace {
						c.unchanged("in", in, unpattern(dt, x))
					}
				})
			}
		}
	}
}

func (s *suite) testReLUBack(t *testing.T) {
	for _, dt := range floatTypes {
		for _, n := range []int{14, 101, 40001} {
			for _, inPlace := range []bool{false, true} {
				name := fmt.Sprintf("%s/n%d", dt, n)
				if inPlace {
					name += "/din=dout"
				} else {
					name += "/din"
				}
				s.run(t, name, func(c *check) {
					y := c.mixedPatterns(dt, n)
					g := c.mixedPatterns(dt, n+7)[7:] // not aligned with y's specials
					out, dout := c.alloc(dt, n), c.alloc(dt, n)
					c.b.Upload(out, unpattern(dt, y))
					c.b.Upload(dout, unpattern(dt, g))
					din := dout
					if !inPlace {
						din = c.output(dt, n)
					}
					s.b.ReLUBack(din, dout, out)
					got := patterns(dt, c.getBytes(din))
					bad := 0
					for i, p := range y {
						pass := valueOf(dt, p) > 0
						ok := got[i] == g[i]
						if !pass {
							ok = valueOf(dt, got[i]) == 0
						}
						if !ok {
							bad++
							if bad <= 5 {
								c.Errorf("out %#x (%v), dout %#x: din %#x, want dout where out > 0, else 0", p, valueOf(dt, p), g[i], got[i])
							}
						}
					}
					if bad > 0 {
						c.Errorf("%d of %d values wrong", bad, n)
					}
					c.unchanged("out", out, unpattern(dt, y))
				})
			}
		}
	}
}

// poolShapes have odd heights and widths (a last row or column no window
// covers) and a size too large for a single block of work.
var poolShapes = []backend.Shape4{
	{N: 2, C: 3, H: 5, W: 7},
	{N: 1, C: 1, H: 2, W: 2},
	{N: 3, C: 5, H: 3, W: 3},
	{N: 1, C: 2, H: 7, W: 4},
	{N: 2, C: 1, H: 4, W: 5},
	{N: 1, C: 1, H: 2, W: 9},
	{N: 2, C: 17, H: 24, W: 23},
}

// poolInput is x with values on a grid of nine (ties in most windows),
// signed zeros, some -Inf and a few NaNs (some windows with several).
func (c *check) poolInput(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch r := c.rng.IntN(40); {
		case r == 0:
			x[i] = float32(math.NaN())
		case r == 1:
			x[i] = float32(math.Inf(-1))
		case r == 2:
			x[i] = float32(math.Copysign(0, -1))
		default:
			x[i] = float32(c.rng.IntN(9)-4) / 4
		}
	}
	if allZero(x) {
		x[0] = 1
	}
	return x
}

func (s *suite) testMaxPool2(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpPool) {
		for _, sh := range poolShapes {
			for _, withArgmax := range []bool{true, false} {
				name := shapeName(dt, sh)
				if withArgmax {
					name += "/argmax"
				} else {
					name += "/noargmax"
				}
				s.run(t, name, func(c *check) {
					x := c.poolInput(sh.Len())
					in := c.input(dt, x)
					on := sh.N * sh.C * (sh.H / 2) * (sh.W / 2)
					out := c.output(dt, on)
					var argmax backend.View
					if withArgmax {
						argmax = c.output(backend.Uint8, on)
					}
					s.b.MaxPool2(sh, out, argmax, in)
					want, pos, nans := refMaxPool(sh, x)
					c.same("out", c.get(out), want)
					c.unchanged("in", in, encode(dt, x))
					if !withArgmax {
						return
					}
					c.sameArgmax(c.getBytes(argmax), pos, nans, 4, func(o, k int) float32 {
						p, oy, ox := o/((sh.H/2)*(sh.W/2)), o/(sh.W/2)%(sh.H/2), o%(sh.W/2)
						return x[p*sh.H*sh.W+(2*oy+k/2)*sh.W+2*ox+k%2]
					})
				})
			}
		}
	}
}

// sameArgmax checks a max pool's argmax against pos, the first maximum's
// position in each window: where the window holds several NaNs (nans), a
// position of any of them (at(o, k) is window o's input at position k,
// of window positions).
func (c *check) sameArgmax(got, pos []byte, nans []bool, window int, at func(o, k int) float32) {
	bad := 0
	for o, k := range got {
		ok := k == pos[o]
		if nans[o] && int(k) < window {
			v := at(o, int(k))
			ok = v != v
		}
		if !ok {
			bad++
			if bad <= 5 {
				c.Errorf("argmax[%d] = %d, want %d (the first maximum, a NaN winning)", o, k, pos[o])
			}
		}
	}
	if bad > 0 {
		c.Errorf("%d of %d positions wrong", bad, len(got))
	}
}

func (s *suite) testMaxPool2Back(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpPool) {
		for _, sh := range poolShapes {
			s.run(t, shapeName(dt, sh), func(c *check) {
				on := sh.N * sh.C * (sh.H / 2) * (sh.W / 2)
				g := c.signed(on)
				pos := make([]byte, on)
				for i := range pos {
					pos[i] = byte(c.rng.IntN(4))
				}
				dout, argmax := c.input(dt, g), c.inputBytes(pos)
				din := c.output(dt, sh.Len())
				s.b.MaxPool2Back(sh, din, dout, argmax)
				c.same("din", c.get(din), refMaxPoolBack(sh, g, pos))
				c.unchanged("argmax", argmax, pos)
			})
		}
	}
}

var upsampleShapes = []backend.Shape4{
	{N: 1, C: 1, H: 1, W: 1},
	{N: 2, C: 3, H: 1, W: 5},
	{N: 1, C: 2, H: 4, W: 1},
	{N: 2, C: 1, H: 2, W: 3},
	{N: 1, C: 3, H: 7, W: 6},
	{N: 3, C: 2, H: 5, W: 5},
	{N: 2, C: 17, H: 12, W: 11},
}

func (s *suite) testUpsample2(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpUpsample) {
		for _, sh := range upsampleShapes {
			s.run(t, shapeName(dt, sh), func(c *check) {
				x := c.signed(sh.Len())
				in := c.input(dt, x)
				out := c.output(dt, 4*sh.Len())
				s.b.Upsample2(sh, out, in)
				c.near("out", c.get(out), refUpsample(sh, f64(x)), tolFor(dt, tolElementwise))
			})
		}
	}
}

// testUpsample2Back checks Upsample2Back against the reference and, on the
// backend's own results, the adjoint identity <Up(x), g> = <x, UpBack(g)>
// in float64 (relative to the sums of the terms' magnitudes).
func (s *suite) testUpsample2Back(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpUpsample) {
		for _, sh := range upsampleShapes {
			s.run(t, shapeName(dt, sh), func(c *check) {
				x, g := c.signed(sh.Len()), c.signed(4*sh.Len())
				in, dout := c.input(dt, x), c.input(dt, g)
				din := c.output(dt, sh.Len())
				s.b.Upsample2Back(sh, din, dout)
				d := c.get(din)
				c.near("din", d, refUpsampleBack(sh, f64(g)), tolFor(dt, tolElementwise))
				c.unchanged("dout", dout, encode(dt, g))

				out := c.output(dt, 4*sh.Len())
				s.b.Upsample2(sh, out, in)
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
				e := math.Abs(lhs-rhs) / (1 + mag)
				if e > tol {
					c.Errorf("<Upsample2(x), g> = %v but <x, Upsample2Back(g)> = %v (error %.3g, tol %.3g)", lhs, rhs, e, tol)
				}
				c.Logf("adjoint identity: error %.3g (tol %.3g)", e, tol)
			})
		}
	}
}

// concatCases are (samples, skip channels, up channels, pixels per channel).
var concatCases = [][4]int{
	{1, 1, 3, 5}, {2, 3, 1, 1}, {3, 5, 2, 7}, {2, 1, 1, 1}, {3, 3, 5, 3},
}

func (s *suite) testConcat(t *testing.T) {
	for _, dt := range allTypes {
		for _, cs := range concatCases {
			n, sc, uc, hw := cs[0], cs[1], cs[2], cs[3]
			s.run(t, fmt.Sprintf("%s/N%d_skip%d_up%d_HW%d", dt, n, sc, uc, hw), func(c *check) {
				size := dt.Size()
				sb, ub := c.randomBytes(n*sc*hw*size), c.randomBytes(n*uc*hw*size)
				skip, up := c.alloc(dt, n*sc*hw), c.alloc(dt, n*uc*hw)
				c.b.Upload(skip, sb)
				c.b.Upload(up, ub)
				out := c.output(dt, n*(sc+uc)*hw)
				s.b.Concat(n, out, skip, up)
				c.sameBytes("out", c.getBytes(out), refConcat(n, sb, ub), size)
				c.unchanged("skip", skip, sb)
				c.unchanged("up", up, ub)
			})
		}
	}
}

func (s *suite) testSplit(t *testing.T) {
	for _, dt := range allTypes {
		for _, cs := range concatCases {
			n, sc, uc, hw := cs[0], cs[1], cs[2], cs[3]
			s.run(t, fmt.Sprintf("%s/N%d_skip%d_up%d_HW%d", dt, n, sc, uc, hw), func(c *check) {
				size := dt.Size()
				sb, ub := c.randomBytes(n*sc*hw*size), c.randomBytes(n*uc*hw*size)
				gb := refConcat(n, sb, ub)
				dout := c.alloc(dt, n*(sc+uc)*hw)
				c.b.Upload(dout, gb)
				dskip, dup := c.output(dt, n*sc*hw), c.output(dt, n*uc*hw)
				s.b.Split(n, dskip, dup, dout)
				c.sameBytes("dskip", c.getBytes(dskip), sb, size)
				c.sameBytes("dup", c.getBytes(dup), ub, size)
				c.unchanged("dout", dout, gb)
			})
		}
	}
}

func (s *suite) testAdd(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpAdd) {
		for _, n := range []int{1, 7, 1000, 40000} {
			for _, into := range []string{"out", "out=a", "out=b"} {
				s.run(t, fmt.Sprintf("%s/n%d/%s", dt, n, into), func(c *check) {
					x, y := c.uniform(n, -4, 4), c.signed(n)
					a, b := c.input(dt, x), c.input(dt, y)
					var out backend.View
					switch into {
					case "out":
						out = c.output(dt, n)
					case "out=a":
						out = a
					case "out=b":
						out = b
					}
					s.b.Add(out, a, b)
					if dt == backend.Float32 {
						// one float32 addition: exact
						want := make([]float32, n)
						for i := range want {
							want[i] = x[i] + y[i]
						}
						c.same("out", c.get(out), want)
						return
					}
					want := make([]float64, n)
					for i := range want {
						want[i] = float64(x[i]) + float64(y[i])
					}
					c.near("out", c.get(out), want, tolFor(dt, tolExact))
				})
			}
		}
	}
}

// testReLUMask: ReLUMask sets exactly the bits of the values ReLUBack
// passes (positive, non-zero, not NaN; spare bits 0), at lengths that end
// mid-byte.
func (s *suite) testReLUMask(t *testing.T) {
	for _, dt := range floatTypes {
		for _, n := range []int{14, 101, 40001} {
			s.run(t, fmt.Sprintf("%s/n%d", dt, n), func(c *check) {
				y := c.mixedPatterns(dt, n)
				out, mask := c.alloc(dt, n), c.output(backend.Uint8, (n+7)/8)
				c.b.Upload(out, unpattern(dt, y))
				s.b.ReLUMask(mask, out)
				c.maskBits(mask, dt, y)
				c.unchanged("out", out, unpattern(dt, y))
			})
		}
	}
}

// maskBits checks that mask has bit i set exactly where y[i] (patterns of
// dt) is positive, non-zero and not NaN.
func (c *check) maskBits(mask backend.View, dt backend.DType, y []uint32) {
	c.Helper()
	bits := c.getBytes(mask)
	for i := range 8 * len(bits) {
		set := bits[i/8]>>(i%8)&1 == 1
		if want := i < len(y) && valueOf(dt, y[i]) > 0; set != want {
			c.Errorf("bit %d of %d values (%v) is %v, want %v", i, len(y), valueOf(dt, y[min(i, len(y)-1)]), set, want)
			return
		}
	}
}

// maskCases runs f as a case of each float type and of lengths that end
// mid-byte, with the output apart from the input, then the same view (a
// case named alias).
func (s *suite) maskCases(t *testing.T, alias string, f func(c *check, dt backend.DType, n int, inPlace bool)) {
	for _, dt := range floatTypes {
		for _, n := range []int{14, 101, 40001} {
			for _, inPlace := range []bool{false, true} {
				name := fmt.Sprintf("%s/n%d", dt, n)
				if inPlace {
					name += "/" + alias
				}
				s.run(t, name, func(c *check) { f(c, dt, n, inPlace) })
			}
		}
	}
}

// testReLUBackMask: ReLUBackMask with ReLUMask's mask of out gives
// ReLUBack's bits, in place and not.
func (s *suite) testReLUBackMask(t *testing.T) {
	s.maskCases(t, "din=dout", func(c *check, dt backend.DType, n int, inPlace bool) {
		y := c.mixedPatterns(dt, n)
		g := c.mixedPatterns(dt, n+7)[7:]
		out, mask := c.alloc(dt, n), c.output(backend.Uint8, (n+7)/8)
		c.b.Upload(out, unpattern(dt, y))
		s.b.ReLUMask(mask, out)
		bits := c.getBytes(mask)
		want := c.output(dt, n)
		dout := c.alloc(dt, n)
		c.b.Upload(dout, unpattern(dt, g))
		s.b.ReLUBack(want, dout, out)
		din := dout
		if !inPlace {
			din = c.output(dt, n)
		}
		s.b.ReLUBackMask(din, dout, mask)
		c.sameBytes("din from the mask, against ReLUBack's", c.getBytes(din), c.getBytes(want), dt.Size())
		c.unchanged("mask", mask, bits)
	})
}

// testReLUAndMask: ReLUAndMask writes ReLU's bits into out and sets
// exactly the mask bits of the values ReLUBack passes, in place and not.
func (s *suite) testReLUAndMask(t *testing.T) {
	s.maskCases(t, "out=in", func(c *check, dt backend.DType, n int, inPlace bool) {
		x := c.mixedPatterns(dt, n)
		in, want, mask := c.alloc(dt, n), c.output(dt, n), c.output(backend.Uint8, (n+7)/8)
		c.b.Upload(in, unpattern(dt, x))
		s.b.ReLU(want, in)
		out := in
		if !inPlace {
			out = c.output(dt, n)
		}
		s.b.ReLUAndMask(out, mask, in)
		y := c.getBytes(out)
		c.sameBytes("out, against ReLU's", y, c.getBytes(want), dt.Size())
		c.maskBits(mask, dt, patterns(dt, y))
		if !inPlace {
			c.unchanged("in", in, unpattern(dt, x))
		}
	})
}
