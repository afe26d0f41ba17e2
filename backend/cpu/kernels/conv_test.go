package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
)

// Tolerances.
//
// relTol32 bounds |fast - ref| <= relTol32 * (1 + max|ref|) where the fast
// float32 kernel is compared to the float32 naive reference or to the float64
// one. Both sides sum the same products, only in a different order (GEMM
// blocking, im2col layout, per-image dw accumulation). Float32 unit roundoff
// is u = 2^-24 ~ 6e-8 and the sums here have up to a few thousand terms of
// size <= 1 (C*K*K or C <= 130 for out/din, N*OH*OW <= 2584 for dw/dbias), so
// the rounding error behaves like a random walk of size ~sqrt(n)*u*max|partial
// sum|, i.e. ~1e-6 relative to the result scale. The worst case observed over
// the whole grid is < 2e-6 (dbias, the longest plain sums); 1e-5 leaves a 5x
// margin while any indexing, padding, workspace or accumulation bug gives
// errors of O(1) (garbage in ws/out/din is ~1e3). The "1 +" keeps the bound
// meaningful when the result is tiny.
const relTol32 = 1e-5

// relTolFD is the finite-difference bound, |fd - analytic| <= relTolFD *
// max(1, |analytic|). The convolutions are bilinear, so L = sum(out*R) is
// linear in each single entry and the central difference has no truncation
// error; what remains is float64 cancellation, ~|L|*1e-16/eps ~ 1e-9.
const relTolFD = 1e-6

// seedFor makes a reproducible generator per test case, independent of the
// order in which cases run.
func seedFor(name string) *rand.Rand {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(0x6d656d75, h))
}

// randSlice returns n values uniform in [-1,1), never all zero.
func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(2*r.Float64() - 1)
	}
	if n > 0 {
		s[0] = 0.5 + 0.5*float32(r.Float64()) // guarantee a non-zero entry
	}
	return s
}

// fillGarbage fills s with large, finite, non-zero values: whatever the
// kernels read from it without overwriting first shows up as an O(1e3) error.
func fillGarbage(r *rand.Rand, s []float32) {
	for i := range s {
		s[i] = float32(1e3 * (r.Float64() + 0.5))
		if r.IntN(2) == 0 {
			s[i] = -s[i]
		}
	}
}

func garbage(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	fillGarbage(r, s)
	return s
}

func to64(s []float32) []float64 {
	if s == nil {
		return nil
	}
	d := make([]float64, len(s))
	for i, v := range s {
		d[i] = float64(v)
	}
	return d
}

func clone32(s []float32) []float32 {
	if s == nil {
		return nil
	}
	return append([]float32(nil), s...)
}

// checkClose reports an error unless max|got-ref| <= rtol*(1+max|ref|).
func checkClose[T float32 | float64](t *testing.T, what string, got []float32, ref []T, rtol float64) {
	t.Helper()
	if len(got) != len(ref) {
		t.Errorf("%s: len %d, want %d", what, len(got), len(ref))
		return
	}
	var maxRef, maxDiff float64
	worst := -1
	for i := range ref {
		g, w := float64(got[i]), float64(ref[i])
		maxRef = math.Max(maxRef, math.Abs(w))
		if d := math.Abs(g - w); d > maxDiff || math.IsNaN(d) {
			maxDiff, worst = d, i
			if math.IsNaN(d) {
				maxDiff = math.Inf(1)
			}
		}
	}
	if tol := rtol * (1 + maxRef); maxDiff > tol {
		t.Errorf("%s: max |diff| = %.3g at %d (got %v, want %v) > tol %.3g (max|ref| %.3g)",
			what, maxDiff, worst, got[worst], ref[worst], tol, maxRef)
	}
}

// mustPanicKernels fails unless f panics with a string starting "kernels:".
func mustPanicKernels(t *testing.T, name string, f func()) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			if r == nil {
				t.Fatalf("no panic")
			}
			msg, ok := r.(string)
			if !ok {
				if e, isErr := r.(error); isErr {
					msg = e.Error()
				} else {
					msg = fmt.Sprint(r)
				}
			}
			if !strings.HasPrefix(msg, "kernels:") {
				t.Fatalf("panic %q does not start with \"kernels:\"", msg)
			}
		}()
		f()
	})
}

// withProcs runs f with GOMAXPROCS set to p (p <= 0: unchanged).
func withProcs(p int, f func()) {
	if p <= 0 {
		f()
		return
	}
	old := runtime.GOMAXPROCS(p)
	defer runtime.GOMAXPROCS(old)
	f()
}

func convName(s backend.ConvShape) string {
	return fmt.Sprintf("N%d_C%d_%dx%d_OC%d_K%d_P%d", s.N, s.C, s.H, s.W, s.OC, s.K, s.Pad)
}

