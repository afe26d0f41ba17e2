package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// GEMM tolerance.
//
// Sgemm and SgemmNaive sum the same k products in different orders (the
// naive one left to right; the fast one in kc slabs, alpha applied per slab
// and the slabs added through C). The classic bound for a float32 dot
// product of length k in any order is |computed - exact| <= gamma_k *
// sum_p |a_ip*b_pj| with gamma_k = k*u/(1-k*u), u = 2^-24; alpha, beta and
// the slab additions add a few more roundings. So the two results differ by
// at most
//
//	(2k + 8) * u * (|alpha| * sum_p |a_ip*b_pj| + |beta*c_ij|)
//
// per element, a rigorous, element-wise bound (no "typical" random-walk
// guess): gemmTolFactor is the 2k+8 multiplier in units of u. A wrong
// index, a dropped or doubled k step, a wrong transpose or a beta applied
// twice moves an element by about one product, |a*b| ~ 0.25 on average,
// while the bound is at most ~(2*600+8)*6e-8 ~ 7e-5 of the magnitude sum.
func gemmTol(k int, alpha, beta float32, absSum, c float64) float64 {
	const u = 0x1p-24
	return float64(2*k+8) * u * (math.Abs(float64(alpha))*absSum + math.Abs(float64(beta))*math.Abs(c))
}

// gemmImpls is every implementation this machine can run: the pure-Go
// micro-kernel always, the assembly one where the CPU has it.
func gemmImpls(t testing.TB) []gemmImpl {
	impls := append([]gemmImpl{genericGemm()}, asmGemms()...)
	if len(impls) == 1 {
		t.Logf("no assembly micro-kernel on this machine/build: testing the Go one only")
	}
	return impls
}

var gemmSizes = []int{1, 2, 3, 5, 7, 13, 17, 31, 64, 65, 127, 200}

// gemmCase is one product with padded strides.
type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	pad            int // extra stride beyond each row length
}

func (gc gemmCase) String() string {
	tr := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%s%s_m%d_n%d_k%d_a%g_b%g_pad%d", tr(gc.transA), tr(gc.transB), gc.m, gc.n, gc.k, gc.alpha, gc.beta, gc.pad)
}

// gemmData is a case's inputs: A, B and the initial C, each with a padded
// row stride and garbage in the padding.
type gemmData struct {
	a, b, c       []float32
	lda, ldb, ldc int
}

func newGemmData(r *rand.Rand, gc gemmCase) gemmData {
	ar, ac := gc.m, gc.k
	if gc.transA {
		ar, ac = gc.k, gc.m
	}
	br, bc := gc.k, gc.n
	if gc.transB {
		br, bc = gc.n, gc.k
	}
	d := gemmData{lda: ac + gc.pad, ldb: bc + gc.pad, ldc: gc.n + gc.pad}
	mat := func(rows, cols, ld int) []float32 {
		s := garbage(r, max(0, (rows-1)*ld+cols))
		for i := 0; i < rows; i++ {
			copy(s[i*ld:i*ld+cols], randSlice(r, cols))
		}
		return s
	}
	d.a, d.b, d.c = mat(ar, ac, d.lda), mat(br, bc, d.ldb), mat(gc.m, gc.n, d.ldc)
	return d
}

// withReference draws the case's data (seeded by what and the case) and
// returns it with the naive product and its absSums.
func (gc gemmCase) withReference(what string) (d gemmData, want []float32, sums []float64) {
	d = newGemmData(seedFor(what+" "+gc.String()), gc)
	want = clone32(d.c)
	SgemmNaive(gc.transA, gc.transB, gc.m, gc.n, gc.k, gc.alpha, d.a, d.lda, d.b, d.ldb, gc.beta, want, d.ldc)
	return d, want, d.absSums(gc)
}

