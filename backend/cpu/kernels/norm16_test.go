package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
)

// halfPatterns is n random 16-bit patterns of dt: mostly values near 1 in
// magnitude, with zeros, subnormals, infinities and NaNs mixed in.
func halfPatterns(rng *rand.Rand, dt backend.DType, n int) []uint16 {
	_, narrow := scalarHalf(dt)
	out := make([]uint16, n)
	for i := range out {
		switch rng.IntN(20) {
		case 0:
			out[i] = uint16(rng.Uint32()) // any pattern: NaNs, infinities, subnormals
		case 1:
			out[i] = uint16(rng.IntN(4)) | uint16(rng.IntN(2))<<15 // ±0 and tiny subnormals
		default:
			out[i] = narrow(float32(rng.NormFloat64() * 2))
		}
	}
	return out
}

// TestHalfPassesMatchWidened checks each 16-bit pass, at lengths around
// every step and block boundary, against widening with the scalar
// function, the float32 pass and narrowing: the same bits (sums: the same
// float64s).
func TestHalfPassesMatchWidened(t *testing.T) {
	for _, e := range elementwiseImpls() {
		t.Run(e.name, func(t *testing.T) { testHalfPasses(t, e) })
	}
}

func testHalfPasses(t *testing.T, e elementwiseImpl) {
	rng := rand.New(rand.NewPCG(3, 4))
	lengths := []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 255, 256, 257, 1000, 4099}
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		widen, narrow := scalarHalf(dt)
		wide := func(h []uint16) []float32 {
			out := make([]float32, len(h))
			for i, v := range h {
				out[i] = widen(v)
			}
			return out
		}
		narrowAll := func(f []float32) []uint16 {
			out := make([]uint16, len(f))
			for i, v := range f {
				out[i] = narrow(v)
			}
			return out
		}
		same := func(what string, n int, got, want []uint16) {
			t.Helper()
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s %s n=%d: value %d is %#04x, want %#04x", dt, what, n, i, got[i], want[i])
				}
			}
		}
		for _, n := range lengths {
			x, g := halfPatterns(rng, dt, n), halfPatterns(rng, dt, n)
			scale, shift := float32(rng.NormFloat64()), float32(rng.NormFloat64())
			mu, a, b, c := float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())

			y := make([]uint16, n)
			e.affineHalf(dt, y, x, scale, shift)
			yw := wide(x)
			Affine(yw, yw, scale, shift)
			same("affine", n, y, narrowAll(yw))
			inPlace := append([]uint16(nil), x...)
			e.affineHalf(dt, inPlace, inPlace, scale, shift)
			same("affine in place", n, inPlace, y)

			dx := make([]uint16, n)
			e.normGradHalf(dt, dx, g, x, mu, a, b, c)
			dw := make([]float32, n)
			NormGrad(dw, wide(g), wide(x), mu, a, b, c)
			same("norm grad", n, dx, narrowAll(dw))
			inPlace = append([]uint16(nil), g...)
			e.normGradHalf(dt, inPlace, inPlace, x, mu, a, b, c)
			same("norm grad in place", n, inPlace, dx)

			k := float64(rng.NormFloat64())
			var sums Sums
			e.shiftedSumsHalf(dt, x, k, &sums.c)
			s, q := sums.Result()
			ws, wq := ShiftedSums(wide(x), k)
			if !sameFloat(s, ws) || !sameFloat(q, wq) {
				t.Fatalf("%s shifted sums n=%d: %v %v, want %v %v", dt, n, s, q, ws, wq)
			}
			sums = Sums{}
			e.gradSumsHalf(dt, g, x, float64(mu), &sums.c)
			s, q = sums.Result()
			ws, wq = GradSums(wide(g), wide(x), float64(mu))
			if !sameFloat(s, ws) || !sameFloat(q, wq) {
				t.Fatalf("%s grad sums n=%d: %v %v, want %v %v", dt, n, s, q, ws, wq)
			}
		}
	}
}

// TestHalfPassesNarrowLikeScalar runs AffineHalf on zeros with scale 1, so
// that each output is the shift, on float32 patterns where rounding is
// delicate: ties and near-ties at both types' last bit, overflow, the
// subnormal range, infinities and NaNs.
func TestHalfPassesNarrowLikeScalar(t *testing.T) {
	var pats []uint32
	for _, hi := range []uint32{0x3f800000, 0x3f810000, 0x477fe000, 0x7f7f0000, 0x00010000, 0x33000000, 0x387fc000} {
		for _, lo := range []uint32{0, 1, 0x0fff, 0x1000, 0x1001, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001, 0xffff} {
			pats = append(pats, hi|lo, hi|lo|0x80000000)
		}
	}
	pats = append(pats, 0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000, 0xffffffff, 0x7f7fffff, 0x477ff000, 0x477fefff)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 4000 {
		pats = append(pats, rng.Uint32())
	}
	zeros := make([]uint16, 8)
	for _, e := range elementwiseImpls() {
		for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
			widen, narrow := scalarHalf(dt)
			for _, p := range pats {
				shift := math.Float32frombits(p)
				y := make([]uint16, len(zeros))
				e.affineHalf(dt, y, zeros, 1, shift)
				w := make([]float32, len(zeros))
				for i := range w {
					w[i] = widen(zeros[i])
				}
				affineGo(w, w, 1, shift)
				if want := narrow(w[0]); y[0] != want || y[7] != want {
					t.Fatalf("%s %s: %#08x narrows to %#04x, want %#04x", e.name, dt, p, y[0], want)
				}
			}
		}
	}
}

// sameFloat: equal bits, or both NaN.
func sameFloat(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b
}

// BenchmarkHalfPasses times each 16-bit pass against its float32 pass, one
// core, on 16Ki values (in cache) and 1Mi (not).
func BenchmarkHalfPasses(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{16 << 10, 1 << 20} {
		x16, g16, y16 := halfPatterns(rng, backend.BFloat16, n), halfPatterns(rng, backend.BFloat16, n), make([]uint16, n)
		for i := range x16 { // values in [1, 2) or (-2, -1], normal in both types
			x16[i] = 0x3f80 | x16[i]&0x807f
			g16[i] = 0x3f80 | g16[i]&0x807f
		}
		x, g, y := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], g[i] = backend.BF16ToF32(x16[i]), backend.BF16ToF32(g16[i])
		}
		size := fmt.Sprintf("%dKi", n>>10)
		b.Run("affine/fp32/"+size, func(b *testing.B) {
			for b.Loop() {
				Affine(y, x, 1.5, 0.25)
			}
		})
		b.Run("gradSums/fp32/"+size, func(b *testing.B) {
			for b.Loop() {
				GradSums(g, x, 0.5)
			}
		})
		b.Run("normGrad/fp32/"+size, func(b *testing.B) {
			for b.Loop() {
				NormGrad(y, g, x, 0.5, 1.5, 0.25, 0.125)
			}
		})
		for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
			b.Run("affine/"+dt.String()+"/"+size, func(b *testing.B) {
				for b.Loop() {
					AffineHalf(dt, y16, x16, 1.5, 0.25)
				}
			})
			b.Run("gradSums/"+dt.String()+"/"+size, func(b *testing.B) {
				for b.Loop() {
					var s Sums
					s.AddGradHalf(dt, g16, x16, 0.5)
				}
			})
			b.Run("normGrad/"+dt.String()+"/"+size, func(b *testing.B) {
				for b.Loop() {
					NormGradHalf(dt, y16, g16, x16, 0.5, 1.5, 0.25, 0.125)
				}
			})
		}
	}
}
