package backendtest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
)

// The 3D references' gradients against float64 central differences of
// their forwards: L = <forward(x), g>, whose gradient in x (and w, bias)
// the backward references give. The forwards are linear in each argument
// (the pooling piecewise, away from ties), so the differences are exact
// up to float64 rounding.

func randoms(rng *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = 2*rng.Float64() - 1
	}
	return x
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// checkFD compares grad with the central differences of L over every
// coordinate of x.
func checkFD(t *testing.T, what string, x, grad []float64, L func() float64) {
	t.Helper()
	const h = 1e-3
	bad := 0
	for i := range x {
		x0 := x[i]
		x[i] = x0 + h
		up := L()
		x[i] = x0 - h
		down := L()
		x[i] = x0
		fd := (up - down) / (2 * h)
		if math.Abs(fd-grad[i]) > 1e-8*(1+math.Abs(fd)) {
			bad++
			if bad <= 3 {
				t.Errorf("%s[%d]: gradient %v, finite difference %v", what, i, grad[i], fd)
			}
		}
	}
}

func TestConv3ReferenceGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 48))
	for _, s := range []backend.ConvShape{
		{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 2, K: 3, Pad: 1, KD: 3, PadD: 1},
		{N: 1, C: 2, D: 4, H: 3, W: 5, OC: 3, K: 3, Pad: 1, KD: 1},
		{N: 1, C: 2, D: 3, H: 3, W: 3, OC: 2, K: 1, Pad: 0, KD: 1},
	} {
		in, w, bias, g := randoms(rng, s.InSize()), randoms(rng, s.WeightSize()), randoms(rng, s.OC), randoms(rng, s.OutSize())
		dw, db := make([]float64, len(w)), make([]float64, len(bias))
		din := refConv3Back(s, dw, db, g, in, w)
		L := func() float64 { return dot(refConv3(s, in, w, bias), g) }
		checkFD(t, convName(backend.Float32, s)+" din", in, din, L)
		checkFD(t, convName(backend.Float32, s)+" dw", w, dw, L)
		checkFD(t, convName(backend.Float32, s)+" dbias", bias, db, L)
	}
}

func TestUpConv3ReferenceGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 49))
	for _, s := range []backend.UpConvShape{
		{N: 2, C: 3, D: 3, H: 3, W: 5, OC: 2, KD: 2},
		{N: 1, C: 2, D: 3, H: 3, W: 5, OC: 3, KD: 1},
	} {
		in, w, bias, g := randoms(rng, s.InSize()), randoms(rng, s.WeightSize()), randoms(rng, s.OC), randoms(rng, s.OutSize())
		dw, db := make([]float64, len(w)), make([]float64, len(bias))
		din := refUpConv3Back(s, dw, db, g, in, w)
		L := func() float64 { return dot(refUpConv3(s, in, w, bias), g) }
		checkFD(t, upConvName(backend.Float32, s)+" din", in, din, L)
		checkFD(t, upConvName(backend.Float32, s)+" dw", w, dw, L)
		checkFD(t, upConvName(backend.Float32, s)+" dbias", bias, db, L)
	}
}

func TestUpsample3ReferenceGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 50))
	for _, tc := range upsample3Cases[:5] {
		x, g := randoms(rng, tc.s.Len()), randoms(rng, tc.s.Scaled(tc.f).Len())
		din := refUpsample3Back(tc.s, tc.f, g)
		checkFD(t, shape5Name(backend.Float32, tc.s, tc.f), x, din, func() float64 { return dot(refUpsample3(tc.s, tc.f, x), g) })
	}
}

// TestUpsample3ReferenceIsPyTorch pins the trilinear weights of one axis
// at scale 2 to PyTorch's (align_corners=False): outputs 0 and 2n-1 copy
// the edges, and 2i+1, 2i+2 blend inputs i and i+1 by 3/4, 1/4 and 1/4,
// 3/4; and scale 1 to the identity.
func TestUpsample3ReferenceIsPyTorch(t *testing.T) {
	s, f := backend.Shape5{N: 1, C: 1, D: 1, H: 1, W: 3}, backend.Scale3{D: 1, H: 1, W: 2}
	got := refUpsample3(s, f, []float64{1, 2, 4})
	want := []float64{1, 1.25, 1.75, 2.5, 3.5, 4}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("trilinear x2 of [1 2 4] along W = %v, want %v", got, want)
		}
	}
}

func TestMaxPool3ReferenceGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 51))
	for _, tc := range pool3Cases[:4] {
		// Distinct values: no ties, so the maximum moves with no small step.
		x := make([]float32, tc.s.Len())
		for i, p := range rng.Perm(len(x)) {
			x[i] = float32(p) / float32(len(x))
		}
		out, pos, _ := refMaxPool3(tc.s, tc.k, x)
		g := randoms(rng, len(out))
		g32 := make([]float32, len(g))
		for i := range g {
			g32[i] = float32(g[i])
		}
		din := f64(refMaxPool3Back(tc.s, tc.k, g32, pos))
		x64 := f64(x)
		L := func() float64 {
			y := make([]float32, len(x64))
			for i, v := range x64 {
				y[i] = float32(v)
			}
			o, _, _ := refMaxPool3(tc.s, tc.k, y)
			return dot(f64(o), f64(g32))
		}
		// Steps of 1/4 of the spacing: float32 holds them exactly enough.
		const h = 0.25
		for i := range x64 {
			x0 := x64[i]
			x64[i] = x0 + h/float64(len(x))
			up := L()
			x64[i] = x0 - h/float64(len(x))
			down := L()
			x64[i] = x0
			fd := (up - down) / (2 * h / float64(len(x)))
			if math.Abs(fd-din[i]) > 1e-3 {
				t.Errorf("%s: din[%d] = %v, finite difference %v", shape5Name(backend.Float32, tc.s, tc.k), i, din[i], fd)
			}
		}
	}
}