// absSums returns sum_p |op(A)[i][p]*op(B)[p][j]| for each (i,j).
func (d gemmData) absSums(gc gemmCase) []float64 {
	s := make([]float64, gc.m*gc.n)
	for i := 0; i < gc.m; i++ {
		for j := 0; j < gc.n; j++ {
			var acc float64
			for p := 0; p < gc.k; p++ {
				var av, bv float32
				if gc.transA {
					av = d.a[p*d.lda+i]
				} else {
					av = d.a[i*d.lda+p]
				}
				if gc.transB {
					bv = d.b[j*d.ldb+p]
				} else {
					bv = d.b[p*d.ldb+j]
				}
				acc += math.Abs(float64(av) * float64(bv))
			}
			s[i*gc.n+j] = acc
		}
	}
	return s
}

// checkGemmResult compares got with want over the m x n part element-wise
// (gemmTol) and requires the padding between rows of C to be untouched.
func checkGemmResult(t *testing.T, gc gemmCase, d gemmData, got, want []float32, sums []float64) {
	t.Helper()
	bad := 0
	for i := 0; i < gc.m; i++ {
		for j := 0; j < d.ldc && i*d.ldc+j < len(got); j++ {
			x := i*d.ldc + j
			if j >= gc.n {
				if got[x] != d.c[x] {
					t.Errorf("%v: C padding at (%d,%d) changed: %v -> %v", gc, i, j, d.c[x], got[x])
					return
				}
				continue
			}
			tol := gemmTol(gc.k, gc.alpha, gc.beta, sums[i*gc.n+j], float64(d.c[x]))
			if diff := math.Abs(float64(got[x]) - float64(want[x])); !(diff <= tol) {
				if bad++; bad <= 3 {
					t.Errorf("%v: C[%d,%d] = %v, naive %v, |diff| %.3g > tol %.3g", gc, i, j, got[x], want[x], diff, tol)
				}
			}
		}
	}
	if bad > 3 {
		t.Errorf("%v: %d elements out of tolerance", gc, bad)
	}
}

// runGemmCase runs every implementation on one case against SgemmNaive,
// at each GOMAXPROCS in procs (none: unchanged).
func runGemmCase(t *testing.T, impls []gemmImpl, gc gemmCase, procs ...int) {
	t.Helper()
	d, want, sums := gc.withReference("gemm")
	if len(procs) == 0 {
		procs = []int{0}
	}
	for _, p := range procs {
		for _, g := range impls {
			got := clone32(d.c)
			withProcs(p, func() {
				g.sgemm(gc.transA, gc.transB, gc.m, gc.n, gc.k, gc.alpha, d.a, d.lda, d.b, d.ldb, gc.beta, got, d.ldc)
			})
			checkGemmResult(t, gc, d, got, want, sums)
			if t.Failed() {
				t.Fatalf("implementation %q, GOMAXPROCS %d failed", g.name, p)
			}
		}
	}
}

// TestSgemmMatchesNaive runs both micro-kernels on the full grid of odd
// sizes (m, n, k each in gemmSizes), all four transpose combinations,
// alpha/beta not 1/0, strides longer than the rows and C pre-filled.
func TestSgemmMatchesNaive(t *testing.T) {
	impls := gemmImpls(t)
	sizes := gemmSizes
	if testing.Short() {
		sizes = []int{1, 3, 7, 17, 65, 127}
	}
	for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("transA=%v,transB=%v", tr[0], tr[1]), func(t *testing.T) {
			for _, m := range sizes {
				for _, n := range sizes {
					for _, k := range sizes {
						pad := (m + n + k) % 5 // 0..4: strides both tight and loose
						runGemmCase(t, impls, gemmCase{tr[0], tr[1], m, n, k, -1.5, 0.75, pad})
					}
				}
			}
		})
	}
}

