package backend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
)

// Independent references for the half-precision conversions. They share no
// code or bit tricks with half.go: decoding is exact float64 arithmetic
// (math.Ldexp) on the fields, encoding is a nearest-neighbour search over
// the exact values of all representable numbers.

// refF16Decode returns the exact value of the binary16 pattern h.
func refF16Decode(h uint16) float64 {
	neg := h&0x8000 != 0
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	var v float64
	switch {
	case e == 0x1f && m != 0:
		v = math.NaN()
	case e == 0x1f:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(m, -24) // subnormal: m * 2^-14 * 2^-10
	default:
		v = math.Ldexp(1024+m, e-25) // (1 + m/2^10) * 2^(e-15)
	}
	if neg {
		v = math.Copysign(v, -1)
	}
	return v
}

// refF16Table[i] is the value of the non-negative pattern i for i <= 0x7bff
// (strictly increasing, 0 to 65504), plus refF16Table[0x7c00] = 65536: the
// next value the format would have with an unbounded exponent. IEEE 754
// rounds as if the exponent were unbounded and turns a result of 65536 into
// Inf, whose pattern is exactly 0x7c00; so a nearest search over this table
// gives overflow for free (65520 is a tie between 0x7bff and 0x7c00, and
// 0x7c00 is the even one).
var refF16Table = func() []float64 {
	t := make([]float64, 0x7c01)
	for i := range 0x7c00 {
		t[i] = refF16Decode(uint16(i))
	}
	t[0x7c00] = 65536
	return t
}()

// refF32ToF16 encodes f by brute force: exact value, binary search for the
// neighbouring representable values, nearest wins, ties to even pattern
// (the last pattern bit is the mantissa's last bit). NaN returns the quiet
// NaN pattern with f's sign and top 10 payload bits, the policy of half.go.
func refF32ToF16(f float32) uint16 {
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	if f != f {
		return sign | 0x7e00 | uint16(math.Float32bits(f)>>13)&0x3ff
	}
	v := math.Abs(float64(f)) // exact
	if v >= 65520 {
		return sign | 0x7c00 // also +Inf
	}
	t := refF16Table
	i := sort.SearchFloat64s(t, v) // first t[i] >= v; v < 65520 so i <= 0x7c00
	if t[i] == v {
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	mid := (t[lo] + t[hi]) / 2 // exact in float64
	switch {
	case v < mid:
		return sign | uint16(lo)
	case v > mid:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	default:
		return sign | uint16(hi)
	}
}

// refBF16Decode returns the exact value of the bfloat16 pattern h; for
// h&0x7fff == 0x7f80 it returns the unbounded-exponent value 2^128 (times
// the sign) when unbounded is set, Inf otherwise.
func refBF16Decode(h uint16, unbounded bool) float64 {
	neg := h&0x8000 != 0
	e := int(h>>7) & 0xff
	m := float64(h & 0x7f)
	var v float64
	switch {
	case e == 0xff && m != 0:
		v = math.NaN()
	case e == 0xff && unbounded:
		v = math.Ldexp(1, 128)
	case e == 0xff:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(m, -133) // m * 2^-126 * 2^-7
	default:
		v = math.Ldexp(128+m, e-134) // (1 + m/2^7) * 2^(e-127)
	}
	if neg {
		v = math.Copysign(v, -1)
	}
	return v
}

// refF32ToBF16 rounds f to bfloat16 in float64 arithmetic: the candidates
// are the truncated pattern and the next one up in magnitude; the nearer
// wins, ties go to the even pattern. The next-up of the largest finite
// value is 2^128, encoded as Inf.
func refF32ToBF16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	if f != f {
		return uint16(bits>>16) | 0x0040
	}
	if math.IsInf(float64(f), 0) {
		return sign | 0x7f80
	}
	v := math.Abs(float64(f))
	lo := uint16(bits>>16) & 0x7fff
	hi := lo + 1
	dl := v - refBF16Decode(lo, true) // exact: all values share f's ulp grid
	dh := refBF16Decode(hi, true) - v
	switch {
	case dl < dh:
		return sign | lo
	case dl > dh:
		return sign | hi
	case lo%2 == 0:
		return sign | lo
	default:
		return sign | hi
	}
}

// sameF32 reports whether got and want are the same float32, bit for bit
// (so -0 != +0), except that any two NaNs count as equal.
func sameF32(got, want float32) bool {
	if got != got && want != want {
		return true
	}
	return math.Float32bits(got) == math.Float32bits(want)
}