// convShapes is the cartesian grid of odd sizes (skipping shapes with an
// empty output) plus a few shapes large enough for Sgemm to use
// several panels and parallel tasks.
func convShapes() []backend.ConvShape {
	var shapes []backend.ConvShape
	hw := [][2]int{{1, 1}, {5, 5}, {7, 7}, {9, 9}, {6, 11}}
	for _, n := range []int{1, 2, 3} {
		for _, c := range []int{1, 3, 5} {
			for _, sz := range hw {
				for _, oc := range []int{1, 4, 7} {
					for _, k := range []int{1, 3, 5} {
						for _, pad := range []int{0, 1, 2} {
							s := backend.ConvShape{N: n, C: c, H: sz[0], W: sz[1], OC: oc, K: k, Pad: pad}
							if s.OH() <= 0 || s.OW() <= 0 {
								continue
							}
							shapes = append(shapes, s)
						}
					}
				}
			}
		}
	}
	shapes = append(shapes,
		backend.ConvShape{N: 2, C: 9, H: 19, W: 23, OC: 70, K: 3, Pad: 1},  // CKK=81>64, P=437, OC=70: blocked + parallel GEMMs
		backend.ConvShape{N: 1, C: 70, H: 13, W: 17, OC: 67, K: 1, Pad: 0}, // Direct with k=70>64, parallel
		backend.ConvShape{N: 2, C: 3, H: 3, W: 4, OC: 5, K: 7, Pad: 3},     // kernel larger than the image
		backend.ConvShape{N: 1, C: 2, H: 2, W: 1, OC: 3, K: 5, Pad: 4},     // padding wider than the image
		backend.ConvShape{N: 2, C: 64, H: 16, W: 16, OC: 64, K: 3, Pad: 1}, // flipped weights packed once for all images (prepackFits)
		backend.ConvShape{N: 3, C: 5, H: 8, W: 8, OC: 13, K: 3, Pad: 1},    // 8-wide rows: panels of two rows (copyRun)
		backend.ConvShape{N: 2, C: 3, H: 4, W: 4, OC: 7, K: 3, Pad: 1},     // 4-wide rows: panels of four rows
		backend.ConvShape{N: 2, C: 5, H: 24, W: 24, OC: 9, K: 3, Pad: 1},   // many pixels: weights read unpacked, not prepacked
		backend.ConvShape{N: 1, C: 1024, H: 2, W: 3, OC: 7, K: 1, Pad: 0},  // weight rows 4 KiB apart: packed
	)
	shapes = append(shapes, gatherShapes...)
	return append(shapes, weightRowShapes...)
}

// weightRowShapes are convolutions whose weight gradient weightGradRows
// computes (output rows of 64 pixels or more, OC 16 or 32, channels that
// fill row panels of 6 and of 8, and that do not: the last panel
// overlaps; 8-row panels of 32 and of 16 columns).
var weightRowShapes = []backend.ConvShape{
	{N: 2, C: 6, H: 3, W: 64, OC: 16, K: 3, Pad: 1},
	{N: 1, C: 24, H: 2, W: 64, OC: 32, K: 3, Pad: 1},
	{N: 2, C: 12, H: 4, W: 70, OC: 16, K: 5, Pad: 2},
	{N: 2, C: 16, H: 3, W: 64, OC: 16, K: 3, Pad: 1},
	{N: 1, C: 13, H: 2, W: 96, OC: 32, K: 3, Pad: 1},
	{N: 2, C: 13, H: 3, W: 64, OC: 16, K: 3, Pad: 1}, // 8-row panels of 16 columns, overlapping
	{N: 1, C: 7, H: 2, W: 64, OC: 16, K: 3, Pad: 1},  // fewer channels than 8: panels of 6
}

// gatherShapes are convolutions whose output is tiled by 32-pixel
// segments (whole rows', or two 16-pixel rows', or four 8-pixel rows'), so the gather kernels
// serve them where there are any: forward with OC a multiple of 8 (weights
// read directly), input gradient with the flipped weights prepacked (any
// C, partial 6-row panels).
var gatherShapes = []backend.ConvShape{
	{N: 2, C: 5, H: 32, W: 32, OC: 8, K: 3, Pad: 1},
	{N: 2, C: 7, H: 32, W: 32, OC: 16, K: 5, Pad: 2},
	{N: 1, C: 16, H: 6, W: 64, OC: 16, K: 3, Pad: 1},
	{N: 2, C: 3, H: 5, W: 36, OC: 8, K: 5, Pad: 0},    // forward only: OW 32, the input gradient's 36
	{N: 2, C: 13, H: 16, W: 16, OC: 24, K: 3, Pad: 1}, // 16-pixel rows: segments of row pairs
	{N: 3, C: 7, H: 6, W: 16, OC: 8, K: 3, Pad: 1},
	{N: 1, C: 6, H: 24, W: 16, OC: 16, K: 3, Pad: 1}, // bands of row pairs
	{N: 2, C: 5, H: 8, W: 20, OC: 16, K: 5, Pad: 0},  // forward only: OW 16, the input gradient's 20
	{N: 2, C: 9, H: 8, W: 8, OC: 16, K: 3, Pad: 1},   // 8-pixel rows: segments of four
	{N: 1, C: 5, H: 12, W: 8, OC: 8, K: 3, Pad: 1},
	{N: 2, C: 3, H: 12, W: 12, OC: 8, K: 5, Pad: 0}, // forward only: OW 8, the input gradient's 12
	// 3x3, C a multiple of 8: the input gradient reads the flipped weights
	// in place (gatherFlipped8), at every row width.
	{N: 2, C: 8, H: 3, W: 32, OC: 16, K: 3, Pad: 1},
	{N: 1, C: 24, H: 16, W: 16, OC: 8, K: 3, Pad: 1},
	{N: 2, C: 16, H: 8, W: 8, OC: 40, K: 3, Pad: 1},
	// Flipped weights too large to prepack (at 1 and 2 cores) and C not a
	// multiple of 8: the input gradient's tasks pack their rows of them.
	{N: 2, C: 10, H: 8, W: 8, OC: 40, K: 3, Pad: 1},
	{N: 1, C: 20, H: 4, W: 8, OC: 64, K: 3, Pad: 1},
}

