package kernels

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend"
)

func upName(s backend.UpConvShape) string {
	return fmt.Sprintf("N%d_C%d_%dx%d_OC%d", s.N, s.C, s.H, s.W, s.OC)
}

// upConvShapes is the grid of odd sizes plus shapes large enough for Sgemm
// to use several panels and parallel tasks.
func upConvShapes() []backend.UpConvShape {
	var shapes []backend.UpConvShape
	for _, n := range []int{1, 2, 3} {
		for _, c := range []int{1, 3, 5} {
			for _, sz := range [][2]int{{1, 1}, {5, 5}, {7, 7}, {9, 9}, {6, 11}, {2, 3}} {
				for _, oc := range []int{1, 4, 7} {
					shapes = append(shapes, backend.UpConvShape{N: n, C: c, H: sz[0], W: sz[1], OC: oc})
				}
			}
		}
	}
	return append(shapes,
		backend.UpConvShape{N: 2, C: 70, H: 17, W: 19, OC: 33}, // OC*4=132, HW=323, k=C=70
		backend.UpConvShape{N: 1, C: 130, H: 9, W: 15, OC: 17}, // dw: C=130 rows, k=HW=135
	)
}

func TestUpConvShapeHelpers(t *testing.T) {
	s := backend.UpConvShape{N: 2, C: 3, H: 6, W: 11, OC: 4}
	if s.InSize() != 2*3*6*11 || s.OutSize() != 2*4*12*22 || s.WeightSize() != 3*4*4 || UpConvWorkspace(s) < 4*4*6*11 {
		t.Errorf("sizes of %+v wrong", s)
	}
}

func TestUpConvMatchesNaive(t *testing.T) {
	for _, s := range upConvShapes() {
		t.Run(upName(s), func(t *testing.T) { testUpConvShape(t, s) })
	}
}

func TestUpConvMatchesNaiveProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, p := range []int{1, 7} {
		for _, s := range upConvShapes() {
			t.Run(fmt.Sprintf("procs%d/%s", p, upName(s)), func(t *testing.T) {
				withProcs(p, func() { testUpConvShape(t, s) })
			})
		}
	}
}

