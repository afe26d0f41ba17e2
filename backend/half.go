package backend

import "math"

// Half-precision conversions for mixed-precision training.
//
// Two 16-bit formats are stored as raw uint16 bit patterns:
//
//   - float16 (IEEE 754 binary16): 1 sign, 5 exponent (bias 15), 10 mantissa
//     bits. Largest finite 65504, smallest normal 2^-14, smallest subnormal
//     2^-24.
//   - bfloat16: the upper 16 bits of a float32 (1 sign, 8 exponent, 7
//     mantissa bits), so it has float32's range at 8 bits of precision.
//
// Narrowing (float32 -> 16 bit) rounds to nearest, ties to even, exactly as
// IEEE 754 convertFormat does: subnormal results are rounded correctly
// (including carries into the normal range), magnitudes that round above the
// largest finite value become ±Inf (for float16: everything >= 65520), signed
// zeros and infinities are kept. Widening (16 bit -> float32) is exact.
//
// NaNs stay NaN in both directions: the sign and the leading payload bits
// that fit are kept and the result is always a quiet NaN (quiet bit set), so
// a NaN whose surviving payload bits are all zero can never turn into Inf.
//
// The functions are branch-light bit manipulations; the test file holds them
// to independent brute-force references (exact float64 decoding,
// nearest-neighbour search over all representable values). backend/cpu/kernels
// has the slice versions (F16C/AVX2 assembly where the CPU has it).

// F32ToF16 converts f to the nearest IEEE 754 binary16 value (ties to even)
// and returns its bit pattern. See the package notes above for overflow,
// subnormals and NaN.
func F32ToF16(f float32) uint16 {
	x := math.Float32bits(f)
	a := x & 0x7fffffff // |f|; x^a is the sign bit

	// Normal float16 range, 2^-14 <= |f| < 65520: rebias the exponent
	// (127 -> 15, i.e. subtract 112<<23, written as adding 0xc8000000 mod
	// 2^32) and round the 23-bit mantissa to 10 bits: adding 0xfff plus the
	// lowest kept bit carries into bit 13 exactly when the dropped 13 bits
	// are above one half, or exactly one half with an odd kept part. A carry
	// out of the mantissa correctly bumps the exponent, and from 65520 up
	// (including Inf) the result is >= 0x7c00, which min clamps to Inf.
	h := min((a+0xc8000fff+(a>>13)&1)>>13, 0x7c00)

	if a < 0x38800000 {
		// |f| < 2^-14: the result is subnormal (or zero, or the smallest
		// normal after rounding up). Adding 0.5 in float32 arithmetic
		// aligns |f| to 0.5's ulp, 2^-24 = the float16 subnormal step,
		// and the FPU rounds the dropped bits to nearest even. The sum's
		// mantissa is then the count of 2^-24 steps, 0..1024, which is
		// exactly the float16 encoding (1024 = 0x400 = smallest normal).
		h = math.Float32bits(math.Float32frombits(a)+0.5) - 0x3f000000
	}
	if a > 0x7f800000 {
		// NaN: keep the top 10 payload bits, force quiet.
		h = 0x7e00 | (a>>13)&0x3ff
	}
	// Written to stay within the inliner's budget (the slice loops inline
	// it); the branches above compile to conditional moves or to a branch
	// that is predictable on real data.
	return uint16((x^a)>>16 | h)
}

// F16ToF32 returns the float32 value of the binary16 bit pattern h. It is
// exact for every non-NaN pattern; a NaN comes back as a quiet float32 NaN
// with the same sign and payload (shifted into the top mantissa bits).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	a := uint32(h & 0x7fff)
	// Normal: rebias the exponent (15 -> 127) and widen the mantissa.
	x := (a << 13) + 0x38000000
	if a < 0x0400 {
		// Zero or subnormal, value a * 2^-24. The float32 with bits
		// 0x38800000|a<<13 is 2^-14 * (1 + a/2^10) = 2^-14 + a*2^-24;
		// subtracting 2^-14 is exact (Sterbenz) and lets the FPU
		// normalise a*2^-24 for us (a == 0 gives +0).
		x = math.Float32bits(math.Float32frombits(0x38800000|a<<13) - 0x1p-14)
	}
	if a >= 0x7c00 {
		// Inf or NaN: exponent all ones, mantissa carried over; NaNs get
		// the quiet bit (Inf has a == 0x7c00 and stays 0x7f800000).
		x = 0x7f800000 | (a&0x3ff)<<13
		if a > 0x7c00 {
			x |= 0x00400000
		}
	}
	return math.Float32frombits(sign | x)
}

// F32ToBF16 converts f to the nearest bfloat16 value (ties to even) and
// returns its bit pattern: the upper 16 bits of f, rounded on the lower 16.
// Magnitudes that round above the largest finite bfloat16 become ±Inf;
// a NaN stays a quiet NaN with its sign and top 7 payload bits, even where
// rounding would carry into the exponent.
func F32ToBF16(f float32) uint16 {
	x := math.Float32bits(f)
	// Round to nearest even on the low 16 bits; a carry out of the mantissa
	// bumps the exponent, and from the largest finite value up it yields Inf.
	h := uint16((x + 0x7fff + (x>>16)&1) >> 16)
	if x&0x7fffffff > 0x7f800000 {
		h = uint16(x>>16) | 0x0040 // NaN: truncate, force quiet
	}
	return h
}

// BF16ToF32 returns the float32 value of the bfloat16 bit pattern h (exact;
// a NaN comes back quiet with the same sign and payload).
func BF16ToF32(h uint16) float32 {
	x := uint32(h) << 16
	if h&0x7fff > 0x7f80 {
		x |= 0x00400000
	}
	return math.Float32frombits(x)
}
