package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// elementwiseImpls is every implementation this machine runs.
func elementwiseImpls() []elementwiseImpl {
	impls := []elementwiseImpl{genericElementwise()}
	if e, ok := asmElementwise(); ok {
		impls = append(impls, e)
	}
	return impls
}

// specialFloats fills n values: random, with NaN, ±Inf, ±0, subnormals
// and tiny values sprinkled in.
func specialFloats(r *rand.Rand, n int) []float32 {
	specials := []float32{float32(math.NaN()), math.Float32frombits(0xffc00001), float32(math.Inf(1)), float32(math.Inf(-1)),
		0, float32(math.Copysign(0, -1)), math.Float32frombits(1), math.Float32frombits(0x80000003), 1e-30, -1e-30}
	out := randSlice(r, n)
	for i := range out {
		if r.IntN(5) == 0 {
			out[i] = specials[r.IntN(len(specials))]
		}
	}
	return out
}

// sameBits requires equal bits, except that any NaN matches any NaN: which
// payload an operation on two NaNs keeps depends on the operand order,
// which the Go compiler may swap for a commutative operation.
func sameBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("%s: [%d] = %v (%#x), want %v (%#x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestElementwiseMatchesGo: every implementation of the elementwise passes
// gives the Go reference's bits, over lengths around the vector width and
// long odd ones, special values included, in place and not.
func TestElementwiseMatchesGo(t *testing.T) {
	for _, e := range elementwiseImpls() {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 1001} {
			r := seedFor(fmt.Sprint("elementwise", n))
			x, g, y := specialFloats(r, n), specialFloats(r, n), specialFloats(r, n)
			name := fmt.Sprintf("%s n=%d", e.name, n)

			want, got := make([]float32, n), make([]float32, n)
			reluGo(want, x)
			e.relu(got, x)
			sameBits(t, name+" relu", got, want)
			inPlace := clone32(x)
			e.relu(inPlace, inPlace)
			sameBits(t, name+" relu in place", inPlace, want)

			reluBackwardGo(want, g, y)
			e.reluBackward(got, g, y)
			sameBits(t, name+" relu backward", got, want)
			inPlace = clone32(g)
			e.reluBackward(inPlace, inPlace, y)
			sameBits(t, name+" relu backward in place", inPlace, want)

			affineGo(want, x, 1.7, -0.3)
			e.affine(got, x, 1.7, -0.3)
			sameBits(t, name+" affine", got, want)

			for i := range want {
				want[i] = x[i] + g[i] // the reference: one float32 add
			}
			e.add(got, x, g)
			sameBits(t, name+" add", got, want)
			inPlace = clone32(g)
			e.add(inPlace, x, inPlace)
			sameBits(t, name+" add in place", inPlace, want)

			normGradGo(want, g, x, 0.25, 1.3, -0.7, 0.01)
			e.normGrad(got, g, x, 0.25, 1.3, -0.7, 0.01)
			sameBits(t, name+" norm grad", got, want)
			inPlace = clone32(g)
			e.normGrad(inPlace, inPlace, x, 0.25, 1.3, -0.7, 0.01)
			sameBits(t, name+" norm grad in place", inPlace, want)
		}
	}
}