// TestConvDispatch: the shapes convShapes adds for them take the paths
// they are there for.
func TestConvDispatch(t *testing.T) {
	for _, g := range gemmImpls(t) {
		for _, p := range []int{1, 2, 7} {
			withProcs(p, func() {
				s := backend.ConvShape{N: 2, C: 64, H: 16, W: 16, OC: 64, K: 3, Pad: 1}
				if !prepackFits(g, s, ConvWorkspace(s)) {
					t.Errorf("%s, %d procs: %+v does not pack the flipped weights once", g.name, p, s)
				}
				s = backend.ConvShape{N: 1, C: 1024, H: 2, W: 3, OC: 7, K: 1, Pad: 0}
				if g.planFor(s.OC, 6, s.C, matA{lda: s.C}).direct {
					t.Errorf("%s: %+v reads weight rows 4 KiB apart unpacked", g.name, s)
				}
				// gatherShapes' last five: the input gradient's gather
				// kernels read the flipped weights in place (three), or
				// its tasks pack them (two, at 1 and 2 cores).
				for i, s := range gatherShapes[len(gatherShapes)-5:] {
					flipped := flippedWA{OC: s.OC, C: s.C, K: s.K}
					if g.gather8 == nil {
						continue
					}
					if inPlace := g.gatherDirect(s.C, flipped) && g.canGather(s.C, flipped, s.H, s.W); inPlace != (i < 3) {
						t.Errorf("%s, %d procs: %+v: flipped weights read in place %v, want %v", g.name, p, s, inPlace, i < 3)
					}
					if i >= 3 && p <= 2 && (prepackFits(g, s, ConvWorkspace(s)) || !g.canGather(s.C, flipped, s.H, s.W)) {
						t.Errorf("%s, %d procs: %+v: the input gradient's gather tasks do not pack the flipped weights", g.name, p, s)
					}
				}
			})
		}
	}
}

func TestConv2dShapeHelpers(t *testing.T) {
	s := backend.ConvShape{N: 2, C: 3, H: 6, W: 11, OC: 4, K: 3, Pad: 1}
	if s.OH() != 6 || s.OW() != 11 || s.InSize() != 2*3*6*11 || s.OutSize() != 2*4*6*11 || s.WeightSize() != 4*3*9 {
		t.Errorf("sizes of %+v wrong", s)
	}
	// The workspace holds at least the zero-padded image; TestWorkspaceIsEnough
	// holds it to what the kernels carve.
	if s.Direct() || ConvWorkspace(s) < paddedSize(3, 6, 11, 1) {
		t.Errorf("workspace of %+v: %d values", s, ConvWorkspace(s))
	}
	d := backend.ConvShape{N: 1, C: 3, H: 5, W: 7, OC: 2, K: 1, Pad: 0}
	if !d.Direct() {
		t.Errorf("1x1 pad 0 should be Direct")
	}
	p := backend.ConvShape{N: 1, C: 3, H: 5, W: 7, OC: 2, K: 1, Pad: 1}
	if p.Direct() || ConvWorkspace(p) < paddedSize(3, 5, 7, 1) {
		t.Errorf("1x1 pad 1 must not be Direct")
	}
}

func TestConv2dMatchesNaive(t *testing.T) {
	for _, s := range convShapes() {
		t.Run(convName(s), func(t *testing.T) { testConvShape(t, s) })
	}
}

// TestConv2dMatchesNaiveProcs reruns the grid under other GOMAXPROCS values
// so the ParallelFor splits in im2col/col2im/bias, and Sgemm's parallel
// tasks, land at other boundaries (serial, and an odd worker count).
func TestConv2dMatchesNaiveProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, p := range []int{1, 7} {
		for _, s := range convShapes() {
			t.Run(fmt.Sprintf("procs%d/%s", p, convName(s)), func(t *testing.T) {
				withProcs(p, func() { testConvShape(t, s) })
			})
		}
	}
}