// TestHalfRefSelfCheck pins the references themselves on hand-checked values
// so a wrong reference cannot silently bless a wrong kernel.
func TestHalfRefSelfCheck(t *testing.T) {
	decode := []struct {
		h uint16
		v float64
	}{
		{0x0000, 0}, {0x0001, 0x1p-24}, {0x03ff, 1023 * 0x1p-24}, {0x0400, 0x1p-14},
		{0x3c00, 1}, {0x3c01, 1 + 0x1p-10}, {0xc000, -2}, {0x7bff, 65504}, {0x3555, 0.333251953125},
	}
	for _, c := range decode {
		if got := refF16Decode(c.h); got != c.v {
			t.Errorf("refF16Decode(%#04x) = %v, want %v", c.h, got, c.v)
		}
	}
	if v := refF16Decode(0x8000); v != 0 || !math.Signbit(v) {
		t.Errorf("refF16Decode(0x8000) = %v, want -0", v)
	}
	encode := []struct {
		f float32
		h uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00},
		{1e6, 0x7c00}, {0x1p-24, 0x0001}, {0x1p-25, 0x0000}, {0x1.000002p-25, 0x0001},
		{0x3p-25, 0x0002}, {0x5p-25, 0x0002}, {1 + 0x1p-11, 0x3c00}, {1 + 0x3p-11, 0x3c02},
		{0x1.ff8p-15, 0x03ff}, {0x1.ffcp-15, 0x0400}, {0x1.ffap-15, 0x03ff}, {0x1.ffep-15, 0x0400}, {float32(math.Inf(-1)), 0xfc00},
	}
	for _, c := range encode {
		if got := refF32ToF16(c.f); got != c.h {
			t.Errorf("refF32ToF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	bf := []struct {
		f float32
		h uint16
	}{
		{1, 0x3f80}, {1 + 0x1p-8, 0x3f80}, {1 + 0x3p-8, 0x3f82}, {math.Nextafter32(1+0x1p-8, 2), 0x3f81}, {math.Nextafter32(1+0x3p-8, 0), 0x3f81},
		{math.MaxFloat32, 0x7f80}, {-math.MaxFloat32, 0xff80}, {0x1.fep127, 0x7f7f},
	}
	for _, c := range bf {
		if got := refF32ToBF16(c.f); got != c.h {
			t.Errorf("refF32ToBF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
}

// TestHalfF16AllPatterns: every binary16 pattern decodes exactly and
// round-trips; NaNs stay (quiet) NaN with their sign and payload.
func TestHalfF16AllPatterns(t *testing.T) {
	bad := 0
	for i := range 1 << 16 {
		h := uint16(i)
		got := F16ToF32(h)
		want := refF16Decode(h)
		isNaN := h&0x7c00 == 0x7c00 && h&0x3ff != 0
		if isNaN {
			b := math.Float32bits(got)
			ok := got != got && b>>31 == uint32(h>>15) && b&0x00400000 != 0 &&
				(b>>13)&0x1ff == uint32(h&0x1ff) && b&0x1fff == 0
			if back := F32ToF16(got); back != h|0x0200 {
				ok = false
			}
			if !ok && bad < 10 {
				bad++
				t.Errorf("NaN %#04x: F16ToF32 = %#08x, back %#04x; want quiet NaN, same sign and payload", h, b, F32ToF16(got))
			}
			continue
		}
		if math.Float64bits(float64(got)) != math.Float64bits(want) {
			if bad < 10 {
				bad++
				t.Errorf("F16ToF32(%#04x) = %v, want %v", h, got, want)
			}
			continue
		}
		if back := F32ToF16(got); back != h && bad < 10 {
			bad++
			t.Errorf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

// halfF16Inputs returns the float32 inputs for the encoder check, by group.
func halfF16Inputs() []struct {
	name string
	fs   []float32
} {
	var values, ties, nearTies, subnormal, overflow, special, random []float32
	both := func(dst *[]float32, f float32) { *dst = append(*dst, f, -f) }

	// Every finite fp16 value, every midpoint between adjacent ones
	// (including 65504..65536, whose midpoint 65520 is the overflow
	// threshold), and the float32 neighbours of every midpoint.
	for i := range 0x7c00 {
		both(&values, float32(refF16Table[i]))
		m := (refF16Table[i] + refF16Table[i+1]) / 2
		mf := float32(m)
		if float64(mf) != m {
			panic(fmt.Sprintf("midpoint %v not a float32", m))
		}
		both(&ties, mf)
		both(&nearTies, math.Nextafter32(mf, 0))
		both(&nearTies, math.Nextafter32(mf, float32(math.Inf(1))))
	}

	// Subnormal range and the rounding boundary into the normal range:
	// every float32 exponent from subnormal float32 up to 2^-13, with
	// mantissas around the rounding positions, plus dense random bits.
	r := seedFor("half-subnormal")
	for e := uint32(0); e <= 114; e++ {
		for _, m := range []uint32{0, 1, 2, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000,
			0x3fffff, 0x400000, 0x400001, 0x7fefff, 0x7ff000, 0x7ff001, 0x7fffff} {
			both(&subnormal, math.Float32frombits(e<<23|m))
		}
	}
	for range 200000 {
		both(&subnormal, math.Float32frombits(0x32000000+r.Uint32N(0x39000000-0x32000000)))
	}

	// Every float32 in [65472, 65600], around 65504 / 65520 / 65536, and
	// a few far beyond.
	for f := float32(65472); f <= 65600; f = math.Nextafter32(f, 1e6) {
		both(&overflow, f)
	}
	for _, f := range []float32{65536, 1e5, 1e10, math.MaxFloat32} {
		both(&overflow, f)
	}

	// Zeros, infinities, NaNs (quiet and signalling, payload only in the
	// bits that are dropped, all-ones payload).
	for _, b := range []uint32{0, 0x7f800000, 0x7fc00000, 0x7f800001, 0x7f801fff, 0x7f802000,
		0x7fbfffff, 0x7fffffff, 0x7fc00001, 0x7fa00000} {
		special = append(special, math.Float32frombits(b), math.Float32frombits(b|0x80000000))
	}

	r = seedFor("half-random")
	for range 2000000 {
		random = append(random, math.Float32frombits(r.Uint32()))
	}
	return []struct {
		name string
		fs   []float32
	}{
		{"values", values}, {"ties", ties}, {"nearTies", nearTies}, {"subnormal", subnormal},
		{"overflow", overflow}, {"special", special}, {"random", random},
	}
}

// TestHalfF32ToF16MatchesRef holds F32ToF16 to the brute-force encoder.
func TestHalfF32ToF16MatchesRef(t *testing.T) {
	for _, g := range halfF16Inputs() {
		t.Run(g.name, func(t *testing.T) {
			bad := 0
			for _, f := range g.fs {
				got, want := F32ToF16(f), refF32ToF16(f)
				if got != want {
					bad++
					if bad <= 10 {
						t.Errorf("F32ToF16(%v = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
					}
				}
			}
			if bad > 10 {
				t.Errorf("... %d mismatches of %d", bad, len(g.fs))
			}
		})
	}
}

// TestHalfF32ToF16Cases pins a few named results directly (readable
// failures for the classic edge cases).
func TestHalfF32ToF16Cases(t *testing.T) {
	nan := math.Float32frombits
	cases := []struct {
		name string
		f    float32
		want uint16
	}{
		{"+0", 0, 0x0000},
		{"-0", float32(math.Copysign(0, -1)), 0x8000},
		{"1", 1, 0x3c00},
		{"-1.5", -1.5, 0xbe00},
		{"max", 65504, 0x7bff},
		{"belowOverflowTie", math.Nextafter32(65520, 0), 0x7bff},
		{"overflowTie", 65520, 0x7c00},
		{"-overflowTie", -65520, 0xfc00},
		{"+Inf", float32(math.Inf(1)), 0x7c00},
		{"-Inf", float32(math.Inf(-1)), 0xfc00},
		{"minSubnormal", 0x1p-24, 0x0001},
		{"halfMinSubnormal", 0x1p-25, 0x0000},
		{"-halfMinSubnormal", -0x1p-25, 0x8000},
		{"aboveHalfMinSubnormal", math.Nextafter32(0x1p-25, 1), 0x0001},
		{"tinyF32", 0x1p-149, 0x0000},
		{"subnormalTieOdd", 0x3p-25, 0x0002},
		{"maxSubnormal", 0x1.ff8p-15, 0x03ff},
		{"subnormalToNormalTie", 0x1.ffcp-15, 0x0400},
		{"belowSubnormalToNormalTie", math.Nextafter32(0x1.ffcp-15, 0), 0x03ff},
		{"minNormal", 0x1p-14, 0x0400},
		{"tieEvenDown", 1 + 0x1p-11, 0x3c00},
		{"tieEvenUp", 1 + 0x3p-11, 0x3c02},
		{"qNaN", nan(0x7fc00000), 0x7e00},
		{"-qNaN", nan(0xffc00000), 0xfe00},
		{"sNaNlowPayload", nan(0x7f800001), 0x7e00},
		{"NaNallOnes", nan(0x7fffffff), 0x7fff},
		{"sNaNpayload", nan(0x7f802000), 0x7e01},
	}
	for _, c := range cases {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("%s: F32ToF16(%#08x) = %#04x, want %#04x", c.name, math.Float32bits(c.f), got, c.want)
		}
	}
}

// TestHalfBF16AllPatterns: every bfloat16 pattern decodes exactly and
// round-trips; NaNs stay quiet NaN with sign and payload.
func TestHalfBF16AllPatterns(t *testing.T) {
	bad := 0
	for i := range 1 << 16 {
		h := uint16(i)
		got := BF16ToF32(h)
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			b := math.Float32bits(got)
			ok := got != got && b == uint32(h|0x40)<<16 && F32ToBF16(got) == h|0x40
			if !ok && bad < 10 {
				bad++
				t.Errorf("NaN %#04x: BF16ToF32 = %#08x, back %#04x", h, b, F32ToBF16(got))
			}
			continue
		}
		want := refBF16Decode(h, false)
		if math.Float64bits(float64(got)) != math.Float64bits(want) {
			if bad < 10 {
				bad++
				t.Errorf("BF16ToF32(%#04x) = %v, want %v", h, got, want)
			}
			continue
		}
		if back := F32ToBF16(got); back != h && bad < 10 {
			bad++
			t.Errorf("F32ToBF16(BF16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

// TestHalfF32ToBF16MatchesRef holds F32ToBF16 to the float64 reference on
// random patterns, exact ties and their neighbours for every upper half,
// and the special values.
func TestHalfF32ToBF16MatchesRef(t *testing.T) {
	var ties, random []uint32
	for hi := range uint32(1 << 16) {
		for _, lo := range []uint32{0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff} {
			ties = append(ties, hi<<16|lo)
		}
	}
	r := seedFor("bf16-random")
	for range 1000000 {
		random = append(random, r.Uint32())
	}
	special := []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7f7fffff, 0x7f7f8000, 0x7f7f7fff,
		0x7fc00000, 0x7f800001, 0x7f808000, 0x7f80ffff, 0x7fffffff, 0xffffffff, 0xff800001,
		0x00000001, 0x00007fff, 0x00008000, 0x00018000, 0x007fffff, 0x007f8000}
	groups := []struct {
		name string
		bits []uint32
	}{{"ties", ties}, {"random", random}, {"special", special}}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			bad := 0
			for _, b := range g.bits {
				f := math.Float32frombits(b)
				got, want := F32ToBF16(f), refF32ToBF16(f)
				isNaN := f != f
				if isNaN && (got&0x7f80 != 0x7f80 || got&0x7f == 0 || got>>15 != uint16(b>>31)) {
					t.Errorf("F32ToBF16(NaN %#08x) = %#04x: not a NaN of the same sign", b, got)
				}
				if got != want {
					bad++
					if bad <= 10 {
						t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", b, got, want)
					}
				}
			}
			if bad > 10 {
				t.Errorf("... %d mismatches of %d", bad, len(g.bits))
			}
		})
	}
}

// TestHalfExhaustive checks F32ToF16 and F32ToBF16 against the references on
// all 2^32 float32 bit patterns. It takes minutes, so it only runs with
// MEMUNET_HALF_EXHAUSTIVE=1.
func TestHalfExhaustive(t *testing.T) {
	if os.Getenv("MEMUNET_HALF_EXHAUSTIVE") == "" {
		t.Skip("set MEMUNET_HALF_EXHAUSTIVE=1 to check all 2^32 float32 patterns")
	}
	var bad atomic.Int64
	var wg sync.WaitGroup
	const parts = 256
	for p := range uint64(parts) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := p << 24; b < (p+1)<<24; b++ {
				f := math.Float32frombits(uint32(b))
				h, bf := F32ToF16(f), F32ToBF16(f)
				if h != refF32ToF16(f) || bf != refF32ToBF16(f) {
					if bad.Add(1) <= 10 {
						t.Errorf("%#08x: F32ToF16 %#04x (ref %#04x), F32ToBF16 %#04x (ref %#04x)",
							b, h, refF32ToF16(f), bf, refF32ToBF16(f))
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d mismatching patterns", n)
	}
}

// seedFor is a generator seeded by name, so each test's inputs are fixed.
func seedFor(name string) *rand.Rand {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(0x6d656d75, h))
}
