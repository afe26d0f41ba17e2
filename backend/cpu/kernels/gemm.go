package kernels

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
)

// SGEMM: C = alpha*op(A)*op(B) + beta*C on row-major float32 matrices.
//
// The fast path is the classic Goto/BLIS scheme:
//
//   - C is cut into tasks (blocks of at most taskRows x taskCols) that the
//     cores pull from a shared counter, so the tasks write disjoint parts of
//     C and need no locking.
//   - Within a task, the k dimension is cut into slabs of gemmKC; for each
//     slab the task's columns of op(B) are packed into NR-wide column panels
//     (kc x NR, row by row, contiguous: the micro-kernel's vector loads), and
//     blocks of gemmMC rows of op(A) into MR-high row panels (kc x MR,
//     column by column: the micro-kernel's broadcasts). Packing also
//     resolves the transposes, so one micro-kernel serves all four cases.
//   - The micro-kernel keeps an MR x NR tile of C in registers over the
//     slab and then writes alpha*tile + beta*C (beta only on the first
//     slab, 1 after; beta == 0 never reads C, as in BLAS, so C may hold
//     garbage or NaN). Tiles at the right and bottom edges, padded with
//     zeros in the packed panels, go through a small temporary.
//
//go:generate go run asm_gen.go

// The micro-kernel is Go assembly (AVX2+FMA, 6x16) where the CPU has it
// (gemm_amd64.s, chosen at run time with golang.org/x/sys/cpu) and pure Go
// otherwise (gemm_generic.go); both use the same packed layout.

const (
	gemmMR = 6  // rows of the C register tile
	gemmNR = 16 // columns of the C register tile (2 AVX vectors)

	gemmKC = 256 // k slab: a kc x NR panel of packed B is 16 KiB (L1)
	gemmMC = 120 // rows of op(A) packed at a time: 120 KiB (L2)

	taskRows = 240 // largest task: 240 x 512 of C
	taskCols = 512 // packed B of one task: 256 x 512 x 4 B = 512 KiB (L2)

	// gemmSerialFlops: below this many flops (2*m*n*k) a product runs on
	// the calling goroutine; starting goroutines would cost more.
	gemmSerialFlops = 1 << 18
)

// microKernel computes the MR x NR tile
//
//	acc[i][j] = sum_{p<kc} a[p*MR+i] * b[p*NR+j]
//
// from packed panels a (kc*MR values) and b (kc*NR values) and stores, for
// the first rows rows (1 <= rows <= MR; the others are neither read nor
// written), c[i*ldc+j] = alpha*acc[i][j] (overwrite) or
// alpha*acc[i][j] + beta*c[i*ldc+j]. c must hold (rows-1)*ldc+NR values.
type microKernel func(kc int, a, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int)

// directKernel is microKernel with A read unpacked: tile row i (i < rows)
// is a[i*lda : i*lda+kc], rows of a row-major matrix; rows past rows are
// not read. It saves packing an operand that no other task would reuse.
type directKernel func(kc int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int)

// gatherKernel computes the 8 x 32 tile (alpha 1)
//
//	acc[i][j] = sum_{p<kc} a[i*lda+p] * b[rows.offs[p] + j/run*step + j%run]
//
// (run, step = rows.run, rows.step) with A's 8 rows read as a direct
// kernel reads them and B's row p read unpacked from b, as 32/run runs of
// run values step apart (a convolution's im2col row, read from the padded
// image: one output row's 32 pixels, or two 16-pixel rows', or four
// 8-pixel rows'), and stores c[i*ldc+j] = acc[i][j] (overwrite) or
// acc[i][j] + beta*c[i*ldc+j]. It needs no packing of either operand.
type gatherKernel func(kc int, a []float32, lda int, b []float32, rows gatherRows, c []float32, ldc int, beta float32, overwrite bool)

// packedGatherKernel is gatherKernel with A a packed kc x 6 panel, of which
// the first mrows rows (1 <= mrows <= 6) are stored.
type packedGatherKernel func(kc int, a, b []float32, rows gatherRows, c []float32, ldc int, beta float32, overwrite bool, mrows int)

// flippedGatherKernel is gatherKernel with A's rows read through offsets:
// tile row i's value at k step p is a[aoffs.offs[p] + 9*i], the flipped
// 3x3 weights of an input gradient read in place from w (see flippedWA:
// the rows are input channels, 9 values apart), so they need no packing.
type flippedGatherKernel func(kc int, a []float32, aoffs aOffsets, b []float32, rows gatherRows, c []float32, ldc int, beta float32, overwrite bool)

// aOffsets is a k slab's A offsets for a flippedGatherKernel with their
// range, found once so that each kernel call checks its reads in O(1).
type aOffsets struct {
	offs   []int
	lo, hi int
}

// flippedOffsets fills offs (a slab of len(offs) k steps from p0) with
// where flippedWA's row 0 takes its values in w for a 3x3 kernel and C
// input channels: k = (o*3+i)*3+j reads w[o, 0, 2-i, 2-j], at
// o*C*9 + 8 - (k mod 9).
func flippedOffsets(offs []int, C, p0 int) aOffsets {
	r := aOffsets{offs: offs, lo: math.MaxInt, hi: math.MinInt}
	for p := range offs {
		k := p0 + p
		offs[p] = k/9*C*9 + 8 - k%9
		r.lo, r.hi = min(r.lo, offs[p]), max(r.hi, offs[p])
	}
	return r
}

// gatherRows is a k slab's B row offsets for a gatherKernel with their
// range, found once so that each kernel call checks its reads in O(1), and
// how a row lies in b: in runs of run values (32, 16 or 8: the output row
// width a 32-pixel segment spans), step apart (the padded row width).
type gatherRows struct {
	offs      []int
	lo, hi    int
	run, step int
}