func testConvShape(t *testing.T, s backend.ConvShape) {
	r := seedFor(convName(s))
	in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
	dout := randSlice(r, s.OutSize())
	dw0, db0 := randSlice(r, s.WeightSize()), randSlice(r, s.OC) // pre-filled: dw/dbias accumulate
	in64, w64, bias64, dout64 := to64(in), to64(w), to64(bias), to64(dout)

	// References, float32 and float64.
	type fwdRef struct {
		r32 []float32
		r64 []float64
	}
	fwd := map[bool]fwdRef{}
	for _, hasBias := range []bool{true, false} {
		b32, b64 := bias, bias64
		if !hasBias {
			b32, b64 = nil, nil
		}
		ref := fwdRef{make([]float32, s.OutSize()), make([]float64, s.OutSize())}
		Conv2dNaive(s, ref.r32, in, w, b32)
		Conv2dNaive(s, ref.r64, in64, w64, b64)
		checkClose(t, "naive float32 vs float64 forward", ref.r32, ref.r64, relTol32)
		fwd[hasBias] = ref
	}
	din32, dw32, db32 := make([]float32, s.InSize()), clone32(dw0), clone32(db0)
	Conv2dBackwardNaive(s, din32, dw32, db32, dout, in, w)
	din64, dw64, db64 := make([]float64, s.InSize()), to64(dw0), to64(db0)
	Conv2dBackwardNaive(s, din64, dw64, db64, dout64, in64, w64)
	checkClose(t, "naive float32 vs float64 din", din32, din64, relTol32)
	checkClose(t, "naive float32 vs float64 dw", dw32, dw64, relTol32)
	checkClose(t, "naive float32 vs float64 dbias", db32, db64, relTol32)
	// The naive reference's own nil paths must not change dw.
	dwNil := clone32(dw0)
	Conv2dBackwardNaive(s, nil, dwNil, nil, dout, in, w)
	checkClose(t, "naive dw with din,dbias nil", dwNil, dw32, 0)

	// Both GEMM micro-kernels (the Go one everywhere, the assembly one
	// where the CPU has it) under the same conv driver.
	for _, g := range gemmImpls(t) {
		wsSizes := map[string]int{"ws=exact": ConvWorkspace(s), "ws=larger": ConvWorkspace(s) + 37}
		for wsName, wsLen := range wsSizes {
			var ws []float32
			if wsLen > 0 {
				ws = make([]float32, wsLen)
			}
			for _, hasBias := range []bool{true, false} {
				b := bias
				if !hasBias {
					b = nil
				}
				v := g.name + fmt.Sprintf(" forward bias=%v %s", hasBias, wsName)
				out := garbage(r, s.OutSize()) // out is overwritten
				fillGarbage(r, ws)
				conv2d(g, s, out, Float32Image(in), w, b, ws)
				checkClose(t, v+" vs naive32", out, fwd[hasBias].r32, relTol32)
				checkClose(t, v+" vs naive64", out, fwd[hasBias].r64, relTol32)

				for _, withDin := range []bool{true, false} {
					v := g.name + fmt.Sprintf(" backward bias=%v din=%v %s", hasBias, withDin, wsName)
					var din, dbias []float32
					if withDin {
						din = garbage(r, s.InSize()) // din is overwritten
					}
					if hasBias {
						dbias = clone32(db0)
					}
					dw := clone32(dw0)
					fillGarbage(r, ws)
					conv2dBackward(g, s, din, dw, dbias, dout, Float32Image(in), w, ws)
					if withDin {
						checkClose(t, v+": din vs naive32", din, din32, relTol32)
						checkClose(t, v+": din vs naive64", din, din64, relTol32)
					}
					checkClose(t, v+": dw vs naive32", dw, dw32, relTol32)
					checkClose(t, v+": dw vs naive64", dw, dw64, relTol32)
					if hasBias {
						checkClose(t, v+": dbias vs naive32", dbias, db32, relTol32)
						checkClose(t, v+": dbias vs naive64", dbias, db64, relTol32)
					}
				}
			}
		}
	}
}

// TestConv2dBackwardAccumulates calls the fast backward twice into the same
// dw/dbias: the result must be dw0 + 2*grad.
func TestConv2dBackwardAccumulates(t *testing.T) {
	for _, s := range []backend.ConvShape{
		{N: 2, C: 3, H: 6, W: 11, OC: 4, K: 3, Pad: 1},
		{N: 3, C: 5, H: 7, W: 7, OC: 7, K: 1, Pad: 0},
	} {
		t.Run(convName(s), func(t *testing.T) {
			r := seedFor("acc" + convName(s))
			in, w, dout := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OutSize())
			dw0, db0 := randSlice(r, s.WeightSize()), randSlice(r, s.OC)
			dwRef, dbRef := to64(dw0), to64(db0)
			for range 2 {
				Conv2dBackwardNaive(s, nil, dwRef, dbRef, to64(dout), to64(in), to64(w))
			}
			dw, db := clone32(dw0), clone32(db0)
			ws := garbage(r, ConvWorkspace(s))
			for range 2 {
				Conv2dBackward(s, nil, dw, db, dout, in, w, ws)
			}
			checkClose(t, "dw", dw, dwRef, relTol32)
			checkClose(t, "dbias", db, dbRef, relTol32)
		})
	}
}