// TestSgemmBlocking covers what the grid is too small for: several k slabs
// (k > gemmKC), several row blocks and row tasks (m > gemmMC, taskRows),
// several column tasks (n > taskCols), and the task split at 1..4 cores.
func TestSgemmBlocking(t *testing.T) {
	impls := gemmImpls(t)
	cases := []gemmCase{
		{false, false, 250, 1030, 600, 0.5, -0.25, 3},
		{false, true, 130, 700, 513, 2, 1, 0},
		{true, false, 245, 531, 257, -1, 0.5, 1},
		{true, true, 61, 1100, 300, 1.25, 2, 2},
		{false, false, 64, 2048, 576, 1, 0.5, 0}, // a conv forward shape
		{false, true, 64, 576, 1024, 1, 1, 0},    // a conv dw shape
		{true, false, 576, 1024, 64, 1, 0.5, 0},  // a conv dcol shape
		// Rows of A 4 KiB apart: packed, not read directly (useDirect).
		{false, false, 70, 600, 1024, 1, 0.5, 0},
		{false, true, 13, 100, 2044, 1, 1, 4},
	}
	for _, gc := range cases {
		t.Run(gc.String(), func(t *testing.T) {
			runGemmCase(t, impls, gc, 1, 2, 3, 4)
		})
	}
}

// TestGemmSplitBitIdentical: a product whose depth is cut into slabs
// (splitPlan) gives exactly the unsplit product's bits, on every
// implementation, at several core counts, with op(A) read directly, packed
// per slab and transposed, beta 0, 1 and other, one and two column blocks
// per slab; and it matches the naive product. The unsplit run is the same
// call without scratch, which the split needs.
func TestGemmSplitBitIdentical(t *testing.T) {
	cases := []struct {
		gemmCase
		procs []int
	}{
		{gemmCase{false, true, 16, 27, 16384, 1, 1, 0}, []int{2, 3}},  // a first layer's dw: A's rows 64 KiB apart, packed
		{gemmCase{false, true, 16, 27, 4100, 1, 0, 4}, []int{2, 3}},   // read directly, a short last slab
		{gemmCase{true, false, 13, 70, 1300, 1, 0.5, 1}, []int{2, 3}}, // transposed A
		{gemmCase{false, false, 20, 600, 2048, 1, -1, 0}, []int{4}},   // two column blocks per slab
	}
	scratch := make([]float32, 1<<21)
	direct := map[bool]bool{}
	for _, c := range cases {
		gc := c.gemmCase
		d, want, sums := gc.withReference("split")
		for _, procs := range c.procs {
			for _, g := range gemmImpls(t) {
				name := fmt.Sprintf("%s/procs%d/%v", g.name, procs, gc)
				withProcs(procs, func() {
					A, B := matA{d.a, d.lda, gc.transA}, matB{d.b, d.ldb, gc.transB}
					sp, ok := g.planSplit(g.planFor(gc.m, gc.n, gc.k, A), gc.m, gc.n, gc.k, gc.alpha, A, len(scratch))
					if !ok {
						t.Fatalf("%s: not split", name)
					}
					direct[sp.direct] = true
					if gc.n > taskCols && sp.colTasks < 2 {
						t.Fatalf("%s: %d column blocks", name, sp.colTasks)
					}
					split, unsplit := clone32(d.c), clone32(d.c)
					g.gemm(gc.m, gc.n, gc.k, gc.alpha, A, B, gc.beta, split, d.ldc, scratch)
					g.gemm(gc.m, gc.n, gc.k, gc.alpha, A, B, gc.beta, unsplit, d.ldc, nil)
					sameBits(t, name+": split vs unsplit", split, unsplit)
					checkGemmResult(t, gc, d, split, want, sums)
				})
			}
		}
	}
	if !direct[true] || !direct[false] {
		t.Errorf("split plans seen with direct A: %v; want both", direct)
	}
}