func newGatherRows(offs []int, run, step int) gatherRows {
	if run != 2*gemmNR && run != gemmNR && run != gemmNR/2 || step < run {
		panic("kernels: gather rows: runs of 32, 16 or 8 values, step apart, step >= run")
	}
	r := gatherRows{offs: offs, lo: offs[0], hi: offs[0], run: run, step: step}
	for _, o := range offs {
		r.lo, r.hi = min(r.lo, o), max(r.hi, o)
	}
	return r
}

// end is one past the last value of b a kernel call reads.
func (r gatherRows) end() int { return r.hi + (2*gemmNR/r.run-1)*r.step + r.run }

// half is where a row's columns 16-31 start, for runs of 32 or 16.
func (r gatherRows) half() int {
	if r.run == 2*gemmNR {
		return gemmNR
	}
	return r.step
}

// packRowsPanel packs rows [0,rows) of the row-major a (stride lda) over
// kc columns into a kc x MR panel (rows past rows zero), for a direct
// kernel's bottom edge or a pure-Go one.
func packRowsPanel(dst *[gemmMR * gemmKC]float32, a []float32, lda, kc, rows int) []float32 {
	d := dst[:kc*gemmMR]
	packAPanels(d, false, a, lda, 0, rows, 0, kc)
	return d
}

// directFromPacked makes a direct kernel out of a packed one: pack the
// panel, then run it. It serves the pure-Go implementation and the bottom
// edge of the assembly ones.
func directFromPacked(kern microKernel) directKernel {
	return func(kc int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
		var panel [gemmMR * gemmKC]float32
		kern(kc, packRowsPanel(&panel, a, lda, kc, rows), b, c, ldc, alpha, beta, overwrite, rows)
	}
}

// gemmImpl is one implementation of the GEMM driver: a micro-kernel, the
// data-movement primitives the packers use, and its name. Tests build both
// the assembly and the pure-Go one and run each.
type gemmImpl struct {
	name string
	// team runs the parallel parts (nil: new goroutines).
	team *Team
	// strict makes running out of the caller's scratch a panic instead of
	// an allocation: tests use it to hold ConvWorkspace and UpConvWorkspace to what is carved.
	strict bool
	kernel microKernel
	// wide, if not nil, computes a 6x32 tile (MR x 2*NR) from one A panel
	// and two adjacent B panels (b holding 2*kc*NR values), with kernel's
	// contract otherwise; the driver uses it for pairs of whole panels.
	wide microKernel
	// direct and wideDirect are kernel and wide reading A unpacked (see
	// directKernel); wideDirect is nil where wide is.
	direct, wideDirect directKernel
	// wideDirect8, if not nil, is wideDirect over 8 rows (rows == 8);
	// narrowDirect8 is direct over 8 rows, a row of 16 columns in one
	// vector (AVX-512: the 6x16 AVX2 kernel runs at half its rate).
	wideDirect8, narrowDirect8 directKernel
	// gather8, if not nil, is wideDirect8 with op(B) read unpacked through
	// row offsets (see gatherKernel); gather6 is wide with op(B) read so.
	gather8 gatherKernel
	gather6 packedGatherKernel
	// gatherFlipped8, if not nil, is gather8 with A the flipped weights
	// read in place (see flippedGatherKernel).
	gatherFlipped8 flippedGatherKernel
	// copyChunks16 copies n chunks of 16 values: src[16t:16t+16] to
	// dst[t*dstStride:t*dstStride+16].
	copyChunks16 func(dst, src []float32, n, dstStride int)
	// transpose16 sets dst[p*16+l] = src[l*srcStride+p] for l < 16, p < kc.
	transpose16 func(dst, src []float32, srcStride, kc int)
	// gatherRows16 fills panels consecutive packed panels of kc = len(offs)
	// rows: dst[t*kc*16 + p*16 + l] = src[16*t + offs[p] + l] for
	// t < panels, p < kc, l < 16.
	gatherRows16 func(dst, src []float32, offs []int, panels int)
	// transpose16Gather sets dst[t*16+l] = src[offs[l]+t] for l < 16,
	// t < n.
	transpose16Gather func(dst, src []float32, offs *[16]int, n int)
	// wino is the Winograd convolution's transforms (winograd.go).
	wino winoKernels
}

// genericGemm is the pure-Go implementation, available on every platform.
func genericGemm() gemmImpl {
	return gemmImpl{
		name: "go", kernel: microKernelGeneric, direct: directFromPacked(microKernelGeneric),
		copyChunks16: copyChunks16Go, transpose16: transpose16Go,
		gatherRows16: gatherRows16Go, transpose16Gather: transpose16GatherGo,
		wino: genericWino(),
	}
}

// gemmOn is bestGemm running its parallel parts on t.
func gemmOn(t *Team) gemmImpl {
	g := bestGemm()
	g.team = t
	return g
}

// bestGemm is the fastest implementation this CPU supports.
func bestGemm() gemmImpl {
	if g, ok := asmGemm(); ok {
		return g
	}
	return genericGemm()
}

// GemmImplementation names the micro-kernel Sgemm uses on this machine:
// "avx512", "avx2+fma" or "go".
func GemmImplementation() string { return bestGemm().name }

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices,
// where op(A) is m x k (A is m x k with row stride lda, or k x m if transA)
// and op(B) is k x n (B is k x n with row stride ldb, or n x k if transB),
// and C is m x n with row stride ldc. With beta == 0, C is only written
// (never read), so it may hold anything, NaN included. It runs in parallel
// over the available cores for large products. It panics, with a "kernels:"
// message, on negative sizes, strides shorter than a row, or slices too
// short for their matrices.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	(*Team)(nil).Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Sgemm is the package's Sgemm on the team.
func (t *Team) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemmOn(t).sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmNaive is Sgemm's reference: the triple loop, same arguments and
// contract (beta == 0 does not read C).
func SgemmNaive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var acc float32
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				acc += av * bv
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * acc
			} else {
				c[i*ldc+j] = alpha*acc + beta*c[i*ldc+j]
			}
		}
	}
}