func testUpConvShape(t *testing.T, s backend.UpConvShape) {
	r := seedFor(upName(s))
	in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
	dout := randSlice(r, s.OutSize())
	dw0, db0 := randSlice(r, s.WeightSize()), randSlice(r, s.OC) // pre-filled: dw/dbias accumulate
	in64, w64, bias64, dout64 := to64(in), to64(w), to64(bias), to64(dout)

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
		UpConvNaive(s, ref.r32, in, w, b32)
		UpConvNaive(s, ref.r64, in64, w64, b64)
		checkClose(t, "naive float32 vs float64 forward", ref.r32, ref.r64, relTol32)
		fwd[hasBias] = ref
	}
	din32, dw32, db32 := make([]float32, s.InSize()), clone32(dw0), clone32(db0)
	UpConvBackwardNaive(s, din32, dw32, db32, dout, in, w)
	din64, dw64, db64 := make([]float64, s.InSize()), to64(dw0), to64(db0)
	UpConvBackwardNaive(s, din64, dw64, db64, dout64, in64, w64)
	checkClose(t, "naive float32 vs float64 din", din32, din64, relTol32)
	checkClose(t, "naive float32 vs float64 dw", dw32, dw64, relTol32)
	checkClose(t, "naive float32 vs float64 dbias", db32, db64, relTol32)
	dwNil := clone32(dw0)
	UpConvBackwardNaive(s, nil, dwNil, nil, dout, in, w)
	checkClose(t, "naive dw with din,dbias nil", dwNil, dw32, 0)

	// Both GEMM micro-kernels (the Go one everywhere, the assembly one
	// where the CPU has it) under the same conv driver.
	for _, g := range gemmImpls(t) {
		for _, wsLen := range []int{UpConvWorkspace(s), UpConvWorkspace(s) + 41} {
			wsName := "ws=exact"
			if wsLen > UpConvWorkspace(s) {
				wsName = "ws=larger"
			}
			ws := make([]float32, wsLen)
			for _, hasBias := range []bool{true, false} {
				b := bias
				if !hasBias {
					b = nil
				}
				v := g.name + fmt.Sprintf(" forward bias=%v %s", hasBias, wsName)
				out := garbage(r, s.OutSize())
				fillGarbage(r, ws)
				upConv(g, s, out, in, w, b, ws)
				checkClose(t, v+" vs naive32", out, fwd[hasBias].r32, relTol32)
				checkClose(t, v+" vs naive64", out, fwd[hasBias].r64, relTol32)

				for _, withDin := range []bool{true, false} {
					v := g.name + fmt.Sprintf(" backward bias=%v din=%v %s", hasBias, withDin, wsName)
					var din, dbias []float32
					if withDin {
						din = garbage(r, s.InSize())
					}
					if hasBias {
						dbias = clone32(db0)
					}
					dw := clone32(dw0)
					fillGarbage(r, ws)
					upConvBackward(g, s, din, dw, dbias, dout, in, w, ws)
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

// TestUpConvBackwardAccumulates calls the fast backward twice into the same
// dw/dbias: the result must be dw0 + 2*grad.
func TestUpConvBackwardAccumulates(t *testing.T) {
	s := backend.UpConvShape{N: 3, C: 5, H: 6, W: 11, OC: 4}
	r := seedFor("acc" + upName(s))
	in, w, dout := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OutSize())
	dw0, db0 := randSlice(r, s.WeightSize()), randSlice(r, s.OC)
	dwRef, dbRef := to64(dw0), to64(db0)
	for range 2 {
		UpConvBackwardNaive(s, nil, dwRef, dbRef, to64(dout), to64(in), to64(w))
	}
	dw, db := clone32(dw0), clone32(db0)
	ws := garbage(r, UpConvWorkspace(s))
	for range 2 {
		UpConvBackward(s, nil, dw, db, dout, in, w, ws)
	}
	checkClose(t, "dw", dw, dwRef, relTol32)
	checkClose(t, "dbias", db, dbRef, relTol32)
}

func TestUpConvPanics(t *testing.T) {
	s := backend.UpConvShape{N: 2, C: 3, H: 5, W: 6, OC: 4}
	in, out, w, b := make([]float32, s.InSize()), make([]float32, s.OutSize()), make([]float32, s.WeightSize()), make([]float32, s.OC)
	ws := make([]float32, UpConvWorkspace(s))
	in64, out64, w64, b64 := make([]float64, s.InSize()), make([]float64, s.OutSize()), make([]float64, s.WeightSize()), make([]float64, s.OC)
	short := func(x []float32) []float32 { return x[:len(x)-1] }
	long := func(x []float32) []float32 { return append(clone32(x), 0) }

	UpConv(s, out, in, w, b, ws)
	UpConvBackward(s, clone32(in), clone32(w), clone32(b), out, in, w, ws)
	UpConvNaive(s, out64, in64, w64, b64)

	bad := map[string]backend.UpConvShape{
		"N=0":  {N: 0, C: 3, H: 5, W: 6, OC: 4},
		"C=0":  {N: 2, C: 0, H: 5, W: 6, OC: 4},
		"H=0":  {N: 2, C: 3, H: 0, W: 6, OC: 4},
		"W<0":  {N: 2, C: 3, H: 5, W: -6, OC: 4},
		"OC=0": {N: 2, C: 3, H: 5, W: 6, OC: 0},
	}
	for name, bs := range bad {
		mustPanicKernels(t, "shape "+name+"/UpConv", func() { UpConv(bs, out, in, w, b, ws) })
		mustPanicKernels(t, "shape "+name+"/UpConvBackward", func() { UpConvBackward(bs, in, w, b, out, in, w, ws) })
		mustPanicKernels(t, "shape "+name+"/UpConvNaive", func() { UpConvNaive(bs, out, in, w, b) })
		mustPanicKernels(t, "shape "+name+"/UpConvBackwardNaive", func() { UpConvBackwardNaive(bs, in, w, b, out, in, w) })
	}

	fwd := map[string]func(){
		"out short":  func() { UpConv(s, short(out), in, w, b, ws) },
		"out long":   func() { UpConv(s, long(out), in, w, b, ws) },
		"in short":   func() { UpConv(s, out, short(in), w, b, ws) },
		"w short":    func() { UpConv(s, out, in, short(w), b, ws) },
		"bias short": func() { UpConv(s, out, in, w, short(b), ws) },
		"bias empty": func() { UpConv(s, out, in, w, []float32{}, ws) },
		"ws short":   func() { UpConv(s, out, in, w, b, short(ws)) },
		"ws nil":     func() { UpConv(s, out, in, w, b, nil) },
		"naive out":  func() { UpConvNaive(s, out64[1:], in64, w64, b64) },
		"naive in":   func() { UpConvNaive(s, out64, in64[1:], w64, b64) },
		"naive w":    func() { UpConvNaive(s, out64, in64, w64[1:], b64) },
		"naive bias": func() { UpConvNaive(s, out64, in64, w64, b64[1:]) },
	}
	for name, f := range fwd {
		mustPanicKernels(t, "forward "+name, f)
	}
	din, dw, db := clone32(in), clone32(w), clone32(b)
	bwd := map[string]func(){
		"dout short":  func() { UpConvBackward(s, din, dw, db, short(out), in, w, ws) },
		"in short":    func() { UpConvBackward(s, din, dw, db, out, short(in), w, ws) },
		"w short":     func() { UpConvBackward(s, din, dw, db, out, in, short(w), ws) },
		"din short":   func() { UpConvBackward(s, short(din), dw, db, out, in, w, ws) },
		"din long":    func() { UpConvBackward(s, long(din), dw, db, out, in, w, ws) },
		"dw short":    func() { UpConvBackward(s, din, short(dw), db, out, in, w, ws) },
		"dw nil":      func() { UpConvBackward(s, din, nil, db, out, in, w, ws) },
		"dbias short": func() { UpConvBackward(s, din, dw, short(db), out, in, w, ws) },
		"ws short":    func() { UpConvBackward(s, din, dw, db, out, in, w, short(ws)) },
		"naive din":   func() { UpConvBackwardNaive(s, short(din), dw, db, out, in, w) },
		"naive dw":    func() { UpConvBackwardNaive(s, din, long(dw), db, out, in, w) },
		"naive dbias": func() { UpConvBackwardNaive(s, din, dw, long(db), out, in, w) },
	}
	for name, f := range bwd {
		mustPanicKernels(t, "backward "+name, f)
	}
}

// upLoss is L = sum(out * R) with out = UpConvNaive[float64](in, w, bias).
func upLoss(s backend.UpConvShape, in, w, bias, R []float64) float64 {
	out := make([]float64, s.OutSize())
	UpConvNaive(s, out, in, w, bias)
	var l float64
	for i, v := range out {
		l += v * R[i]
	}
	return l
}

func TestUpConvBackwardNaiveFiniteDifference(t *testing.T) {
	for _, s := range []backend.UpConvShape{
		{N: 2, C: 3, H: 4, W: 5, OC: 4},
		{N: 1, C: 5, H: 1, W: 3, OC: 2},
	} {
		t.Run(upName(s), func(t *testing.T) {
			r := seedFor("fd" + upName(s))
			in, w, bias := to64(randSlice(r, s.InSize())), to64(randSlice(r, s.WeightSize())), to64(randSlice(r, s.OC))
			R := to64(randSlice(r, s.OutSize()))
			din, dw, db := make([]float64, len(in)), make([]float64, len(w)), make([]float64, len(bias))
			UpConvBackwardNaive(s, din, dw, db, R, in, w)
			loss := func() float64 { return upLoss(s, in, w, bias, R) }
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