// TestReLUSemantics pins the reference itself: PyTorch's relu and its
// gradient on the special values.
func TestReLUSemantics(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct{ x, y float32 }{
		{-2, 0}, {float32(math.Copysign(0, -1)), 0}, {0, 0}, {3, 3}, {float32(math.Inf(-1)), 0}, {float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		y := []float32{-1}
		ReLU(y, []float32{c.x})
		if math.Float32bits(y[0]) != math.Float32bits(c.y) {
			t.Errorf("relu(%v) = %v, want %v", c.x, y[0], c.y)
		}
	}
	y := []float32{0}
	if ReLU(y, []float32{nan}); y[0] == y[0] {
		t.Errorf("relu(NaN) = %v, want NaN", y[0])
	}
	for _, c := range []struct{ y, dx float32 }{{2, 5}, {0, 0}, {-1, 0}, {nan, 0}, {float32(math.Inf(1)), 5}} {
		dx := []float32{-1}
		ReLUBackward(dx, []float32{5}, []float32{c.y})
		if dx[0] != c.dx {
			t.Errorf("relu backward at y=%v: %v, want %v", c.y, dx[0], c.dx)
		}
	}
}

// TestNormSumsMatchGo: the chained float64 sums agree bit for bit between
// implementations (the same chains, the same operations) and with a plain
// float64 sum to rounding.
func TestNormSumsMatchGo(t *testing.T) {
	for _, e := range elementwiseImpls() {
		for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 100, 4097} {
			r := seedFor(fmt.Sprint("sums", n))
			x, g := randSlice(r, n), randSlice(r, n)
			for i := range x {
				x[i] = 3 + x[i] // a mean far from 0, as the shift is for
			}
			var sq, ab chains
			var ws, wq, wa, wb [16]float64
			e.shiftedSums(x, 3.1, &sq)
			shiftedSumsGo(x, 3.1, &ws, &wq)
			e.gradSums(g, x, 2.9, &ab)
			gradSumsGo(g, x, 2.9, &wa, &wb)
			if sq.a != ws || sq.b != wq || ab.a != wa || ab.b != wb {
				t.Fatalf("%s n=%d: chains differ from the Go reference", e.name, n)
			}
			var ps, pq, pa, pb float64
			for i := range x {
				d := float64(x[i]) - 3.1
				ps, pq = ps+d, pq+d*d
				pa, pb = pa+float64(g[i]), pb+float64(g[i])*(float64(x[i])-2.9)
			}
			gs, gq := ShiftedSums(x, 3.1)
			ga, gb := GradSums(g, x, 2.9)
			for _, c := range [][2]float64{{gs, ps}, {gq, pq}, {ga, pa}, {gb, pb}} {
				if math.Abs(c[0]-c[1]) > 1e-12*(1+math.Abs(c[1])*float64(n)) {
					t.Fatalf("%s n=%d: chained sum %v, plain %v", e.name, n, c[0], c[1])
				}
			}
		}
	}
}

// TestReLU16MatchesGo: every implementation of the 16-bit ReLU passes
// agrees with the Go reference on all 65536 patterns of fp16 and bf16
// (shuffled, at an odd length so the tail runs too), in place and not.
func TestReLU16MatchesGo(t *testing.T) {
	r := seedFor("relu16")
	x := make([]uint16, 65536+5)
	for i := range x {
		x[i] = uint16(i)
	}
	r.Shuffle(len(x), func(i, j int) { x[i], x[j] = x[j], x[i] })
	dy := make([]uint16, len(x))
	for i := range dy {
		dy[i] = uint16(r.Uint32())
	}
	for _, e := range elementwiseImpls() {
		for _, inf := range []uint16{0x7c00, 0x7f80} {
			want, got := make([]uint16, len(x)), make([]uint16, len(x))
			relu16Go(want, x, inf)
			e.relu16(got, x, inf)
			if !slices.Equal(got, want) {
				t.Fatalf("%s inf=%#x: relu differs from the Go reference", e.name, inf)
			}
			reluBack16Go(want, dy, x, inf)
			e.reluBack16(got, dy, x, inf)
			if !slices.Equal(got, want) {
				t.Fatalf("%s inf=%#x: relu backward differs from the Go reference", e.name, inf)
			}
			inPlace := slices.Clone(dy)
			e.reluBack16(inPlace, inPlace, x, inf)
			if !slices.Equal(inPlace, want) {
				t.Fatalf("%s inf=%#x: relu backward in place differs", e.name, inf)
			}
		}
	}
}

