package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// The 3D pooling and up-sampling run in parallel over planes (n, c) and,
// within one, an output slice at a time: a 16-bit plane's input slices
// are widened for it, and its output narrowed, in a worker's scratch of
// a few slices (fp32 is read and written in place).

// checkPool3 panics unless k is a pooling window for s and the views have
// their sizes.
func checkPool3(op string, s backend.Shape5, k backend.Scale3, big, small, argmax backend.View) {
	o := s.Pooled(k)
	if s.N <= 0 || s.C <= 0 || s.D <= 0 || s.H <= 0 || s.W <= 0 || k.D < 1 || k.H < 1 || k.W < 1 || k.Volume() > 256 ||
		big.Len != s.Len() || small.Len != o.Len() || !argmax.None() && (argmax.Len != o.Len() || argmax.DT != backend.Uint8) {
		panic(fmt.Sprintf("backend/cpu: %s %+v by %+v of %v, %v, argmax %v", op, s, k, big, small, argmax))
	}
}

// MaxPool3 takes each window's maximum, scanning it in order (kd, kh, kw)
// and keeping a value greater than the best or a NaN, as PyTorch's
// max_pool3d does.
func (c CPU) MaxPool3(s backend.Shape5, k backend.Scale3, out, argmax, in backend.View) {
	checkPool3("3D max pooling", s, k, in, out, argmax)
	x, y, idx := valuesOf(in), valuesOf(out), u8(argmax)
	o := s.Pooled(k)
	HW, OHW := s.H*s.W, o.H*o.W
	half := anyHalf(x, y)
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf, whole := c.scratch(half, k.D*HW, OHW)
		defer c.release(whole)
		for p := lo; p < hi; p++ {
			for od := range o.D {
				src := x.load(buf[0], (p*s.D+od*k.D)*HW, k.D*HW)
				off := (p*o.D + od) * OHW
				dst := y.out(buf[1], off, OHW)
				for oh := range o.H {
					for ow := range o.W {
						best, at := float32(0), 0
						for kd := range k.D {
							for kh := range k.H {
								row := src[kd*HW+(oh*k.H+kh)*s.W+ow*k.W:]
								for kw := range k.W {
									v, pos := row[kw], (kd*k.H+kh)*k.W+kw
									if pos == 0 || v > best || v != v {
										best, at = v, pos
									}
								}
							}
						}
						dst[oh*o.W+ow] = best
						if idx != nil {
							idx[off+oh*o.W+ow] = uint8(at)
						}
					}
				}
				y.store(dst, off)
			}
		}
	})
}

// MaxPool3Back writes every input once: its window's dout value where the
// window's argmax points at it, +0 elsewhere (inputs no window covers
// included).
func (c CPU) MaxPool3Back(s backend.Shape5, k backend.Scale3, din, dout, argmax backend.View) {
	checkPool3("3D max pooling backward", s, k, din, dout, argmax)
	if argmax.None() {
		panic("backend/cpu: 3D max pooling backward without argmax")
	}
	dy, dx, idx := valuesOf(dout), valuesOf(din), u8(argmax)
	o := s.Pooled(k)
	HW, OHW := s.H*s.W, o.H*o.W
	half := anyHalf(dy, dx)
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		buf, whole := c.scratch(half, k.D*HW, OHW)
		defer c.release(whole)
		for p := lo; p < hi; p++ {
			for od := range o.D {
				off := (p*s.D + od*k.D) * HW
				dst := dx.out(buf[0], off, k.D*HW)
				clear(dst)
				g := dy.load(buf[1], (p*o.D+od)*OHW, OHW)
				at := idx[(p*o.D+od)*OHW : (p*o.D+od+1)*OHW]
				for oh := range o.H {
					for ow := range o.W {
						pos := int(at[oh*o.W+ow])
						kd, kh, kw := pos/(k.H*k.W), pos/k.W%k.H, pos%k.W
						dst[kd*HW+(oh*k.H+kh)*s.W+ow*k.W+kw] = g[oh*o.W+ow]
					}
				}
				dx.store(dst, off)
			}
			if s.D > o.D*k.D { // the last slices no window covers
				dx.clear((p*s.D+o.D*k.D)*HW, (s.D-o.D*k.D)*HW)
			}
		}
	})
}

// taps are an up-sampling axis's source positions, PyTorch's for
// align_corners=False at scale f (1 or 2): output i reads inputs i0[i]
// and i1[i] with weights l0[i] and l1[i] (src = (i+0.5)/f - 0.5 clamped
// at 0, i1 = i0+1 clamped at the edge; scale 1 is the identity).
type taps struct {
	i0, i1 []int
	l0, l1 []float32
}

func tapsFor(n, f int) taps {
	var t taps
	for i := range n * f {
		src := max((float64(i)+0.5)/float64(f)-0.5, 0)
		i0 := int(src)
		l1 := src - float64(i0)
		t.i0 = append(t.i0, i0)
		t.i1 = append(t.i1, min(i0+1, n-1))
		t.l0 = append(t.l0, float32(1-l1))
		t.l1 = append(t.l1, float32(l1))
	}
	return t
}