func TestConv2dPanics(t *testing.T) {
	s := backend.ConvShape{N: 2, C: 3, H: 5, W: 6, OC: 4, K: 3, Pad: 1}
	in, out, w, b := make([]float32, s.InSize()), make([]float32, s.OutSize()), make([]float32, s.WeightSize()), make([]float32, s.OC)
	ws := make([]float32, ConvWorkspace(s))
	in64, out64, w64, b64 := make([]float64, s.InSize()), make([]float64, s.OutSize()), make([]float64, s.WeightSize()), make([]float64, s.OC)
	short := func(x []float32) []float32 { return x[:len(x)-1] }
	long := func(x []float32) []float32 { return append(clone32(x), 0) }

	// Sanity: the well-formed calls do not panic.
	Conv2d(s, out, in, w, b, ws)
	Conv2dBackward(s, clone32(in), clone32(w), clone32(b), out, in, w, ws)
	Conv2dNaive(s, out64, in64, w64, b64)

	bad := map[string]backend.ConvShape{
		"N=0":          {N: 0, C: 3, H: 5, W: 6, OC: 4, K: 3, Pad: 1},
		"C=0":          {N: 2, C: 0, H: 5, W: 6, OC: 4, K: 3, Pad: 1},
		"OC=0":         {N: 2, C: 3, H: 5, W: 6, OC: 0, K: 3, Pad: 1},
		"K=0":          {N: 2, C: 3, H: 5, W: 6, OC: 4, K: 0, Pad: 1},
		"Pad<0":        {N: 2, C: 3, H: 5, W: 6, OC: 4, K: 1, Pad: -1},
		"OH<=0":        {N: 1, C: 1, H: 2, W: 9, OC: 1, K: 5, Pad: 1},
		"OW<=0":        {N: 1, C: 1, H: 9, W: 2, OC: 1, K: 5, Pad: 0},
		"negative dim": {N: 1, C: 1, H: -3, W: 9, OC: 1, K: 1, Pad: 0},
	}
	for name, bs := range bad {
		mustPanicKernels(t, "shape "+name+"/Conv2d", func() { Conv2d(bs, out, in, w, b, ws) })
		mustPanicKernels(t, "shape "+name+"/Conv2dBackward", func() { Conv2dBackward(bs, in, w, b, out, in, w, ws) })
		mustPanicKernels(t, "shape "+name+"/Conv2dNaive", func() { Conv2dNaive(bs, out, in, w, b) })
		mustPanicKernels(t, "shape "+name+"/Conv2dBackwardNaive", func() { Conv2dBackwardNaive(bs, in, w, b, out, in, w) })
	}

	fwd := map[string]func(){
		"out short":    func() { Conv2d(s, short(out), in, w, b, ws) },
		"out long":     func() { Conv2d(s, long(out), in, w, b, ws) },
		"in short":     func() { Conv2d(s, out, short(in), w, b, ws) },
		"w short":      func() { Conv2d(s, out, in, short(w), b, ws) },
		"w long":       func() { Conv2d(s, out, in, long(w), b, ws) },
		"bias short":   func() { Conv2d(s, out, in, w, short(b), ws) },
		"bias empty":   func() { Conv2d(s, out, in, w, []float32{}, ws) },
		"ws short":     func() { Conv2d(s, out, in, w, b, short(ws)) },
		"ws nil":       func() { Conv2d(s, out, in, w, b, nil) },
		"naive out":    func() { Conv2dNaive(s, out64[1:], in64, w64, b64) },
		"naive in":     func() { Conv2dNaive(s, out64, in64[1:], w64, b64) },
		"naive w":      func() { Conv2dNaive(s, out64, in64, w64[1:], b64) },
		"naive bias":   func() { Conv2dNaive(s, out64, in64, w64, b64[1:]) },
		"naive32 bias": func() { Conv2dNaive(s, out, in, w, long(b)) },
	}
	for name, f := range fwd {
		mustPanicKernels(t, "forward "+name, f)
	}
	din, dw, db := clone32(in), clone32(w), clone32(b)
	bwd := map[string]func(){
		"dout short":  func() { Conv2dBackward(s, din, dw, db, short(out), in, w, ws) },
		"in short":    func() { Conv2dBackward(s, din, dw, db, out, short(in), w, ws) },
		"w short":     func() { Conv2dBackward(s, din, dw, db, out, in, short(w), ws) },
		"din short":   func() { Conv2dBackward(s, short(din), dw, db, out, in, w, ws) },
		"din long":    func() { Conv2dBackward(s, long(din), dw, db, out, in, w, ws) },
		"dw short":    func() { Conv2dBackward(s, din, short(dw), db, out, in, w, ws) },
		"dw nil":      func() { Conv2dBackward(s, din, nil, db, out, in, w, ws) },
		"dbias short": func() { Conv2dBackward(s, din, dw, short(db), out, in, w, ws) },
		"ws short":    func() { Conv2dBackward(s, din, dw, db, out, in, w, short(ws)) },
		"naive din":   func() { Conv2dBackwardNaive(s, short(din), dw, db, out, in, w) },
		"naive dw":    func() { Conv2dBackwardNaive(s, din, long(dw), db, out, in, w) },
		"naive dbias": func() { Conv2dBackwardNaive(s, din, dw, long(db), out, in, w) },
		"naive dout":  func() { Conv2dBackwardNaive(s, din, dw, db, long(out), in, w) },
	}
	for name, f := range bwd {
		mustPanicKernels(t, "backward "+name, f)
	}
	// Direct shapes need no padded image, but a mismatch still panics.
	d := backend.ConvShape{N: 1, C: 3, H: 4, W: 5, OC: 2, K: 1, Pad: 0}
	din2, in2, w2, out2 := make([]float32, d.InSize()), make([]float32, d.InSize()), make([]float32, d.WeightSize()), make([]float32, d.OutSize())
	ws2 := make([]float32, ConvWorkspace(d))
	Conv2d(d, out2, in2, w2, nil, ws2)
	Conv2dBackward(d, din2, clone32(w2), nil, out2, in2, w2, ws2)
	mustPanicKernels(t, "direct out short", func() { Conv2d(d, short(out2), in2, w2, nil, ws2) })
	mustPanicKernels(t, "direct din short", func() { Conv2dBackward(d, short(din2), clone32(w2), nil, out2, in2, w2, ws2) })
}