// TestGemmBalanceRows: a product of one column block that planGemm cuts
// into more row blocks than cores runs one equal block per core
// (balanceRows) within exactly the scratch planGemm sized, packing op(A) in
// smaller blocks where it must, prepacked or not; the result is the
// unbalanced run's, bit for bit (the rows' arithmetic does not change), and
// the naive product's.
func TestGemmBalanceRows(t *testing.T) {
	cases := []struct {
		gemmCase
		procs     int
		prepacked bool
	}{
		{gemmCase{true, false, 128, 64, 2304, 1, 0, 0}, 2, false}, // a conv's din at 8x8
		{gemmCase{true, false, 257, 60, 700, 0.5, 1, 3}, 2, false},
		{gemmCase{true, true, 100, 30, 900, 1, -1, 1}, 3, false},
		{gemmCase{true, false, 128, 64, 600, 1, 0, 0}, 2, true},
	}
	mcs := map[int]bool{}
	for _, c := range cases {
		gc := c.gemmCase
		d, want, sums := gc.withReference("balance")
		for _, g := range gemmImpls(t) {
			name := fmt.Sprintf("%s/procs%d/prepacked %v/%v", g.name, c.procs, c.prepacked, gc)
			withProcs(c.procs, func() {
				var A packerA = matA{d.a, d.lda, gc.transA}
				if c.prepacked {
					A = prepackA(nil, A, gc.m, gc.k, nil)
				}
				p := g.planFor(gc.m, gc.n, gc.k, A)
				scratch := make([]float32, p.scratch(gc.m, gc.k))
				bp, ok := balanceRows(p, gc.m, gc.k, len(scratch))
				if !ok || bp.total != c.procs {
					t.Fatalf("%s: balanced %v into %d tasks (plan: %d)", name, ok, bp.total, p.total)
				}
				mcs[bp.mc] = true
				B := matB{d.b, d.ldb, gc.transB}
				strict := g
				strict.strict = true
				balanced, unbalanced := clone32(d.c), clone32(d.c)
				strict.gemm(gc.m, gc.n, gc.k, gc.alpha, A, B, gc.beta, balanced, d.ldc, scratch)
				g.gemm(gc.m, gc.n, gc.k, gc.alpha, A, B, gc.beta, unbalanced, d.ldc, nil)
				sameBits(t, name+": balanced vs unbalanced", balanced, unbalanced)
				checkGemmResult(t, gc, d, balanced, want, sums)
			})
		}
	}
	if len(mcs) < 2 {
		t.Errorf("A packed in blocks of %v rows; want whole blocks and shrunk ones", mcs)
	}
}

// TestGemmDispatch: a row-major op(A) is read unpacked by the direct
// kernels unless its rows are a multiple of 4 KiB apart; a transposed or
// prepacked one is packed. The direct plan never needs more scratch than
// the packed one that callers size their workspace by.
func TestGemmDispatch(t *testing.T) {
	for _, g := range gemmImpls(t) {
		for _, c := range []struct {
			A      packerA
			direct bool
		}{
			{matA{lda: 576}, true},
			{matA{lda: 1024}, false},
			{matA{lda: 2048}, false},
			{matA{lda: 576, trans: true}, false},
			{prepackedA{m: 64, k: 576}, false},
		} {
			if got := g.planFor(64, 4096, 576, c.A).direct; got != c.direct {
				t.Errorf("%s: planFor(%T %+v).direct = %v, want %v", g.name, c.A, c.A, got, c.direct)
			}
		}
		for _, m := range []int{1, 6, 16, 64, 256} {
			for _, n := range []int{16, 64, 256, 1024, 16384} {
				for _, k := range []int{27, 576, 2304} {
					withProcs(2, func() {
						if d, p := planDirect(m, n, k).scratch(m, k), gemmScratchSize(m, n, k, false); d > p {
							t.Errorf("m%d n%d k%d: direct scratch %d > packed %d", m, n, k, d, p)
						}
					})
				}
			}
		}
	}
}