// checkGemm panics unless the slices and strides describe the matrices.
func checkGemm(transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("kernels: sgemm: negative size m=%d n=%d k=%d", m, n, k))
	}
	// need reports whether a rows x cols matrix with stride ld fits in l.
	check := func(what string, rows, cols, l, ld int) {
		if ld < max(1, cols) {
			panic(fmt.Sprintf("kernels: sgemm: %s: stride %d < row length %d", what, ld, cols))
		}
		if rows > 0 && cols > 0 && l < (rows-1)*ld+cols {
			panic(fmt.Sprintf("kernels: sgemm: %s: %d values < %dx%d with stride %d", what, l, rows, cols, ld))
		}
	}
	if transA {
		check("A", k, m, la, lda)
	} else {
		check("A", m, k, la, lda)
	}
	if transB {
		check("B", n, k, lb, ldb)
	} else {
		check("B", k, n, lb, ldb)
	}
	check("C", m, n, lc, ldc)
}

// packerA supplies op(A) in packed form: packA returns rows [i0,i0+mc) and
// columns [p0,p0+kc) of op(A) as MR-row panels (panel r at r*kc:
// dst[r*kc + p*MR + i] = op(A)[i0+r+i][p0+p], rows past mc zero), either
// written into buf (len >= roundUp(mc,MR)*kc) or as a view of data packed
// earlier. i0 is a multiple of MR and p0 of gemmKC.
type packerA interface {
	packA(buf []float32, i0, mc, p0, kc int) []float32
}

// packerB supplies op(B) in packed form: packB writes rows [p0,p0+kc) and
// columns [j0,j0+nw) of op(B) into dst as NR-column panels (panel q at q*kc:
// dst[q*kc + p*NR + j] = op(B)[p0+p][j0+q+j], columns past nw zero).
// Implementations other than a plain matrix generate op(B) on the fly
// (im2col while packing, see conv_pack.go); they may use scratch as they
// like.
type packerB interface {
	packB(g *gemmImpl, dst []float32, scratch *packScratch, p0, kc, j0, nw int)
}

// packScratch is a worker's scratch: the team's kept one (its tables are
// written before they are read), or a new one without a team.
func (t *Team) packScratch() *packScratch {
	if t != nil {
		if ps, ok := t.scratch.Get().(*packScratch); ok {
			return ps
		}
	}
	offs := make([]int, 2*gemmKC) // one allocation for both tables
	return &packScratch{offs: offs[:gemmKC:gemmKC], aoffs: offs[gemmKC:]}
}

// putPackScratch gives ps back to the team, without the workspace it
// pointed into.
func (t *Team) putPackScratch(ps *packScratch) {
	if t != nil {
		ps.f = nil
		t.scratch.Put(ps)
	}
}

// packScratch is a worker's scratch: f holds gemmNR*gemmKC values (the
// direct tasks' packed edge panels), offs gemmKC offsets (the B packers').
type packScratch struct {
	f     []float32
	offs  []int
	aoffs []int                    // a flippedGatherKernel's A offsets
	tile  [gemmMR * gemmNR]float32 // an edge tile's result
	// mb and pb are operands the Winograd products pass as packerB: a
	// value converted to the interface would be an allocation a call.
	mb matB
	pb panelsB
}

// matA is op(A) of a row-major matrix a with row stride lda.
type matA struct {
	a     []float32
	lda   int
	trans bool
}

func (x matA) packA(buf []float32, i0, mc, p0, kc int) []float32 {
	buf = buf[:roundUp(mc, gemmMR)*kc]
	packAPanels(buf, x.trans, x.a, x.lda, i0, mc, p0, kc)
	return buf
}

// matB is op(B) of a row-major matrix b with row stride ldb.
type matB struct {
	b     []float32
	ldb   int
	trans bool
}

func (x matB) packB(g *gemmImpl, dst []float32, _ *packScratch, p0, kc, j0, nw int) {
	packBPanels(g, dst, x.trans, x.b, x.ldb, p0, kc, j0, nw)
}

// prepackedA is the whole of an m x k op(A) packed once: slab p0 (kc =
// min(gemmKC, k-p0) columns) starts at p0*roundUp(m,MR) and holds the
// slab's MR-row panels in row order, so any MR-aligned row range of a slab
// is one contiguous view.
type prepackedA struct {
	data []float32
	m, k int
}

func (x prepackedA) packA(_ []float32, i0, mc, p0, kc int) []float32 {
	off := p0*roundUp(x.m, gemmMR) + i0*kc
	return x.data[off : off+roundUp(mc, gemmMR)*kc]
}

