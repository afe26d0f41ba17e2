package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
)

var allTypes = []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Uint8}

// testUpload checks uploads into views and sub-views of every type.
func (s *suite) testUpload(t *testing.T) {
	for _, dt := range allTypes {
		for _, n := range []int{1, 7, 64} {
			s.run(t, fmt.Sprintf("%s/n%d", dt, n), func(c *check) { c.roundTrip(dt, n) })
		}
	}
}

// testDownload checks downloads of every window of a view of every type.
func (s *suite) testDownload(t *testing.T) {
	for _, dt := range allTypes {
		s.run(t, dt.String(), func(c *check) { c.windows(dt, 9) })
	}
}

// testConvert checks conversions between fp32 and the 16-bit types, both
// ways, and same-type copies.
func (s *suite) testConvert(t *testing.T) {
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		s.run(t, fmt.Sprintf("fp32-%s", dt), func(c *check) { c.convertNarrow(dt) })
		s.run(t, fmt.Sprintf("%s-fp32", dt), func(c *check) { c.convertWiden(dt) })
	}
	for _, dt := range floatTypes {
		s.run(t, fmt.Sprintf("%s-%s", dt, dt), func(c *check) { c.convertCopy(dt) })
	}
}

// testFill checks Fill of every float type, with values that round, overflow
// the 16-bit types and are infinite.
func (s *suite) testFill(t *testing.T) {
	for _, dt := range floatTypes {
		for _, v := range []float32{0, 1, -2.5, 1.0 / 3, 1e-6, 65519, 70000, math.MaxFloat32, float32(math.Inf(-1))} {
			s.run(t, fmt.Sprintf("%s/%g", dt, v), func(c *check) { c.fill(dt, v) })
		}
	}
}

// roundTrip uploads random bytes into a whole buffer, then other bytes into
// a window of it, and downloads both: the window holds the new bytes, the
// rest the old ones.
func (c *check) roundTrip(dt backend.DType, n int) {
	size := dt.Size()
	v := c.alloc(dt, n+5)
	a, b := c.randomBytes((n+5)*size), c.randomBytes(n*size)
	c.b.Upload(v, a)
	c.sameBytes("download of the view", c.getBytes(v), a, size)
	w := v.Slice(3, 3+n) // Off > 0 within the view, itself at an offset in its buffer
	c.b.Upload(w, b)
	c.sameBytes("download of the sub-view", c.getBytes(w), b, size)
	want := append(append(append([]byte{}, a[:3*size]...), b...), a[(3+n)*size:]...)
	c.sameBytes("download of the view after uploading the sub-view", c.getBytes(v), want, size)
	if n > 1 {
		u := w.Slice(1, n)
		c.sameBytes("download of a sub-view of the sub-view", c.getBytes(u), b[size:], size)
	}
}

// windows uploads random bytes into a view of n values and downloads each
// of its windows [lo, hi), which must hold those bytes.
func (c *check) windows(dt backend.DType, n int) {
	size := dt.Size()
	v := c.alloc(dt, n)
	b := c.randomBytes(n * size)
	c.b.Upload(v, b)
	for lo := range n {
		for hi := lo + 1; hi <= n; hi++ {
			c.sameBytes(fmt.Sprintf("download of values %d to %d", lo, hi), c.getBytes(v.Slice(lo, hi)), b[lo*size:hi*size], size)
		}
	}
}

func (c *check) randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(c.rng.Uint32())
	}
	return b
}

// specials32 are float32 bit patterns a conversion must get right: signed
// zeros, infinities, NaNs with payloads in the kept and the dropped bits,
// float32 subnormals, the fp16 limits (largest finite 65504, the overflow
// threshold 65520, smallest normal 2^-14 and subnormal 2^-24) and their
// neighbours, and bfloat16 rounding ties and carries into the exponent.
var specials32 = []uint32{
	0x00000000, 0x80000000, 0x7f800000, 0xff800000,
	0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7f802000, 0x7fc0dead, 0x7fff0000, 0x7f810000,
	0x00000001, 0x807fffff, 0x00400000, 0x00008000,
	0x477fe000, 0x477fefff, 0x477ff000, 0x477fffff, 0x47800000, 0xc77ff000,
	0x38800000, 0x387fffff, 0x387ff000, 0x33800000, 0x33000000, 0x33000001, 0x32ffffff, 0xb3000001,
	0x3f808000, 0x3f818000, 0x3f808001, 0x3f80ffff, 0x7f7f8000, 0x7f7fffff, 0xff7f8000, 0x3fffffff,
}