// TestSgemmSpecialScalars: beta == 0 must not read C (NaN and Inf in C are
// overwritten), beta == 1 accumulates, alpha == 0 or k == 0 only scales C,
// and m == 0 or n == 0 touches nothing.
func TestSgemmSpecialScalars(t *testing.T) {
	impls := gemmImpls(t)
	for _, g := range impls {
		for _, sz := range [][3]int{{5, 7, 3}, {13, 40, 70}, {64, 300, 300}} {
			m, n, k := sz[0], sz[1], sz[2]
			r := seedFor(fmt.Sprint("special", sz))
			a, b := randSlice(r, m*k), randSlice(r, k*n)
			t.Run(fmt.Sprintf("%s/m%d_n%d_k%d", g.name, m, n, k), func(t *testing.T) {
				// beta == 0 over NaN/Inf.
				c := make([]float32, m*n)
				for i := range c {
					c[i] = float32(math.NaN())
					if i%3 == 0 {
						c[i] = float32(math.Inf(-1))
					}
				}
				want := make([]float32, m*n)
				SgemmNaive(false, false, m, n, k, 1.5, a, k, b, n, 0, want, n)
				g.sgemm(false, false, m, n, k, 1.5, a, k, b, n, 0, c, n)
				gc := gemmCase{false, false, m, n, k, 1.5, 0, 0}
				d := gemmData{a: a, b: b, c: make([]float32, m*n), lda: k, ldb: n, ldc: n}
				checkGemmResult(t, gc, d, c, want, d.absSums(gc))

				// beta == 1 accumulates onto C.
				c0 := randSlice(r, m*n)
				c, want = clone32(c0), clone32(c0)
				SgemmNaive(false, false, m, n, k, -1, a, k, b, n, 1, want, n)
				g.sgemm(false, false, m, n, k, -1, a, k, b, n, 1, c, n)
				gc = gemmCase{false, false, m, n, k, -1, 1, 0}
				d.c = c0
				checkGemmResult(t, gc, d, c, want, d.absSums(gc))

				// alpha == 0 and k == 0: C = beta*C exactly; beta 0 clears NaN.
				for _, tc := range []struct {
					alpha, beta float32
					k           int
				}{{0, 0.5, k}, {2, -3, 0}, {0, 0, k}, {1, 1, 0}} {
					c = clone32(c0)
					c[0] = float32(math.NaN())
					g.sgemm(false, false, m, n, tc.k, tc.alpha, a, max(1, tc.k), b, n, tc.beta, c, n)
					for i, v := range c {
						want := tc.beta * c0[i]
						if i == 0 {
							want = float32(math.NaN())
							if tc.beta == 0 {
								want = 0
							}
						}
						if v != want && !(math.IsNaN(float64(v)) && math.IsNaN(float64(want))) {
							t.Fatalf("alpha %v beta %v k %d: C[%d] = %v, want %v", tc.alpha, tc.beta, tc.k, i, v, want)
						}
					}
				}

				// m == 0 / n == 0: nothing to do, empty slices accepted.
				g.sgemm(false, false, 0, n, k, 1, nil, k, b, n, 0, nil, n)
				g.sgemm(false, false, m, 0, k, 1, a, k, nil, 1, 0, nil, 1)
			})
		}
	}
}

// TestSgemmPanics: bad sizes, strides and short slices panic with a
// "kernels:" message (same checks on Sgemm and SgemmNaive).
func TestSgemmPanics(t *testing.T) {
	a, b, c := make([]float32, 12), make([]float32, 12), make([]float32, 9)
	for name, f := range map[string]func(func(bool, bool, int, int, int, float32, []float32, int, []float32, int, float32, []float32, int)){
		"negative m":  func(g gemmFunc) { g(false, false, -1, 3, 4, 1, a, 4, b, 3, 0, c, 3) },
		"short lda":   func(g gemmFunc) { g(false, false, 3, 3, 4, 1, a, 3, b, 3, 0, c, 3) },
		"short ldbT":  func(g gemmFunc) { g(false, true, 3, 3, 4, 1, a, 4, b, 3, 0, c, 3) },
		"short ldc":   func(g gemmFunc) { g(false, false, 3, 3, 4, 1, a, 4, b, 3, 0, c, 2) },
		"short A":     func(g gemmFunc) { g(false, false, 3, 3, 4, 1, a[:11], 4, b, 3, 0, c, 3) },
		"short B":     func(g gemmFunc) { g(false, false, 3, 3, 4, 1, a, 4, b[:11], 3, 0, c, 3) },
		"short C":     func(g gemmFunc) { g(false, false, 3, 3, 4, 1, a, 4, b, 3, 0, c[:8], 3) },
		"short A^T":   func(g gemmFunc) { g(true, false, 3, 3, 4, 1, a, 4, b, 3, 0, c, 3) },
		"negative k":  func(g gemmFunc) { g(false, false, 3, 3, -4, 1, a, 4, b, 3, 0, c, 3) },
		"long stride": func(g gemmFunc) { g(false, false, 3, 3, 4, 1, a, 5, b, 3, 0, c, 3) },
	} {
		mustPanicKernels(t, name+"/fast", func() { f(Sgemm) })
		mustPanicKernels(t, name+"/naive", func() { f(SgemmNaive) })
	}
}