// convLoss is L = sum(out * R) with out = Conv2dNaive[float64](in, w, bias).
func convLoss(s backend.ConvShape, in, w, bias, R []float64) float64 {
	out := make([]float64, s.OutSize())
	Conv2dNaive(s, out, in, w, bias)
	var l float64
	for i, v := range out {
		l += v * R[i]
	}
	return l
}

// centralDiff perturbs x[i] by +-eps and returns (f(+) - f(-)) / 2eps.
func centralDiff(x []float64, i int, f func() float64) float64 {
	const eps = 1e-6
	v := x[i]
	x[i] = v + eps
	lp := f()
	x[i] = v - eps
	lm := f()
	x[i] = v
	return (lp - lm) / (2 * eps)
}

func checkFD(t *testing.T, what string, fd, an float64) {
	t.Helper()
	if d := math.Abs(fd - an); d > relTolFD*math.Max(1, math.Abs(an)) || math.IsNaN(d) {
		t.Errorf("%s: finite difference %.10g, analytic %.10g (diff %.3g)", what, fd, an, d)
	}
}

// pickIndices returns up to k distinct random indices in [0,n), always
// including 0 and n-1 (corners: the padding edges).
func pickIndices(r *rand.Rand, n, k int) []int {
	if n <= k {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	idx := []int{0, n - 1}
	for _, i := range r.Perm(n)[:k-2] {
		if i != 0 && i != n-1 {
			idx = append(idx, i)
		}
	}
	return idx
}

func TestConv2dBackwardNaiveFiniteDifference(t *testing.T) {
	for _, s := range []backend.ConvShape{
		{N: 2, C: 3, H: 5, W: 6, OC: 4, K: 3, Pad: 1},
		{N: 1, C: 2, H: 4, W: 7, OC: 3, K: 5, Pad: 2},
		{N: 2, C: 2, H: 3, W: 5, OC: 3, K: 1, Pad: 1},
		{N: 1, C: 3, H: 6, W: 5, OC: 2, K: 3, Pad: 0},
	} {
		t.Run(convName(s), func(t *testing.T) {
			r := seedFor("fd" + convName(s))
			in, w, bias := to64(randSlice(r, s.InSize())), to64(randSlice(r, s.WeightSize())), to64(randSlice(r, s.OC))
			R := to64(randSlice(r, s.OutSize()))
			din, dw, db := make([]float64, len(in)), make([]float64, len(w)), make([]float64, len(bias))
			Conv2dBackwardNaive(s, din, dw, db, R, in, w)
			loss := func() float64 { return convLoss(s, in, w, bias, R) }
			for _, i := range pickIndices(r, len(in), 8) {
				checkFD(t, fmt.Sprintf("din[%d]", i), centralDiff(in, i, loss), din[i])
			}
			for _, i := range pickIndices(r, len(w), 8) {
				checkFD(t, fmt.Sprintf("dw[%d]", i), centralDiff(w, i, loss), dw[i])
			}
			for i := range bias {
				checkFD(t, fmt.Sprintf("dbias[%d]", i), centralDiff(bias, i, loss), db[i])
			}
		})
	}
}

// TestIm2colCol2im checks im2col entry by entry against its definition (it
// only copies, so exactly) and col2im as its adjoint:
// <im2col(x), c> == <x, col2im(c)>. col starts as garbage, dx too.
func TestIm2colCol2im(t *testing.T) {
	for _, s := range convShapes() {
		if s.Direct() {
			continue
		}
		s.N = 1
		t.Run(convName(s), func(t *testing.T) {
			r := seedFor("im2col" + convName(s))
			OH, OW, K := s.OH(), s.OW(), s.K
			P := OH * OW
			x := randSlice(r, s.C*s.H*s.W)
			col := garbage(r, s.C*K*K*P) // the im2col matrix
			im2col(s, col, x)
			for c := 0; c < s.C; c++ {
				for i := 0; i < K; i++ {
					for j := 0; j < K; j++ {
						for y := 0; y < OH; y++ {
							for xx := 0; xx < OW; xx++ {
								var want float32
								iy, ix := y+i-s.Pad, xx+j-s.Pad
								if iy >= 0 && iy < s.H && ix >= 0 && ix < s.W {
									want = x[(c*s.H+iy)*s.W+ix]
								}
								if got := col[((c*K+i)*K+j)*P+y*OW+xx]; got != want {
									t.Fatalf("col[c=%d,i=%d,j=%d,y=%d,x=%d] = %v, want %v", c, i, j, y, xx, got, want)
								}
							}
						}
					}
				}
			}
			cv := randSlice(r, len(col))
			dx := garbage(r, len(x))
			col2im(s, dx, cv)
			var lhs, rhs, scale float64
			for k := range col {
				lhs += float64(col[k]) * float64(cv[k])
				scale += math.Abs(float64(col[k]) * float64(cv[k]))
			}
			for k := range x {
				rhs += float64(x[k]) * float64(dx[k])
			}
			if math.Abs(lhs-rhs) > relTol32*(1+scale) {
				t.Errorf("<im2col(x),c> = %v, <x,col2im(c)> = %v", lhs, rhs)
			}
		})
	}
}

// TestConvGatherBitIdentical: where the gather kernels serve a convolution
// (gatherShapes), forward, input and weight gradients are the bits the
// packed path gives (the same products in the same order), at 1 and 2
// cores, with the workspace held to ConvWorkspace; and the shapes do reach
// the gather path.
func TestConvGatherBitIdentical(t *testing.T) {
	for _, g := range gemmImpls(t) {
		if g.gather8 == nil {
			continue
		}
		packed := g
		packed.gather8, packed.gather6 = nil, nil
		g.strict, packed.strict = true, true
		for _, s := range gatherShapes {
			for _, procs := range []int{1, 2} {
				name := fmt.Sprintf("%s/procs%d/%s", g.name, procs, convName(s))
				withProcs(procs, func() {
					// The forward's weights as conv2d reads them.
					if !g.canGather(s.OC, matA{lda: s.C * s.K * s.K}, s.OH(), s.OW()) {
						t.Fatalf("%s: forward not gathered", name)
					}
					r := seedFor("gather " + name)
					in, w, bias, dout := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC), randSlice(r, s.OutSize())
					ws := make([]float32, ConvWorkspace(s))
					// The input gradient's: the output gradient padded to
					// the input's rows, the flipped weights prepacked.
					tiled := segmentRows(s.W) > 0 && s.H%segmentRows(s.W) == 0
					dinGathered := tiled && s.K-1-s.Pad >= 0 &&
						(s.N*s.H*s.W > 2*taskCols || prepackFits(g, s, len(ws)) || s.H*s.W <= gatherRowTasks)
					if !dinGathered && tiled {
						t.Fatalf("%s: input gradient not gathered", name)
					}
					run := func(g gemmImpl) (out, din, dw, dbias []float32) {
						out = make([]float32, s.OutSize())
						conv2d(g, s, out, Float32Image(in), w, bias, ws)
						din, dw, dbias = make([]float32, s.InSize()), make([]float32, s.WeightSize()), make([]float32, s.OC)
						conv2dBackward(g, s, din, dw, dbias, dout, Float32Image(in), w, ws)
						return out, din, dw, dbias
					}
					o1, di1, dw1, db1 := run(g)
					o2, di2, dw2, db2 := run(packed)
					sameBits(t, name+": out", o1, o2)
					sameBits(t, name+": din", di1, di2)
					sameBits(t, name+": dw", dw1, dw2)
					sameBits(t, name+": dbias", db1, db2)
				})
			}
		}
	}
}