// convertNarrow converts float32 bit patterns (specials, every value of
// dt, halfway points between neighbours of dt, random patterns) to dt and
// compares with backend.F32ToF16 / F32ToBF16 bit for bit. For a NaN only
// NaN-ness is required: Convert's contract says nothing of payloads.
func (c *check) convertNarrow(dt backend.DType) {
	src := append([]uint32{}, specials32...)
	for h := range 1 << 16 {
		x := math.Float32bits(widen(dt, uint16(h)))
		src = append(src, x)
		if x&0x7fffffff < 0x7f800000 {
			// the float32 values just around the tie with the next
			// pattern up (h is a pattern of dt, so x's low bits are zero)
			step := uint32(1) << 12 // half an fp16 normal ulp is 2^12 float32 ulps
			if dt == backend.BFloat16 {
				step = 1 << 15
			}
			if dt == backend.Float16 && h&0x7c00 == 0 {
				// subnormal fp16: ties at odd multiples of 2^-25
				f := widen(dt, uint16(h))
				mid := float32(float64(f) + math.Copysign(0x1p-25, float64(f)))
				m := math.Float32bits(mid)
				src = append(src, m, m+1, m-1)
				continue
			}
			src = append(src, x+step, x+step-1, x+step+1)
		}
	}
	for range 1 << 14 {
		src = append(src, c.rng.Uint32())
	}
	in := c.alloc(backend.Float32, len(src))
	c.b.Upload(in, encode32(src))
	out := c.output(dt, len(src))
	c.b.Convert(out, in)
	got := decode16(c.getBytes(out))
	bad := 0
	for i, x := range src {
		f := math.Float32frombits(x)
		want := narrow(dt, f)
		g := got[i]
		ok := g == want
		if f != f {
			ok = widen(dt, g) != widen(dt, g)
		}
		if !ok {
			bad++
			if bad <= 5 {
				c.Errorf("Convert %s: float32 %#08x (%g) gave %#04x, want %#04x", dt, x, f, g, want)
			}
		}
	}
	if bad > 0 {
		c.Errorf("Convert fp32 to %s: %d of %d patterns wrong", dt, bad, len(src))
	}
}

// convertWiden widens every 16-bit pattern of dt to float32, exactly.
func (c *check) convertWiden(dt backend.DType) {
	src := make([]uint16, 1<<16)
	for h := range src {
		src[h] = uint16(h)
	}
	in := c.inputBits(dt, src)
	out := c.output(backend.Float32, len(src))
	c.b.Convert(out, in)
	got := decode32(c.getBytes(out))
	bad := 0
	for h, g := range got {
		want := widen(dt, uint16(h))
		ok := g == math.Float32bits(want)
		if want != want {
			ok = math.Float32frombits(g) != math.Float32frombits(g)
		}
		if !ok {
			bad++
			if bad <= 5 {
				c.Errorf("Convert %s to fp32: %#04x gave %#08x, want %#08x", dt, h, g, math.Float32bits(want))
			}
		}
	}
	if bad > 0 {
		c.Errorf("Convert %s to fp32: %d of 65536 patterns wrong", dt, bad)
	}
}

// convertCopy converts a view to its own type: every bit is kept, NaN
// payloads included.
func (c *check) convertCopy(dt backend.DType) {
	n := 77
	b := c.randomBytes(n * dt.Size())
	in := c.alloc(dt, n)
	c.b.Upload(in, b)
	out := c.output(dt, n)
	c.b.Convert(out, in)
	c.sameBytes("copy", c.getBytes(out), b, dt.Size())
	c.unchanged("src", in, b)
}

// fill checks Fill(dst, v): every value is v rounded to dt (+0 and -0
// compare equal).
func (c *check) fill(dt backend.DType, v float32) {
	n := 33
	out := c.output(dt, n)
	c.b.Fill(out, v)
	want := make([]float32, n)
	for i := range want {
		want[i] = v
	}
	roundTo(dt, want)
	c.same("fill", c.get(out), want)
}

// sizer checks the Sizer's answers: Stages(fp32) is false (fp32 is every
// backend's own type), workspaces are non-negative and depend only on the
// shape, and Supports is true for every required operation. That the operations work with exactly that much workspace,
// prefilled with NaN, is checked by every convolution case.
func (s *suite) sizer(t *testing.T) {
	for _, op := range backend.Ops {
		if s.b.Stages(op, backend.Float32) {
			t.Errorf("Stages(%s, fp32) is true: the layer operations must take fp32 as it is", op)
		}
	}
	for _, sh := range convShapes {
		n := s.b.ConvWorkspace(sh)
		if n < 0 || s.b.ConvWorkspace(sh) != n {
			t.Errorf("ConvWorkspace(%+v) = %d, then %d", sh, n, s.b.ConvWorkspace(sh))
		}
		t.Logf("ConvWorkspace(%+v) = %d", sh, n)
	}
	for _, sh := range upConvShapes {
		n := s.b.UpConvWorkspace(sh)
		if n < 0 || s.b.UpConvWorkspace(sh) != n {
			t.Errorf("UpConvWorkspace(%+v) = %d, then %d", sh, n, s.b.UpConvWorkspace(sh))
		}
		t.Logf("UpConvWorkspace(%+v) = %d", sh, n)
	}
	for _, op := range backend.Ops {
		t.Logf("%s operations checked in %v", op, s.layerTypes(op))
	}
	for _, m := range backend.Methods {
		switch {
		case !m.Optional() && !s.b.Supports(m):
			t.Errorf("Supports(%s) is false, but %s is required of every backend", m, m)
		case !s.b.Supports(m):
			t.Logf("%s runs its composition (backend.Composed)", m)
		}
	}
}