// prepackA packs all of the m x k op(A) that src supplies into the front of
// buf (allocated if shorter than prepackSize(m, k)), in parallel over row
// panels for large operands. Products with several column tasks then share
// one packing of A instead of each task repacking it (e.g. a conv's
// weights, used by every block of pixels).
func prepackA(t *Team, src packerA, m, k int, buf []float32) prepackedA {
	mp := roundUp(m, gemmMR)
	data := buf[:min(len(buf), prepackSize(m, k))]
	if len(data) < prepackSize(m, k) {
		data = make([]float32, prepackSize(m, k)) // callers carve enough; tests may pass nil
	}
	x := prepackedA{data: data, m: m, k: k}
	panels := mp / gemmMR
	flipped3, isFlipped3 := src.(flippedWA)
	isFlipped3 = isFlipped3 && flipped3.K == 3
	t.For(panels, max(1, (64<<10)/(gemmMR*max(1, k))), func(lo, hi int) {
		if isFlipped3 {
			flipped3.prepack3(x, lo, hi)
			return
		}
		for pc := 0; pc < k; pc += gemmKC {
			kc := min(gemmKC, k-pc)
			i0, mc := lo*gemmMR, min(hi*gemmMR, m)-lo*gemmMR
			dst := x.data[pc*mp+i0*kc : pc*mp+hi*gemmMR*kc]
			if got := src.packA(dst, i0, mc, pc, kc); &got[0] != &dst[0] {
				copy(dst, got)
			}
		}
	})
	return x
}

// gemmPlan is how gemm cuts C into tasks over workers and how much packing
// scratch it carves: prepackSize(m, k) if it prepacks op(A), then aSize +
// bSize per worker.
type gemmPlan struct {
	workers, mt, nt, colTasks, total int
	// mc is the rows of op(A) a task packs at a time (gemmMC unless
	// balanceRows shrank it to fit).
	mc      int
	prepack bool
	// direct: op(A) is read unpacked by the micro-kernels (see
	// directKernel), so nothing packs it and tasks span as many rows as
	// they can, sharing each packed block of op(B) among them.
	direct       bool
	aSize, bSize int
}

// planGemm plans an m x n x k product (op(A) already prepacked or not) for
// the cores GOMAXPROCS allows: start from the largest tasks, then halve the
// columns (down to 64) and the rows (down to 2*MR) until every core gets
// about three tasks, for balance on a shared, noisy machine.
func planGemm(m, n, k int, prepacked bool) gemmPlan {
	workers := runtime.GOMAXPROCS(0)
	if 2*float64(m)*float64(n)*float64(k) < gemmSerialFlops {
		workers = 1
	}
	mt, nt := min(m, taskRows), min(n, taskCols)
	tasks := func() int { return ceilDiv(m, mt) * ceilDiv(n, nt) }
	if workers > 1 {
		for tasks() < 3*workers && nt > 64 {
			nt = roundUp(ceilDiv(nt, 2), gemmNR)
		}
		for tasks() < 3*workers && mt > 2*gemmMR {
			mt = roundUp(ceilDiv(mt, 2), gemmMR)
		}
	}
	p := gemmPlan{mt: mt, nt: nt, colTasks: ceilDiv(n, nt), total: tasks(), mc: gemmMC}
	p.workers = min(workers, p.total)
	p.prepack = !prepacked && p.colTasks > 2
	// Per-worker buffers: packed A block (unless prepacked), packed B block
	// and the B packers' scratch.
	kcMax := min(k, gemmKC)
	if !prepacked && !p.prepack {
		p.aSize = roundUp(min(mt, gemmMC), gemmMR) * kcMax
	}
	p.bSize = roundUp(nt, gemmNR)*kcMax + gemmNR*gemmKC
	return p
}

// useDirect reports whether to read a row-major op(A) (stride lda)
// unpacked instead of packing it: always, saving the packing pass and
// letting tasks span all rows (so each block of op(B) is packed once),
// unless A's six rows are a multiple of 4 KiB apart, which would put them
// in the same L1 sets.
func useDirect(lda int) bool { return (lda*4)%4096 != 0 }

// planDirect is the plan for reading op(A) unpacked, derived from
// planGemm's so that it never needs more scratch: the same column tasks,
// narrowed (to 32 columns, the wide kernel's tile) before rows are split,
// since a row split repacks op(B) while a column split costs nothing; rows
// are split only while some core would otherwise have no task.
func planDirect(m, n, k int) gemmPlan {
	p := planGemm(m, n, k, false)
	workers := runtime.GOMAXPROCS(0)
	if p.workers == 1 {
		workers = 1
	}
	mt, nt := m, p.nt
	tasks := func() int { return ceilDiv(m, mt) * ceilDiv(n, nt) }
	for tasks() < 3*workers && nt > 2*gemmNR {
		nt = roundUp(ceilDiv(nt, 2), 2*gemmNR)
	}
	for tasks() < workers && mt > 2*gemmMR {
		mt = roundUp(ceilDiv(mt, 2), gemmMR)
	}
	d := gemmPlan{mt: mt, nt: nt, colTasks: ceilDiv(n, nt), total: tasks(), direct: true}
	d.workers = min(workers, d.total)
	d.bSize = roundUp(nt, gemmNR)*min(k, gemmKC) + gemmNR*gemmKC
	return d
}

// balanceRows re-plans a product that p cuts into more blocks of rows than
// workers while C is one block of columns: every block of rows packs all of
// op(B) (for a convolution's input gradient at small images, the im2col of
// the output gradient, 8 times over), so one equal block per worker packs
// it as few times as the cores allow. The blocks of op(A) a task packs
// shrink until its buffers fit in scratch values (what the caller carved
// for p); it reports false where p is kept.
func balanceRows(p gemmPlan, m, k, scratch int) (gemmPlan, bool) {
	if p.direct || p.prepack || p.workers < 2 || p.colTasks != 1 || ceilDiv(m, p.mt) <= p.workers {
		return p, false
	}
	b := p
	b.mt = roundUp(ceilDiv(m, p.workers), gemmMR)
	b.total = ceilDiv(m, b.mt)
	b.workers = min(p.workers, b.total)
	if p.aSize == 0 { // op(A) prepacked: nothing to pack
		return b, b.scratch(m, k) <= scratch
	}
	for _, mc := range []int{gemmMC, 60, 30, 12, gemmMR} {
		b.mc = mc
		b.aSize = roundUp(min(b.mt, mc), gemmMR) * min(k, gemmKC)
		if b.scratch(m, k) <= scratch {
			return b, true
		}
	}
	return p, false
}