// TestReLUMaskMatchesBackward: every implementation's ReLU masks are the Go
// reference's bytes (spare bits 0), and the backward passes reading them
// give ReLUBackward's bits: fp32 on special values, fp16 and bf16 on all
// 65536 patterns, at lengths ending mid-byte and mid-block, in place and
// not.
func TestReLUMaskMatchesBackward(t *testing.T) {
	r := seedFor("relu mask")
	x16 := make([]uint16, 65536+5)
	for i := range x16 {
		x16[i] = uint16(i)
	}
	r.Shuffle(len(x16), func(i, j int) { x16[i], x16[j] = x16[j], x16[i] })
	dy16 := make([]uint16, len(x16))
	for i := range dy16 {
		dy16[i] = uint16(r.Uint32())
	}
	x32, dy32 := specialFloats(r, 4099), randSlice(r, 4099)
	for _, e := range elementwiseImpls() {
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 4099} {
			mask := make([]uint8, (n+7)/8)
			e.reluMask(mask, x32[:n])
			want, got := make([]float32, n), make([]float32, n)
			reluBackwardGo(want, dy32[:n], x32[:n])
			e.reluBackMask(got, dy32[:n], mask)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s n=%d: value %d (y %v): %v through the mask, %v", e.name, n, i, x32[i], got[i], want[i])
				}
			}
			if n%8 != 0 && mask[len(mask)-1]>>(n%8) != 0 {
				t.Errorf("%s n=%d: spare bits %08b set", e.name, n, mask[len(mask)-1])
			}
			goMask := make([]uint8, len(mask))
			reluMaskGo(goMask, x32[:n])
			if !slices.Equal(mask, goMask) {
				t.Fatalf("%s n=%d: mask bytes differ from the Go reference's", e.name, n)
			}
			inPlace := slices.Clone(dy32[:n])
			e.reluBackMask(inPlace, inPlace, mask)
			if !slices.EqualFunc(inPlace, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Fatalf("%s n=%d: in place differs", e.name, n)
			}
		}
		for _, inf := range []uint16{0x7c00, 0x7f80} {
			for _, n := range []int{15, 17, len(x16)} {
				mask := make([]uint8, (n+7)/8)
				e.reluMask16(mask, x16[:n], inf)
				want, got := make([]uint16, n), make([]uint16, n)
				reluBack16Go(want, dy16[:n], x16[:n], inf)
				e.reluBackMask16(got, dy16[:n], mask)
				if !slices.Equal(got, want) {
					t.Fatalf("%s inf=%#x n=%d: backward through the mask differs from ReLUBackward16", e.name, inf, n)
				}
				if n%8 != 0 && mask[len(mask)-1]>>(n%8) != 0 {
					t.Errorf("%s inf=%#x n=%d: spare bits %08b set", e.name, inf, n, mask[len(mask)-1])
				}
				goMask := make([]uint8, len(mask))
				reluMask16Go(goMask, x16[:n], inf)
				if !slices.Equal(mask, goMask) {
					t.Fatalf("%s inf=%#x n=%d: mask bytes differ from the Go reference's", e.name, inf, n)
				}
				inPlace := slices.Clone(dy16[:n])
				e.reluBackMask16(inPlace, inPlace, mask)
				if !slices.Equal(inPlace, want) {
					t.Fatalf("%s inf=%#x n=%d: in place differs", e.name, inf, n)
				}
			}
		}
	}
}

// TestFusedPassesMatchTheirParts: AffineReLUMask gives Affine, ReLU and
// ReLUMask's bits, and the fused ReLU backward with sums gives
// ReLUBackwardMask's bits and AddGrad's chains, in every implementation,
// over lengths around the blocks and special values, in place and not.
func TestFusedPassesMatchTheirParts(t *testing.T) {
	for _, e := range elementwiseImpls() {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 33, 1000, 4096} {
			r := seedFor(fmt.Sprint("fused", n))
			x, g := specialFloats(r, n), specialFloats(r, n)
			name := fmt.Sprintf("%s n=%d", e.name, n)
			const scale, shift = 1.375, -0.25
			want, wantMask := make([]float32, n), make([]uint8, (n+7)/8)
			e.affine(want, x, scale, shift)
			e.relu(want, want)
			e.reluMask(wantMask, want)
			for _, inPlace := range []bool{false, true} {
				for _, withMask := range []bool{true, false} {
					got := make([]float32, n)
					if inPlace {
						got = clone32(x)
					}
					var mask []uint8
					if withMask {
						mask = make([]uint8, (n+7)/8)
					}
					e.affineReLUMask(got, map[bool][]float32{false: x, true: got}[inPlace], mask, scale, shift)
					sameBits(t, fmt.Sprintf("%s in place %v: affine, relu", name, inPlace), got, want)
					if withMask && !slices.Equal(mask, wantMask) {
						t.Fatalf("%s: mask %v, want %v", name, mask, wantMask)
					}
				}
			}
			// Backward: the mask of the forward above, g as the gradient.
			for _, inPlace := range []bool{false, true} {
				wantDx := make([]float32, n)
				e.reluBackMask(wantDx, g, wantMask)
				var wc chains
				wc.a[3], wc.b[5] = 0.5, -2 // chains carried from before
				c := wc
				e.gradSums(wantDx, x, 0.125, &wc)
				dy := clone32(g)
				dx := make([]float32, n)
				if inPlace {
					dx = dy
				}
				e.reluBackMaskGradSums(dx, dy, x, wantMask, 0.125, &c)
				sameBits(t, fmt.Sprintf("%s in place %v: relu backward", name, inPlace), dx, wantDx)
				for i := range 16 { // bit for bit: NaN sums included
					if math.Float64bits(c.a[i]) != math.Float64bits(wc.a[i]) || math.Float64bits(c.b[i]) != math.Float64bits(wc.b[i]) {
						t.Fatalf("%s: chain %d differs from ReLUBackwardMask then the sums'", name, i)
					}
				}
			}
		}
	}
}