// checkUpsample3 panics unless f is an up-sampling's factors and the views
// have their sizes.
func checkUpsample3(op string, s backend.Shape5, f backend.Scale3, small, big backend.View) {
	ok := func(f int) bool { return f == 1 || f == 2 }
	if s.N <= 0 || s.C <= 0 || s.D <= 0 || s.H <= 0 || s.W <= 0 || !ok(f.D) || !ok(f.H) || !ok(f.W) ||
		small.Len != s.Len() || big.Len != s.Scaled(f).Len() || small.DT != big.DT {
		panic(fmt.Sprintf("backend/cpu: %s %+v by %+v of %v, %v", op, s, f, small, big))
	}
}

// Upsample3 interpolates separably: per output slice, its two input
// slices blended in depth, then each output row from two blended rows
// in height, then along the row in width.
func (c CPU) Upsample3(s backend.Shape5, f backend.Scale3, out, in backend.View) {
	checkUpsample3("3D up-sampling", s, f, in, out)
	x, y := valuesOf(in), valuesOf(out)
	o := s.Scaled(f)
	td, th, tw := tapsFor(s.D, f.D), tapsFor(s.H, f.H), tapsFor(s.W, f.W)
	HW, OHW := s.H*s.W, o.H*o.W
	half := anyHalf(x, y)
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		in, out := 0, 0 // widened 16-bit slices
		if half {
			in, out = 2*HW, OHW
		}
		buf, whole := c.scratch(true, in, out, HW+s.W)
		defer c.release(whole)
		blend, row := buf[2][:HW], buf[2][HW:]
		for p := lo; p < hi; p++ {
			for od := range o.D {
				s0 := x.load(buf[0], (p*s.D+td.i0[od])*HW, HW)
				s1 := x.load(buf[0][min(HW, len(buf[0])):], (p*s.D+td.i1[od])*HW, HW)
				a, b := td.l0[od], td.l1[od]
				for i := range blend {
					blend[i] = a*s0[i] + b*s1[i]
				}
				off := (p*o.D + od) * OHW
				dst := y.out(buf[1], off, OHW)
				for oh := range o.H {
					r0, r1 := blend[th.i0[oh]*s.W:], blend[th.i1[oh]*s.W:]
					a, b := th.l0[oh], th.l1[oh]
					for i := range row {
						row[i] = a*r0[i] + b*r1[i]
					}
					d := dst[oh*o.W : (oh+1)*o.W]
					for ow := range d {
						d[ow] = tw.l0[ow]*row[tw.i0[ow]] + tw.l1[ow]*row[tw.i1[ow]]
					}
				}
				y.store(dst, off)
			}
		}
	})
}

// Upsample3Back is Upsample3's adjoint, an input slice at a time: each
// output-gradient slice that reads it is spread back onto an input-sized
// plane (along the rows, then over the rows, with the same weights), then
// added with the slice's depth weight, in output order. Each output
// slice is spread for each of the (at most two) input slices it reads.
func (c CPU) Upsample3Back(s backend.Shape5, f backend.Scale3, din, dout backend.View) {
	checkUpsample3("3D up-sampling backward", s, f, din, dout)
	dy, dx := valuesOf(dout), valuesOf(din)
	o := s.Scaled(f)
	td, th, tw := tapsFor(s.D, f.D), tapsFor(s.H, f.H), tapsFor(s.W, f.W)
	HW, OHW := s.H*s.W, o.H*o.W
	half := anyHalf(dy, dx)
	c.team.For(s.N*s.C, 1, func(lo, hi int) {
		in, out := 0, 0 // a widened 16-bit slice, and one summed to narrow
		if half {
			in, out = OHW, HW
		}
		buf, whole := c.scratch(true, in, out, HW+o.H*s.W)
		defer c.release(whole)
		plane, rows := buf[2][:HW], buf[2][HW:]
		for p := lo; p < hi; p++ {
			for d := range s.D {
				off := (p*s.D + d) * HW
				acc := dx.out(buf[1], off, HW)
				clear(acc)
				// The output slices reading input slice d lie within f of f*d.
				for od := max(f.D*d-f.D, 0); od < min(f.D*d+2*f.D, o.D); od++ {
					var wd float32
					if td.i0[od] == d {
						wd += td.l0[od]
					}
					if td.i1[od] == d {
						wd += td.l1[od]
					}
					if td.i0[od] != d && td.i1[od] != d {
						continue
					}
					g := dy.load(buf[0], (p*o.D+od)*OHW, OHW)
					clear(rows)
					for oh := range o.H {
						r := rows[oh*s.W : (oh+1)*s.W]
						for ow, v := range g[oh*o.W : (oh+1)*o.W] {
							r[tw.i0[ow]] += tw.l0[ow] * v
							r[tw.i1[ow]] += tw.l1[ow] * v
						}
					}
					clear(plane)
					for oh := range o.H {
						r := rows[oh*s.W : (oh+1)*s.W]
						p0, p1 := plane[th.i0[oh]*s.W:], plane[th.i1[oh]*s.W:]
						a, b := th.l0[oh], th.l1[oh]
						for i, v := range r {
							p0[i] += a * v
							p1[i] += b * v
						}
					}
					for i, v := range plane {
						acc[i] += wd * v
					}
				}
				dx.store(acc, off)
			}
		}
	})
}