// gemmScratchSize is the float32 scratch gemm carves for an m x n x k
// product, so that a caller can hand it enough and nothing is allocated.
func gemmScratchSize(m, n, k int, prepacked bool) int {
	if m == 0 || n == 0 || k == 0 {
		return 0
	}
	p := planGemm(m, n, k, prepacked)
	return p.scratch(m, k)
}

// scratch is the float32 scratch gemm carves under plan p for an m x k op(A).
func (p gemmPlan) scratch(m, k int) int {
	size := p.workers * (p.aSize + p.bSize)
	if p.prepack {
		size += prepackSize(m, k)
	}
	return size
}

// planFor is the plan gemm follows for an m x n x k product with op(A)
// supplied by A: direct where the kernels can read A unpacked (see
// useDirect), planGemm's otherwise.
func (g gemmImpl) planFor(m, n, k int, A packerA) gemmPlan {
	if x, ok := A.(matA); ok && !x.trans && g.direct != nil && useDirect(x.lda) {
		return planDirect(m, n, k)
	}
	_, prepacked := A.(prepackedA)
	return planGemm(m, n, k, prepacked)
}

// prepackSize is the float32 count of a prepacked m x k op(A).
func prepackSize(m, k int) int { return roundUp(m, gemmMR) * k }

// carve returns the first n values of buf and the rest, or a new slice of n
// and buf unchanged when buf is too short (a panic when g.strict). Its
// values are unspecified.
func (g *gemmImpl) carve(buf []float32, n int) (head, rest []float32) {
	if len(buf) < n {
		if g.strict {
			panic(fmt.Sprintf("kernels: %s: scratch of %d values, %d more needed", g.name, len(buf), n))
		}
		return make([]float32, n), buf
	}
	return buf[:n:n], buf[n:]
}

func (g gemmImpl) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	g.gemm(m, n, k, alpha, matA{a, lda, transA}, matB{b, ldb, transB}, beta, c, ldc, nil)
}

// gemm computes C = alpha*op(A)*op(B) + beta*C with op(A) (m x k) and op(B)
// (k x n) supplied by packers; the caller has checked the sizes. Packing
// buffers are carved from scratch while it lasts (its contents are
// unspecified and are overwritten), then allocated.
func (g gemmImpl) gemm(m, n, k int, alpha float32, A packerA, B packerB, beta float32, c []float32, ldc int, scratch []float32) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleRows(c, m, n, ldc, beta)
		return
	}

	plan := g.planFor(m, n, k, A)
	if sp, ok := g.planSplit(plan, m, n, k, alpha, A, len(scratch)); ok {
		g.gemmSplit(sp, m, n, k, A, B, beta, c, ldc, scratch)
		return
	}
	if bp, ok := balanceRows(plan, m, k, len(scratch)); ok {
		plan = bp
	}
	workers, mt, nt, colTasks, total := plan.workers, plan.mt, plan.nt, plan.colTasks, plan.total
	if plan.prepack {
		var buf []float32
		buf, scratch = g.carve(scratch, prepackSize(m, k))
		A = prepackA(g.team, A, m, k, buf)
	}
	g.runTasks(workers, total, plan.aSize, plan.bSize, scratch, func(_, t int, packA, packB []float32, ps *packScratch) {
		i0, j0 := t/colTasks*mt, t%colTasks*nt
		if plan.direct {
			g.taskDirect(A.(matA), B, alpha, beta, c, ldc, 0, k, i0, min(i0+mt, m), j0, min(j0+nt, n), packB, ps)
		} else {
			g.task(&g, A, B, alpha, beta, c, ldc, 0, k, i0, min(i0+mt, m), j0, min(j0+nt, n), plan.mc, packA, packB, ps)
		}
	})
}

// runTasks runs tasks 0..total-1 on workers workers that pull them from a
// shared counter, each worker with its own packing buffers (aSize and
// bSize values carved from scratch) and packer scratch; task gets the
// worker's index w too.
func (g gemmImpl) runTasks(workers, total, aSize, bSize int, scratch []float32, task func(w, t int, packA, packB []float32, ps *packScratch)) {
	bufs := make([][2][]float32, workers)
	for w := range bufs {
		bufs[w][0], scratch = g.carve(scratch, aSize)
		bufs[w][1], scratch = g.carve(scratch, bSize)
	}
	var next atomic.Int64
	g.team.Run(workers, func(w int) {
		packA, packB := bufs[w][0], bufs[w][1]
		ps := g.team.packScratch()
		defer g.team.putPackScratch(ps)
		if len(packB) >= gemmNR*gemmKC { // tasks that take no packing scratch carve none
			ps.f = packB[len(packB)-gemmNR*gemmKC:]
		}
		for {
			t := int(next.Add(1) - 1)
			if t >= total {
				return
			}
			task(w, t, packA, packB, ps)
		}
	})
}

// splitPlan cuts a product's depth instead of C: task t computes k slab
// t/colTasks (all rows, columns block t%colTasks of nt) into a partial
// product of its own, slab 0 straight into C, and the partials are added
// to C in slab order afterwards.
//
// With alpha 1 that is the arithmetic of running the slabs in order on one
// task: there, each slab's kernel call stores acc + C (acc its register
// sum, alpha*acc exact), here the partial holds acc and C + acc is added
// later, the same rounding. So a split product is bit-identical to the
// unsplit one, whatever the cores. What changes is packing: every block of
// op(B) and op(A) is packed once, where a C of few tiles (a convolution's
// weight gradient at large images: m = OC, n = C*K*K, k = OH*OW, 64 slabs
// at 128x128) is cut into blocks of rows that each pack all of op(B).
type splitPlan struct {
	slabs, nt, colTasks, total, workers int
	direct                              bool
	aSize, bSize, partials              int
}