// TestWeightGradRows: the transposed weight gradient, on every
// implementation at 1 and 2 cores, adds the naive gradient to dw (which it
// accumulates onto) for weightRowShapes, within the scratch the backward
// pass gives it; and it declines where it does not apply.
func TestWeightGradRows(t *testing.T) {
	for _, g := range gemmImpls(t) {
		g.strict = true
		for _, s := range weightRowShapes {
			for _, procs := range []int{1, 2} {
				name := fmt.Sprintf("%s/procs%d/%s", g.name, procs, convName(s))
				withProcs(procs, func() {
					r := seedFor("weight rows " + name)
					in, dout, dw0 := randSlice(r, s.InSize()), randSlice(r, s.OutSize()), randSlice(r, s.WeightSize())
					want := clone32(dw0)
					Conv2dBackwardNaive(s, nil, want, nil, dout, in, make([]float32, s.WeightSize()))
					one := s.Images(1)
					xpBuf := make([]float32, paddedSize(s.C, s.H, s.W, s.Pad))
					// What conv2dBackward hands the weight gradient: the
					// workspace less the prepacked weights and padded image.
					scratch := make([]float32, ConvWorkspace(one)-backPadSize(one, true))
					dw := clone32(dw0)
					for n := 0; n < s.N; n++ {
						xp := padImage(nil, xpBuf, Float32Image(in[n*s.C*s.H*s.W:(n+1)*s.C*s.H*s.W]), s.C, s.H, s.W, s.Pad)
						im := im2colP{xp: xp, C: s.C, Hp: s.H + 2*s.Pad, Wp: s.W + 2*s.Pad, K: s.K, OH: s.OH(), OW: s.OW()}
						if !g.weightGradRows(one, dw, dout[n*one.OutSize():(n+1)*one.OutSize()], im, scratch) {
							t.Fatalf("%s: declined", name)
						}
					}
					checkClose(t, name, dw, want, relTol32)
					if g.narrowDirect8 == nil {
						return
					}
					// The 8-row, 16-column kernel gives the 6-row one's bits.
					g6 := g
					g6.narrowDirect8 = nil
					dw6 := clone32(dw0)
					for n := 0; n < s.N; n++ {
						xp := padImage(nil, xpBuf, Float32Image(in[n*s.C*s.H*s.W:(n+1)*s.C*s.H*s.W]), s.C, s.H, s.W, s.Pad)
						im := im2colP{xp: xp, C: s.C, Hp: s.H + 2*s.Pad, Wp: s.W + 2*s.Pad, K: s.K, OH: s.OH(), OW: s.OW()}
						g6.weightGradRows(one, dw6, dout[n*one.OutSize():(n+1)*one.OutSize()], im, scratch)
					}
					if !slices.Equal(dw, dw6) {
						t.Errorf("%s: the 8x16 kernel's bits differ from the 6x16 one's", name)
					}
				})
			}
		}
		// Declined: 32-pixel rows, 48 output channels, 5 channels.
		for _, s := range []backend.ConvShape{
			{N: 1, C: 6, H: 3, W: 32, OC: 16, K: 3, Pad: 1},
			{N: 1, C: 6, H: 3, W: 64, OC: 48, K: 3, Pad: 1},
			{N: 1, C: 5, H: 3, W: 64, OC: 16, K: 3, Pad: 1},
		} {
			im := im2colP{xp: make([]float32, paddedSize(s.C, s.H, s.W, s.Pad)), C: s.C, Hp: s.H + 2, Wp: s.W + 2, K: 3, OH: s.OH(), OW: s.OW()}
			if g.weightGradRows(s, make([]float32, s.WeightSize()), make([]float32, s.OutSize()), im, make([]float32, 1<<20)) {
				t.Errorf("%s: %s: not declined", g.name, convName(s))
			}
		}
	}
}