type gemmFunc = func(bool, bool, int, int, int, float32, []float32, int, []float32, int, float32, []float32, int)

// TestGemmImplementation: the name reports what this machine runs.
func TestGemmImplementation(t *testing.T) {
	name := GemmImplementation()
	want := "go"
	if impls := asmGemms(); len(impls) > 0 {
		want = impls[len(impls)-1].name
	}
	if name != want {
		t.Fatalf("GemmImplementation() = %q, want %q", name, want)
	}
	t.Logf("Sgemm micro-kernel: %s", name)
}

// tileRef is what a micro-kernel must leave in c (row stride ldc): the
// first rows rows of the width-column tile alpha*A*B (+ beta*C), A's
// values given by aAt(i, p), B packed in 16-column panels of kc rows; the
// rest of c unchanged.
func tileRef(rows, width, kc int, aAt func(i, p int) float32, b, c []float32, ldc int, alpha, beta float32, overwrite bool) []float32 {
	want := clone32(c)
	for i := 0; i < rows; i++ {
		for j := 0; j < width; j++ {
			// Column j lives in panel j/16 (kc*16 values each).
			var acc float64
			for p := 0; p < kc; p++ {
				acc += float64(aAt(i, p)) * float64(b[(j/gemmNR)*kc*gemmNR+p*gemmNR+j%gemmNR])
			}
			v := float64(alpha) * acc
			if !overwrite {
				v += float64(beta) * float64(c[i*ldc+j])
			}
			want[i*ldc+j] = float32(v)
		}
	}
	return want
}

// checkTile holds c to want: close inside the tile, untouched outside it.
func checkTile(t *testing.T, name string, c, want []float32, rows, width, ldc int) {
	t.Helper()
	checkClose(t, name, c, want, 1e-5)
	for x := range c {
		if i, j := x/ldc, x%ldc; (i >= rows || j >= width) && c[x] != want[x] {
			t.Fatalf("%s: C[%d,%d] outside the tile changed", name, i, j)
		}
	}
}

// packedAsDirect lets a packed-A kernel run where the test calls direct
// ones (lda unused).
func packedAsDirect(kern microKernel) directKernel {
	return func(kc int, a []float32, _ int, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
		kern(kc, a, b, c, ldc, alpha, beta, overwrite, rows)
	}
}