// planSplit is the split plan for an m x n x k product under plan p, and
// whether to follow it: where alpha is 1, p cuts C's rows (so op(B) would
// be packed once per block of rows), there are at least two slabs per
// worker, and the partials and packing buffers fit in scratch values (what
// the caller carved for p, so a split needs no memory of its own).
func (g gemmImpl) planSplit(p gemmPlan, m, n, k int, alpha float32, A packerA, scratch int) (splitPlan, bool) {
	slabs := ceilDiv(k, gemmKC)
	if alpha != 1 || p.workers < 2 || ceilDiv(m, p.mt) < 2 || slabs < 2*p.workers || m > taskRows {
		return splitPlan{}, false
	}
	nt := min(n, taskCols)
	sp := splitPlan{slabs: slabs, nt: nt, colTasks: ceilDiv(n, nt), direct: p.direct, partials: (slabs - 1) * m * n}
	sp.total = slabs * sp.colTasks
	sp.workers = min(p.workers, sp.total)
	if _, prepacked := A.(prepackedA); !prepacked && !p.direct {
		sp.aSize = roundUp(min(m, gemmMC), gemmMR) * gemmKC
	}
	sp.bSize = roundUp(nt, gemmNR)*gemmKC + gemmNR*gemmKC
	return sp, sp.partials+sp.workers*(sp.aSize+sp.bSize) <= scratch
}

// gemmSplit runs an m x n x k product (alpha 1) under the split plan sp.
func (g gemmImpl) gemmSplit(sp splitPlan, m, n, k int, A packerA, B packerB, beta float32, c []float32, ldc int, scratch []float32) {
	partials, scratch := g.carve(scratch, sp.partials)
	g.runTasks(sp.workers, sp.total, sp.aSize, sp.bSize, scratch, func(_, t int, packA, packB []float32, ps *packScratch) {
		s, j0 := t/sp.colTasks, t%sp.colTasks*sp.nt
		j1, k0 := min(j0+sp.nt, n), s*gemmKC
		// Slab 0 goes to C with the caller's beta, slab s > 0 overwrites
		// partial s-1 (m x n, rows n apart).
		dst, ld, b := c, ldc, beta
		if s > 0 {
			dst, ld, b = partials[(s-1)*m*n:s*m*n], n, 0
		}
		if sp.direct {
			g.taskDirect(A.(matA), B, 1, b, dst, ld, k0, min(k0+gemmKC, k), 0, m, j0, j1, packB, ps)
		} else {
			g.task(&g, A, B, 1, b, dst, ld, k0, min(k0+gemmKC, k), 0, m, j0, j1, gemmMC, packA, packB, ps)
		}
	})
	g.team.For(m, max(1, (16<<10)/(sp.slabs*n)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := c[i*ldc : i*ldc+n]
			for s := 1; s < sp.slabs; s++ {
				for j, v := range partials[(s-1)*m*n+i*n : (s-1)*m*n+(i+1)*n] {
					row[j] += v
				}
			}
		}
	})
}

// slab starts the k slab at pc of a task over depths [k0,k1): its depth,
// the beta it applies to C (beta0 on the first slab, then 1: the products
// accumulate) and op(B)'s columns [j0,j0+nw) of it, packed.
func (g *gemmImpl) slab(B packerB, packB []float32, ps *packScratch, beta0 float32, pc, k0, k1, j0, nw int) (kc int, beta float32, bp []float32) {
	kc, beta = min(gemmKC, k1-pc), beta0
	if pc > k0 {
		beta = 1
	}
	if p, ok := B.(*panelsB); ok { // packed already: read in place
		return kc, beta, p.view(pc, kc, j0, nw)
	}
	bp = packB[:roundUp(nw, gemmNR)*kc]
	B.packB(g, bp, ps, pc, kc, j0, nw)
	return kc, beta, bp
}

// task computes rows [i0,i1) x columns [j0,j1) of C over depths [k0,k1)
// (k0 a multiple of gemmKC), packing op(A) mc rows at a time.
func (gemmImpl) task(g *gemmImpl, A packerA, B packerB, alpha, beta0 float32, c []float32, ldc, k0, k1, i0, i1, j0, j1, mc int, packA, packB []float32, ps *packScratch) {
	nw := j1 - j0
	tile := &ps.tile
	for pc := k0; pc < k1; pc += gemmKC {
		kc, beta, bp := g.slab(B, packB, ps, beta0, pc, k0, k1, j0, nw)
		for ic := i0; ic < i1; ic += mc {
			mc := min(mc, i1-ic)
			ap := A.packA(packA, ic, mc, pc, kc)
			for jr := 0; jr < nw; {
				if g.wide != nil && nw-jr >= 2*gemmNR {
					// Two whole panels: 6x32 tiles (fewer rows at the
					// bottom edge).
					bPanels := bp[jr*kc : (jr+2*gemmNR)*kc]
					for ir := 0; ir < mc; ir += gemmMR {
						aPanel := ap[ir*kc : (ir+gemmMR)*kc]
						ci := (ic+ir)*ldc + j0 + jr
						g.wide(kc, aPanel, bPanels, c[ci:], ldc, alpha, beta, beta == 0, min(gemmMR, mc-ir))
					}
					jr += 2 * gemmNR
					continue
				}
				nr := min(gemmNR, nw-jr)
				bPanel := bp[jr*kc : (jr+gemmNR)*kc]
				for ir := 0; ir < mc; ir += gemmMR {
					mr := min(gemmMR, mc-ir)
					aPanel := ap[ir*kc : (ir+gemmMR)*kc]
					ci := (ic+ir)*ldc + j0 + jr
					if nr == gemmNR {
						g.kernel(kc, aPanel, bPanel, c[ci:], ldc, alpha, beta, beta == 0, mr)
						continue
					}
					g.edgeTile(tile, kc, aPanel, bPanel, c[ci:], ldc, alpha, beta, mr, nr)
				}
				jr += gemmNR
			}
		}
	}
}