// TestPrepackFlipped3: the flipped 3x3 weights prepacked in w's order
// (prepack3) are the panels packA gives, zero rows included, for partial
// panels and kernels split across k slabs, on one and several cores.
func TestPrepackFlipped3(t *testing.T) {
	// byPanels hides flippedWA's type from prepackA: the panel-by-panel path.
	type byPanels struct{ packerA }
	for _, sh := range [][2]int{{5, 7}, {13, 30}, {6, 29}, {64, 64}} {
		C, OC := sh[0], sh[1]
		src := flippedWA{w: randSlice(seedFor(fmt.Sprint("prepack3", sh)), OC*C*9), OC: OC, C: C, K: 3}
		want := prepackA(nil, byPanels{src}, C, OC*9, nil)
		for _, procs := range []int{1, 3} {
			withProcs(procs, func() {
				got := prepackA(NewTeam(), src, C, OC*9, garbage(seedFor("garbage"), prepackSize(C, OC*9)))
				sameBits(t, fmt.Sprintf("C=%d OC=%d procs %d", C, OC, procs), got.data, want.data)
			})
		}
	}
}

// TestConvHalfImageBitIdentical: a 16-bit input, widened as it is padded
// (HalfImage), gives the bits of the same convolution on its widened
// float32 values, forward and backward, on every shape of convShapes that
// pads (the gather kernels' bands and padded images, packed im2col, the
// weight gradient's rows) at 1 and 2 cores, in every implementation; a
// Direct one refuses it.
func TestConvHalfImageBitIdentical(t *testing.T) {
	for _, g := range gemmImpls(t) {
		for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
			for _, s := range convShapes() {
				if s.Direct() {
					continue
				}
				for _, procs := range []int{1, 2} {
					name := fmt.Sprintf("%s/%s/procs%d/%s", g.name, dt, procs, convName(s))
					withProcs(procs, func() {
						r := seedFor("half " + name)
						wide := randSlice(r, s.InSize())
						half := make([]uint16, len(wide))
						Narrow(dt)(half, wide)
						Widen(dt)(wide, half) // the values the 16-bit input holds
						w, bias, dout := randSlice(r, s.WeightSize()), randSlice(r, s.OC), randSlice(r, s.OutSize())
						ws := make([]float32, ConvWorkspace(s))
						run := func(in Image) (out, din, dw, dbias []float32) {
							out = make([]float32, s.OutSize())
							conv2d(g, s, out, in, w, bias, ws)
							din, dw, dbias = make([]float32, s.InSize()), make([]float32, s.WeightSize()), make([]float32, s.OC)
							conv2dBackward(g, s, din, dw, dbias, dout, in, w, ws)
							return out, din, dw, dbias
						}
						o1, di1, dw1, db1 := run(HalfImage(dt, half))
						o2, di2, dw2, db2 := run(Float32Image(wide))
						sameBits(t, name+": out", o1, o2)
						sameBits(t, name+": din", di1, di2)
						sameBits(t, name+": dw", dw1, dw2)
						sameBits(t, name+": dbias", db1, db2)
					})
				}
			}
		}
	}
	s := backend.ConvShape{N: 1, C: 3, H: 4, W: 4, OC: 2, K: 1}
	defer func() {
		if recover() == nil {
			t.Errorf("a 1x1 convolution of a 16-bit image did not panic")
		}
	}()
	(*Team)(nil).Conv2dImage(s, make([]float32, s.OutSize()), HalfImage(backend.Float16, make([]uint16, s.InSize())),
		make([]float32, s.WeightSize()), nil, make([]float32, ConvWorkspace(s)))
}