// TestMicroKernelRows calls each micro-kernel (and the 6x32 one where there
// is one), packed and direct (A read unpacked), directly for rows = 1..6, both store modes and odd kc: the first
// rows rows of the tile must hold alpha*A*B (+ beta*C), and everything else
// in C (rows below, columns right of the tile, the stride gap) must be
// untouched.
func TestMicroKernelRows(t *testing.T) {
	for _, g := range gemmImpls(t) {
		type kernelCase struct {
			width  int
			direct bool
		}
		kernels := map[kernelCase]directKernel{
			{gemmNR, false}: packedAsDirect(g.kernel),
			{gemmNR, true}:  g.direct,
		}
		if g.wide != nil {
			kernels[kernelCase{2 * gemmNR, false}] = packedAsDirect(g.wide)
			kernels[kernelCase{2 * gemmNR, true}] = g.wideDirect
		}
		for kcase, kern := range kernels {
			width := kcase.width
			for _, kc := range []int{1, 3, 4, 5, 17, 256} {
				for rows := 1; rows <= gemmMR; rows++ {
					for _, overwrite := range []bool{true, false} {
						r := seedFor(fmt.Sprint("micro", g.name, width, kc, rows, overwrite))
						a, b := randSlice(r, kc*gemmMR), randSlice(r, kc*width)
						ldc := width + 3
						c := garbage(r, (gemmMR+1)*ldc)
						const alpha, beta = 0.75, -0.5
						want := tileRef(rows, width, kc, func(i, p int) float32 { return a[p*gemmMR+i] }, b, c, ldc, alpha, beta, overwrite)
						if kcase.direct {
							// A as the first rows rows of a row-major matrix
							// (stride kc+2), exactly as long as they need.
							lda := kc + 2
							rowMajor := make([]float32, (rows-1)*lda+kc)
							for i := 0; i < rows; i++ {
								for p := 0; p < kc; p++ {
									rowMajor[i*lda+p] = a[p*gemmMR+i]
								}
							}
							kern(kc, rowMajor, lda, b, c, ldc, alpha, beta, overwrite, rows)
						} else {
							kern(kc, a, 0, b, c, ldc, alpha, beta, overwrite, rows)
						}
						name := fmt.Sprintf("%s %d-wide direct=%v kc=%d rows=%d overwrite=%v", g.name, width, kcase.direct, kc, rows, overwrite)
						checkTile(t, name, c, want, rows, width, ldc)
					}
				}
			}
		}
	}
}

// TestMicroKernel8Rows: the 8-row direct kernels (32 and 16 columns),
// where there are any, give alpha*A*B (+ beta*C) over 8 rows of a
// row-major A, odd kc, both store modes, and leave the rest of C alone.
func TestMicroKernel8Rows(t *testing.T) {
	for _, g := range gemmImpls(t) {
		for _, k := range []struct {
			kern  directKernel
			width int
		}{{g.wideDirect8, 2 * gemmNR}, {g.narrowDirect8, gemmNR}} {
			if k.kern == nil {
				continue
			}
			const rows = 8
			width := k.width
			for _, kc := range []int{1, 3, 4, 5, 17, 256} {
				for _, overwrite := range []bool{true, false} {
					r := seedFor(fmt.Sprint("micro8", g.name, width, kc, overwrite))
					lda, ldc := kc+3, width+5
					a, b := randSlice(r, (rows-1)*lda+kc), randSlice(r, kc*width)
					c := garbage(r, (rows+1)*ldc)
					const alpha, beta = -0.5, 1.25
					want := tileRef(rows, width, kc, func(i, p int) float32 { return a[i*lda+p] }, b, c, ldc, alpha, beta, overwrite)
					k.kern(kc, a, lda, b, c, ldc, alpha, beta, overwrite, rows)
					checkTile(t, fmt.Sprintf("%s 8x%d kc=%d overwrite=%v", g.name, width, kc, overwrite), c, want, rows, width, ldc)
				}
			}
		}
	}
}