// taskDirect is task for a row-major op(A) read unpacked by the direct
// kernels (same arguments): per k slab, op(B)'s columns are packed once
// and every row panel of the task runs over them.
func (g *gemmImpl) taskDirect(A matA, B packerB, alpha, beta0 float32, c []float32, ldc, k0, k1, i0, i1, j0, j1 int, packB []float32, ps *packScratch) {
	nw := j1 - j0
	tile := &ps.tile
	// Wide tiles take rows in panels of 8 where the implementation has an
	// 8-row kernel, the rows left (and all rows of narrow tiles) in panels
	// of MR. Rows below the last whole MR panel are packed once per slab:
	// the assembly reads whole panels, which would run past A.
	i8 := i0
	if g.wideDirect8 != nil || g.narrowDirect8 != nil {
		i8 = i0 + (i1-i0)/8*8
	}
	// The edge panels live in the worker's scratch: arrays here would
	// escape to the heap through the closures below.
	edge := (*[gemmMR * gemmKC]float32)(ps.f[:gemmMR*gemmKC])
	edge8 := (*[gemmMR * gemmKC]float32)(ps.f[gemmMR*gemmKC : 2*gemmMR*gemmKC])
	for pc := k0; pc < k1; pc += gemmKC {
		kc, beta, bp := g.slab(B, packB, ps, beta0, pc, k0, k1, j0, nw)
		// edgeOf packs the rows below the last whole MR panel from row
		// from into buf, and says where they start (i1: none).
		edgeOf := func(buf *[gemmMR * gemmKC]float32, from int) (int, []float32) {
			iEdge := from + (i1-from)/gemmMR*gemmMR
			if iEdge == i1 {
				return iEdge, nil
			}
			return iEdge, packRowsPanel(buf, A.a[iEdge*A.lda+pc:], A.lda, kc, i1-iEdge)
		}
		iEdge, edgePanel := edgeOf(edge, i0)
		iEdge8, edgePanel8 := iEdge, edgePanel
		if i8 > i0 {
			iEdge8, edgePanel8 = edgeOf(edge8, i8)
		}
		// rowsMR runs rows [from,i1) of tile jr (width columns) in panels
		// of MR, the short one below iEdge from edgePanel.
		rowsMR := func(from, iEdge int, edgePanel []float32, jr, width int, bPanels []float32) {
			for ir := from; ir < i1; ir += gemmMR {
				mr := min(gemmMR, i1-ir)
				a := A.a[ir*A.lda+pc:]
				ci := ir*ldc + j0 + jr
				switch {
				case ir >= iEdge && width == 2*gemmNR:
					g.wide(kc, edgePanel, bPanels, c[ci:], ldc, alpha, beta, beta == 0, mr)
				case ir >= iEdge && nw-jr >= gemmNR:
					g.kernel(kc, edgePanel, bPanels, c[ci:], ldc, alpha, beta, beta == 0, mr)
				case ir >= iEdge:
					g.edgeTile(tile, kc, edgePanel, bPanels, c[ci:], ldc, alpha, beta, mr, nw-jr)
				case width == 2*gemmNR:
					g.wideDirect(kc, a, A.lda, bPanels, c[ci:], ldc, alpha, beta, beta == 0, mr)
				case nw-jr >= gemmNR:
					g.direct(kc, a, A.lda, bPanels, c[ci:], ldc, alpha, beta, beta == 0, mr)
				default:
					// A narrow tile is the task's last, after every
					// wide tile has used edge8: it may serve here.
					g.edgeTile(tile, kc, packRowsPanel(edge8, a, A.lda, kc, mr), bPanels, c[ci:], ldc, alpha, beta, mr, nw-jr)
				}
			}
		}
		for jr := 0; jr < nw; {
			width := gemmNR
			if g.wideDirect != nil && nw-jr >= 2*gemmNR {
				width = 2 * gemmNR
			}
			bPanels := bp[jr*kc : (jr+width)*kc]
			kern8 := g.wideDirect8
			if width == gemmNR {
				kern8 = g.narrowDirect8
				if nw-jr < gemmNR { // a right edge: through a tile
					kern8 = nil
				}
			}
			if kern8 != nil && i8 > i0 {
				for ir := i0; ir < i8; ir += 8 {
					kern8(kc, A.a[ir*A.lda+pc:], A.lda, bPanels, c[ir*ldc+j0+jr:], ldc, alpha, beta, beta == 0, 8)
				}
				rowsMR(i8, iEdge8, edgePanel8, jr, width, bPanels)
			} else {
				rowsMR(i0, iEdge, edgePanel, jr, width, bPanels)
			}
			jr += width
		}
	}
}

// edgeTile updates an mr x nr tile of C at the right edge (nr < NR): the
// full padded tile is computed into tile, then only its mr x nr part is
// written to C.
func (g *gemmImpl) edgeTile(tile *[gemmMR * gemmNR]float32, kc int, aPanel, bPanel, c []float32, ldc int, alpha, beta float32, mr, nr int) {
	g.kernel(kc, aPanel, bPanel, tile[:], gemmNR, alpha, 0, true, gemmMR)
	for i := 0; i < mr; i++ {
		row := c[i*ldc : i*ldc+nr]
		src := tile[i*gemmNR : i*gemmNR+nr]
		if beta == 0 {
			copy(row, src)
		} else {
			for j, v := range src {
				row[j] = v + beta*row[j]
			}
		}
	}
}

// packAPanels packs rows [i0,i0+mc) and columns [p0,p0+kc) of op(A) into
// MR-row panels: panel r holds dst[r*MR*kc + p*MR + i] = op(A)[i0+r*MR+i][p0+p],
// rows past mc zero.
func packAPanels(dst []float32, trans bool, a []float32, lda, i0, mc, p0, kc int) {
	for r := 0; r < mc; r += gemmMR {
		mr := min(gemmMR, mc-r)
		d := dst[r*kc : (r+gemmMR)*kc]
		switch {
		case trans && mr == gemmMR:
			// op(A)[i][p] = a[p*lda+i]: each p gives MR contiguous values.
			base := p0*lda + i0 + r
			for p := 0; p < kc; p++ {
				*(*[gemmMR]float32)(d[p*gemmMR:]) = *(*[gemmMR]float32)(a[base+p*lda:])
			}
		case !trans && mr == gemmMR:
			// op(A)[i][p] = a[i*lda+p]: interleave MR rows.
			row := func(i int) []float32 { return a[(i0+r+i)*lda+p0 : (i0+r+i)*lda+p0+kc] }
			r0, r1, r2, r3, r4, r5 := row(0), row(1), row(2), row(3), row(4), row(5)
			for p := range r0 {
				dp := (*[gemmMR]float32)(d[p*gemmMR:])
				dp[0], dp[1], dp[2], dp[3], dp[4], dp[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
			}
		default:
			// Bottom edge: fewer than MR rows, the rest zero.
			clear(d)
			for i := 0; i < mr; i++ {
				for p := 0; p < kc; p++ {
					if trans {
						d[p*gemmMR+i] = a[(p0+p)*lda+i0+r+i]
					} else {
						d[p*gemmMR+i] = a[(i0+r+i)*lda+p0+p]
					}
				}
			}
		}
	}
}

// packBPanels packs rows [p0,p0+kc) and columns [j0,j0+nw) of op(B) into
// NR-column panels: panel q holds dst[q*NR*kc + p*NR + j] = op(B)[p0+p][j0+q*NR+j],
// columns past nw zero.
func packBPanels(g *gemmImpl, dst []float32, trans bool, b []float32, ldb, p0, kc, j0, nw int) {
	full := nw / gemmNR * gemmNR
	if trans {
		// op(B)[p][j] = b[j*ldb+p]: 16 rows of b become the 16 lanes.
		for q := 0; q < full; q += gemmNR {
			base := (j0+q)*ldb + p0
			g.transpose16(dst[q*kc:(q+gemmNR)*kc], b[base:base+(gemmNR-1)*ldb+kc], ldb, kc)
		}
	} else if full > 0 {
		// op(B)[p][j] = b[p*ldb+j]: each p gives NR contiguous values per panel.
		for p := 0; p < kc; p++ {
			base := (p0+p)*ldb + j0
			g.copyChunks16(dst[p*gemmNR:], b[base:base+full], full/gemmNR, kc*gemmNR)
		}
	}
	if full == nw {
		return
	}
	// Right edge: fewer than NR columns, the rest zero.
	d := dst[full*kc : (full+gemmNR)*kc]
	clear(d)
	for p := 0; p < kc; p++ {
		for j := 0; j < nw-full; j++ {
			if trans {
				d[p*gemmNR+j] = b[(j0+full+j)*ldb+p0+p]
			} else {
				d[p*gemmNR+j] = b[(p0+p)*ldb+j0+full+j]
			}
		}
	}
}

// copyChunks16Go is the pure-Go copyChunks16.
func copyChunks16Go(dst, src []float32, n, dstStride int) {
	for t := 0; t < n; t++ {
		d := dst[t*dstStride : t*dstStride+16]
		s := src[16*t : 16*t+16]
		for i := range d {
			d[i] = s[i]
		}
	}
}

// transpose16Go is the pure-Go transpose16.
func transpose16Go(dst, src []float32, srcStride, kc int) {
	dst = dst[:kc*16]
	for l := 0; l < 16; l++ {
		row := src[l*srcStride : l*srcStride+kc]
		for p, v := range row {
			dst[p*16+l] = v
		}
	}
}

// gatherRows16Go is the pure-Go gatherRows16.
func gatherRows16Go(dst, src []float32, offs []int, panels int) {
	kc := len(offs)
	dst = dst[:panels*kc*16]
	for t := 0; t < panels; t++ {
		for p, o := range offs {
			d, s := dst[(t*kc+p)*16:(t*kc+p)*16+16], src[16*t+o:16*t+o+16]
			for l := range d {
				d[l] = s[l]
			}
		}
	}
}

// transpose16GatherGo is the pure-Go transpose16Gather.
func transpose16GatherGo(dst, src []float32, offs *[16]int, n int) {
	dst = dst[:16*n]
	for l, o := range offs {
		for t, v := range src[o : o+n] {
			dst[t*16+l] = v
		}
	}
}

// scaleRows sets C = beta*C over m rows of n values (beta == 0 clears,
// without reading).
func scaleRows(c []float32, m, n, ldc int, beta float32) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
func roundUp(a, b int) int { return ceilDiv(a, b) * b }