// TestGatherKernels: the gather kernels, where there are any, give the tile
// of their packed twins (8 rows of a row-major A; a packed 6-row panel,
// rows 1..6 stored) with B's rows read through unordered offsets into an
// image, 32 values in a run, two runs of 16 or four of 8 apart, bit for
// bit, over odd kc, both store modes; they leave the rest of C alone and
// refuse offsets that would read outside b.
func TestGatherKernels(t *testing.T) {
	for _, g := range gemmImpls(t) {
		if g.gather8 == nil {
			continue
		}
		const width = 2 * gemmNR
		for _, kc := range []int{1, 3, 4, 5, 17, 256} {
			for _, tc := range []struct {
				overwrite bool
				run, step int
			}{{true, 32, 32}, {false, 32, 40}, {true, 16, 18}, {false, 16, 37}, {true, 8, 10}, {false, 8, 13}} {
				overwrite, run, step := tc.overwrite, tc.run, tc.step
				r := seedFor(fmt.Sprint("gather", g.name, kc, overwrite, run, step))
				img := randSlice(r, 4000)
				offs := make([]int, kc)
				packed := make([]float32, 2*kc*gemmNR) // B's rows packed as the twins read them
				for p := range offs {
					offs[p] = r.IntN(len(img) - (width/run-1)*step - run + 1)
					for j := 0; j < width; j++ {
						packed[(j/gemmNR)*kc*gemmNR+p*gemmNR+j%gemmNR] = img[offs[p]+j/run*step+j%run]
					}
				}
				rows := newGatherRows(offs, run, step)
				ldc := width + 5
				const beta = 1.25
				name := fmt.Sprintf("%s kc=%d overwrite=%v runs of %d, %d apart", g.name, kc, overwrite, run, step)

				lda := kc + 3
				a := randSlice(r, 7*lda+kc)
				c := garbage(r, 9*ldc)
				want := clone32(c)
				g.wideDirect8(kc, a, lda, packed, want, ldc, 1, beta, overwrite, 8)
				g.gather8(kc, a, lda, img, rows, c, ldc, beta, overwrite)
				sameBits(t, name+" 8x32", c, want)

				// The flipped weights read in place: rows c0..c0+7 of
				// flippedWA over a slab from k step p0 (mid-kernel), against
				// the same rows copied out row-major.
				const C, c0, p0 = 16, 8, 5
				w := randSlice(r, ceilDiv(p0+kc, 9)*C*9)
				aoffs := flippedOffsets(make([]int, kc), C, p0)
				flat := make([]float32, 8*kc)
				for i := range 8 {
					for p := range kc {
						k := p0 + p
						flat[i*kc+p] = w[(k/9*C+c0+i)*9+8-k%9] // w[o, c0+i, 2-i', 2-j']
					}
				}
				c = garbage(r, 9*ldc)
				want = clone32(c)
				g.gather8(kc, flat, kc, img, rows, want, ldc, beta, overwrite)
				g.gatherFlipped8(kc, w[c0*9:], aoffs, img, rows, c, ldc, beta, overwrite)
				sameBits(t, name+" 8x32 flipped", c, want)

				panel := randSlice(r, kc*gemmMR)
				for mrows := 1; mrows <= gemmMR; mrows++ {
					c := garbage(r, 7*ldc)
					want := clone32(c)
					g.wide(kc, panel, packed, want, ldc, 1, beta, overwrite, mrows)
					g.gather6(kc, panel, img, rows, c, ldc, beta, overwrite, mrows)
					sameBits(t, fmt.Sprintf("%s 6x32 rows=%d", name, mrows), c, want)
				}
			}
		}
		// An offset whose 32 values, or whose last run, end past b panics
		// instead of reading.
		for _, call := range []func(){
			func() {
				g.gather8(1, make([]float32, 8), 1, make([]float32, 40), newGatherRows([]int{9}, 32, 32), make([]float32, 8*32), 32, 0, true)
			},
			func() {
				g.gather6(1, make([]float32, 6), make([]float32, 40), newGatherRows([]int{9}, 32, 32), make([]float32, 32), 32, 0, true, 1)
			},
			func() {
				g.gather8(1, make([]float32, 8), 1, make([]float32, 40), newGatherRows([]int{0}, 16, 25), make([]float32, 8*32), 32, 0, true)
			},
			func() {
				g.gather6(1, make([]float32, 6), make([]float32, 40), newGatherRows([]int{1}, 16, 24), make([]float32, 32), 32, 0, true, 1)
			},
			func() { // the flipped weights' last row past a
				g.gatherFlipped8(1, make([]float32, 7*9+1), aOffsets{offs: []int{1}, lo: 1, hi: 1}, make([]float32, 40), newGatherRows([]int{0}, 32, 32), make([]float32, 8*32), 32, 0, true)
			},
			func() {
				g.gather8(1, make([]float32, 8), 1, make([]float32, 40), newGatherRows([]int{3}, 8, 10), make([]float32, 8*32), 32, 0, true)
			},
			func() {
				g.gather6(1, make([]float32, 6), make([]float32, 40), newGatherRows([]int{0}, 8, 11), make([]float32, 32), 32, 0, true, 1)
			},
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: a gather past b did not panic", g.name)
					}
				}()
				call()
			}()
		}
	}
}
