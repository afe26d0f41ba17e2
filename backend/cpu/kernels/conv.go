package kernels

import (
	"fmt"
	"runtime"

	"github.com/memunet/memunet/backend"
)

// ConvWorkspace is the number of float32 values the fast forward and backward
// kernels take as workspace, exactly what they carve from it: the packed
// weights, the zero-padded image and the GEMM's per-worker packing buffers
// (so with this much they allocate nothing themselves). It depends on the
// shape and on GOMAXPROCS (one set of packing buffers per worker).
func ConvWorkspace(s backend.ConvShape) int {
	P, CKK, HW := s.OH()*s.OW(), s.C*s.K*s.K, s.H*s.W
	// Forward, as conv2d carves it.
	fwd := 0
	pre := s.N*P > 2*taskCols
	if pre {
		fwd += prepackSize(s.OC, CKK)
	}
	if !s.Direct() {
		fwd += paddedSize(s.C, s.H, s.W, s.Pad)
	}
	fwd += gemmScratchSize(s.OC, P, CKK, pre)
	// Backward with din, as conv2dBackward carves it (without din it needs less).
	bwd := 0
	preW := s.N*HW > 2*taskCols
	if preW {
		bwd += prepackSize(s.C, s.OC*s.K*s.K)
	}
	bwd += backPadSize(s, true)
	bwd += max(gemmScratchSize(s.OC, CKK, P, false), gemmScratchSize(s.C, HW, s.OC*s.K*s.K, preW))
	switch s.Algo {
	case backend.ConvWinograd:
		return max(fwd, bwd, winogradWorkspace(s.Images(1)))
	case backend.ConvAuto:
		return autoWorkspace(s.Images(1), max(fwd, bwd))
	}
	return max(fwd, bwd)
}

// backPadSize is the padded-image buffer the backward pass carves (0 for a
// Direct convolution): the zero-padded image for dw and, with din, the
// output gradient padded by K-1-Pad for din, which reuse one buffer.
func backPadSize(s backend.ConvShape, din bool) int {
	if s.Direct() {
		return 0
	}
	size := paddedSize(s.C, s.H, s.W, s.Pad)
	if dpad := s.K - 1 - s.Pad; din && dpad >= 0 {
		size = max(size, paddedSize(s.OC, s.OH(), s.OW(), dpad))
	}
	return size
}

func checkConv(s backend.ConvShape, out, in, w, bias, ws int, hasBias bool) {
	if s.N <= 0 || s.C <= 0 || s.H <= 0 || s.W <= 0 || s.OC <= 0 || s.K <= 0 || s.Pad < 0 || s.OH() <= 0 || s.OW() <= 0 {
		panic(fmt.Sprintf("kernels: bad conv shape %+v", s))
	}
	// The direct kernels need the direct way's workspace whatever s.Algo
	// (a caller may give Auto no more than that).
	direct := s
	direct.Algo = backend.ConvDirect
	if out != s.OutSize() || in != s.InSize() || w != s.WeightSize() || (hasBias && bias != s.OC) || ws < ConvWorkspace(direct) {
		panic(fmt.Sprintf("kernels: conv %+v: sizes out=%d in=%d w=%d bias=%d ws=%d do not match", s, out, in, w, bias, ws))
	}
}

// Conv2dNaive computes
//
//	out[n,o,y,x] = bias[o] + sum_{c,i,j} w[o,c,i,j] * in[n,c,y+i-Pad,x+j-Pad]
//
// with in taken as 0 outside the image. bias may be nil.
func Conv2dNaive[T float32 | float64](s backend.ConvShape, out, in, w, bias []T) {
	checkConv(s, len(out), len(in), len(w), len(bias), ConvWorkspace(s), bias != nil)
	OH, OW, K := s.OH(), s.OW(), s.K
	for n := 0; n < s.N; n++ {
		for o := 0; o < s.OC; o++ {
			for y := 0; y < OH; y++ {
				for x := 0; x < OW; x++ {
					var acc T
					if bias != nil {
						acc = bias[o]
					}
					for c := 0; c < s.C; c++ {
						for i := 0; i < K; i++ {
							iy := y + i - s.Pad
							if iy < 0 || iy >= s.H {
								continue
							}
							for j := 0; j < K; j++ {
								ix := x + j - s.Pad
								if ix < 0 || ix >= s.W {
									continue
								}
								acc += w[((o*s.C+c)*K+i)*K+j] * in[((n*s.C+c)*s.H+iy)*s.W+ix]
							}
						}
					}
					out[((n*s.OC+o)*OH+y)*OW+x] = acc
				}
			}
		}
	}
}

// Conv2dBackwardNaive computes, for dout of out's shape,
//
//	din[n,c,y,x]  = sum_{o,i,j} w[o,c,i,j] * dout[n,o,y-i+Pad,x-j+Pad]   (overwritten; skipped if din is nil)
//	dw[o,c,i,j]  += sum_{n,y,x} dout[n,o,y,x] * in[n,c,y+i-Pad,x+j-Pad]
//	dbias[o]     += sum_{n,y,x} dout[n,o,y,x]                           (skipped if dbias is nil)
func Conv2dBackwardNaive[T float32 | float64](s backend.ConvShape, din, dw, dbias, dout, in, w []T) {
	checkConv(s, len(dout), len(in), len(w), len(dbias), ConvWorkspace(s), dbias != nil)
	if din != nil && len(din) != len(in) || len(dw) != len(w) {
		panic("kernels: conv backward: din/dw sizes do not match in/w")
	}
	clear(din)
	OH, OW, K := s.OH(), s.OW(), s.K
	for n := 0; n < s.N; n++ {
		for o := 0; o < s.OC; o++ {
			for y := 0; y < OH; y++ {
				for x := 0; x < OW; x++ {
					g := dout[((n*s.OC+o)*OH+y)*OW+x]
					if dbias != nil {
						dbias[o] += g
					}
					for c := 0; c < s.C; c++ {
						for i := 0; i < K; i++ {
							iy := y + i - s.Pad
							if iy < 0 || iy >= s.H {
								continue
							}
							for j := 0; j < K; j++ {
								ix := x + j - s.Pad
								if ix < 0 || ix >= s.W {
									continue
								}
								wi := ((o*s.C+c)*K+i)*K + j
								ii := ((n*s.C+c)*s.H+iy)*s.W + ix
								dw[wi] += g * in[ii]
								if din != nil {
									din[ii] += g * w[wi]
								}
							}
						}
					}
				}
			}
		}
	}
}

// Conv2d is the fast forward kernel: per image one GEMM
// out_n (OC, OH*OW) = w (OC, C*K*K) x col (C*K*K, OH*OW) (Sgemm's driver,
// parallel over cores), where col is the image's im2col matrix, generated
// block by block while the GEMM packs its panels (implicit im2col, never
// stored); a 1x1 convolution without padding multiplies by the image
// itself. The weights are packed once for all images. The bias is written
// into out_n first and the GEMM accumulates onto it, saving a pass over out.
// ws must hold ConvWorkspace(s) values; it no longer holds an im2col
// matrix but serves as scratch for the packed weights and the GEMM's packing
// buffers (anything that does not fit is allocated), its contents
// unspecified afterwards. bias may be nil. Same result as Conv2dNaive up to
// float32 summation order.
func Conv2d(s backend.ConvShape, out, in, w, bias, ws []float32) {
	(*Team)(nil).Conv2d(s, out, in, w, bias, ws)
}

// Conv2d is the package's Conv2d on the team.
func (t *Team) Conv2d(s backend.ConvShape, out, in, w, bias, ws []float32) {
	conv2d(gemmOn(t), s, out, Float32Image(in), w, bias, ws)
}

// Conv2dImage is Conv2d of an Image: a 16-bit one is widened as it is
// padded, with the bits of Conv2d on its widened values. A Direct
// convolution reads its input unpadded, so it takes float32 only.
func (t *Team) Conv2dImage(s backend.ConvShape, out []float32, in Image, w, bias, ws []float32) {
	conv2d(gemmOn(t), s, out, in, w, bias, ws)
}

func conv2d(gemm gemmImpl, s backend.ConvShape, out []float32, in Image, w, bias, ws []float32) {
	checkConv(s, len(out), in.Len(), len(w), len(bias), len(ws), bias != nil)
	if s.Direct() && in.h != nil {
		panic("kernels: a 1x1 convolution reads its input unpadded: give it float32")
	}
	P, CKK := s.OH()*s.OW(), s.C*s.K*s.K
	inImage, outImage := s.C*s.H*s.W, s.OC*P
	// ws (no longer an im2col matrix) holds the packed weights and the
	// GEMM's packing buffers, so the kernel allocates nothing when it is
	// large enough.
	var A packerA = matA{a: w, lda: CKK}
	scratch := ws
	// Packing the weights once for all images pays where the kernels would
	// otherwise pack them per task; where they read them unpacked, nothing
	// is packed at all.
	if s.N*P > 2*taskCols && !gemm.planFor(s.OC, P, CKK, A).direct {
		var buf []float32
		buf, scratch = gemm.carve(ws, prepackSize(s.OC, CKK))
		A = prepackA(gemm.team, A, s.OC, CKK, buf)
	}
	// Each image is copied into a zero border once; the im2col panels are
	// then plain copies from it.
	var xpBuf []float32
	if !s.Direct() {
		xpBuf, scratch = gemm.carve(scratch, paddedSize(s.C, s.H, s.W, s.Pad))
	}
	// Where the gather kernels serve, each task pads the band of rows it
	// reads, in the padded image's place.
	bands := !s.Direct() && gemm.canGather(s.OC, A, s.OH(), s.OW()) && !gemm.packedByTasks(s.OC, A)
	for n := 0; n < s.N; n++ {
		x := in.slice(n*inImage, (n+1)*inImage)
		o := out[n*outImage : (n+1)*outImage]
		var beta float32
		if bias != nil {
			fillRows(gemm.team, o, bias, P)
			beta = 1
		}
		if bands && gemm.gatherBands(s.OC, CKK, A, x, s.C, s.H, s.W, s.Pad, s.K, beta, o, xpBuf, scratch) {
			continue
		}
		var B packerB = matB{b: x.f, ldb: P}
		if !s.Direct() {
			xp := padImage(gemm.team, xpBuf, x, s.C, s.H, s.W, s.Pad)
			B = im2colP{xp: xp, C: s.C, Hp: s.H + 2*s.Pad, Wp: s.W + 2*s.Pad, K: s.K, OH: s.OH(), OW: s.OW()}
		}
		if im, ok := B.(im2colP); ok && gemm.canGather(s.OC, A, im.OH, im.OW) {
			gemm.gatherGemm(s.OC, CKK, A, im, beta, o, scratch)
			continue
		}
		gemm.gemm(s.OC, P, CKK, 1, A, B, beta, o, P, scratch)
	}
}

// segmentRows is how many output rows of OW pixels one 32-pixel gather
// segment covers: 1 where whole segments tile a row, 2 for 16-pixel rows
// and 4 for 8-pixel ones (a segment's runs lie a padded row apart), 0
// otherwise.
func segmentRows(OW int) int {
	switch {
	case OW%(2*gemmNR) == 0:
		return 1
	case OW == gemmNR || OW == gemmNR/2:
		return 2 * gemmNR / OW
	}
	return 0
}

// canGather reports whether gatherGemm can compute the m x (OH*OW) x k
// product of A and an im2col of OH output rows of OW pixels: there are
// gather kernels, 32-pixel segments tile the output, and A is prepacked or
// read in place (gatherDirect), or else (packedByTasks) packed by row
// blocks for an image of at most gatherRowTasks pixels.
func (g gemmImpl) canGather(m int, A packerA, OH, OW int) bool {
	if sr := segmentRows(OW); g.gather8 == nil || sr == 0 || OH%sr != 0 {
		return false
	}
	return !g.packedByTasks(m, A) || OH*OW <= gatherRowTasks
}

// gatherRowTasks is the most output pixels (two segments: an 8x8 image)
// for which gatherGemm takes an A it must pack: its tasks then split A's
// rows, each packing its own once, instead of the pixels.
const gatherRowTasks = 2 * 2 * gemmNR

// gatherDirect reports whether the gather kernels read the m-row A in
// place, in whole 8-row panels: row-major with its rows not a multiple of
// 4 KiB apart, or the flipped 3x3 weights of an input gradient (through
// offsets, gatherFlipped8).
func (g gemmImpl) gatherDirect(m int, A packerA) bool {
	switch a := A.(type) {
	case matA:
		return !a.trans && useDirect(a.lda) && m%8 == 0
	case flippedWA:
		return g.gatherFlipped8 != nil && a.K == 3 && m%8 == 0
	}
	return false
}

// packedByTasks reports whether the gather kernels' tasks pack the m-row A
// themselves: it is neither prepacked nor read in place.
func (g gemmImpl) packedByTasks(m int, A packerA) bool {
	_, pre := A.(prepackedA)
	return !pre && !g.gatherDirect(m, A)
}

// gatherGemm computes C (m x OH*OW, rows OH*OW apart) = A x B + beta*C for
// an A and im2col B that canGather accepts, with the gather kernels: B is
// not packed but read from the padded image through offsets, A read in
// place (gatherDirect) or from its prepacking. Tasks are blocks of output
// pixels, or
// where A is packedByTasks, blocks of its rows over every pixel, each
// packing its A rows slab by slab. It carves no more scratch than gemm
// would.
func (g gemmImpl) gatherGemm(m, k int, A packerA, B im2colP, beta float32, c, scratch []float32) {
	n := B.OH * B.OW
	plan := g.planFor(m, n, k, A)
	if g.packedByTasks(m, A) {
		// Row blocks of whole 6-row panels, up to gemmMC rows each (as
		// gemm's own packing of A).
		panels := ceilDiv(m, gemmMR)
		total := max(min(panels, 3*plan.workers), ceilDiv(m, gemmMC))
		rows := ceilDiv(panels, total) * gemmMR
		g.runTasks(min(plan.workers, total), total, rows*gemmKC, gemmNR*gemmKC, scratch, func(_, t int, packA, _ []float32, ps *packScratch) {
			r0, r1 := t*panels/total*gemmMR, min(m, (t+1)*panels/total*gemmMR)
			g.gatherTask(r0, r1, k, A, B, beta, c, n, 0, n, ps, packA)
		})
		return
	}
	nt := roundUp(min(n, taskCols), 2*gemmNR)
	for ceilDiv(n, nt) < 3*plan.workers && nt > 2*gemmNR {
		nt = roundUp(ceilDiv(nt, 2), 2*gemmNR)
	}
	total := ceilDiv(n, nt)
	g.runTasks(min(plan.workers, total), total, 0, gemmNR*gemmKC, scratch, func(_, t int, _, _ []float32, ps *packScratch) {
		g.gatherTask(0, m, k, A, B, beta, c, n, t*nt, min((t+1)*nt, n), ps, nil)
	})
}

// gatherBands is gatherGemm for a convolution (forward, or the input
// gradient's, of dout) that pads the image itself, a band of rows per
// task: each task copies the input rows its output rows read (all
// channels, with the zero border) into its own buffer, which stays in
// cache for the kernels, instead of the whole image being padded first.
// x is the image (C,H,W); bands (a padded image's size) holds the
// workers' buffers: it reports false, doing nothing, where they would not
// fit (images a few rows high on many cores). Same products in the same
// order as gatherGemm over the padded image.
func (g gemmImpl) gatherBands(m, k int, A packerA, x Image, C, H, W, pad, K int, beta float32, c, bands, scratch []float32) bool {
	Wp := W + 2*pad
	OH, OW := H+2*pad-K+1, Wp-K+1
	n := OH * OW
	plan := g.planFor(m, n, k, A)
	// Tasks take whole segments' rows (segmentRows each), as evenly as
	// they split: about three tasks per worker, of two segments or more
	// where there are few (each band pads K-1 rows more than its task
	// reads), more where the workers' bands would not fit in a padded
	// image's size.
	sr := segmentRows(OW)
	segs := OH / sr
	total := min(segs, 3*plan.workers, max(plan.workers, segs/2))
	workers := min(plan.workers, total)
	for total < segs && workers*(ceilDiv(segs, total)*sr+K-1) > H+2*pad {
		total++
	}
	bandSize := C * (ceilDiv(segs, total)*sr + K - 1) * Wp
	if workers*bandSize > len(bands) {
		return false
	}
	g.runTasks(workers, total, 0, gemmNR*gemmKC, scratch, func(w, t int, _, _ []float32, ps *packScratch) {
		y0, y1 := t*segs/total*sr, (t+1)*segs/total*sr
		Hb := y1 - y0 + K - 1
		band := bands[w*bandSize : w*bandSize+C*Hb*Wp]
		// Band row r is input row y0+r-pad: rows [rLo,rHi) lie in the
		// image, the others in the zero border.
		rLo, rHi := max(0, pad-y0), min(Hb, H+pad-y0)
		for ch := 0; ch < C; ch++ {
			plane := band[ch*Hb*Wp : (ch+1)*Hb*Wp]
			clear(plane[:rLo*Wp])
			clear(plane[rHi*Wp:])
			x.padRows(plane[rLo*Wp:rHi*Wp], (ch*H+y0+rLo-pad)*W, (ch*H+y0+rHi-pad)*W, W, pad)
		}
		B := im2colP{xp: band, C: C, Hp: Hb, Wp: Wp, K: K, OH: y1 - y0, OW: OW}
		g.gatherTask(0, m, k, A, B, beta, c[y0*OW:], n, 0, (y1-y0)*OW, ps, nil)
	})
	return true
}

// gatherTask runs the gather kernels over output pixels [q0,q1) of B (an
// im2col that canGather accepts with A), writing their columns of C from
// c (rows ldc apart): per k slab, every 32-pixel segment (of one output
// row, or of several shorter rows) meets A's row panels while it is in
// cache. It covers rows [r0,r1) of A (r0 a multiple of the panel height:
// 8 read directly, 6 packed), packing them into packA where A is
// packedByTasks (packA nil otherwise).
func (g gemmImpl) gatherTask(r0, r1, k int, A packerA, B im2colP, beta float32, c []float32, ldc, q0, q1 int, ps *packScratch, packA []float32) {
	direct, isDirect := A.(matA)
	isDirect = isDirect && packA == nil
	flipped, isFlipped := A.(flippedWA)
	isFlipped = isFlipped && packA == nil
	for pc := 0; pc < k; pc += gemmKC {
		kc, b := min(gemmKC, k-pc), beta
		if pc > 0 {
			b = 1
		}
		B.rowOffsets(ps.offs[:kc], pc)
		rows := newGatherRows(ps.offs[:kc], min(B.OW, 2*gemmNR), B.Wp)
		var panels []float32 // the slab of rows [r0,r1) of a packed A
		var aoffs aOffsets   // or where the flipped weights' slab lies in w
		switch {
		case isFlipped:
			aoffs = flippedOffsets(ps.aoffs[:kc], flipped.C, pc)
		case !isDirect:
			panels = A.packA(packA, r0, r1-r0, pc, kc)
		}
		for q := q0; q < q1; q += 2 * gemmNR {
			seg := B.xp[q/B.OW*B.Wp+q%B.OW:]
			if isFlipped {
				for ir := r0; ir < r1; ir += 8 {
					g.gatherFlipped8(kc, flipped.w[ir*9:], aoffs, seg, rows, c[ir*ldc+q:], ldc, b, b == 0)
				}
				continue
			}
			if isDirect {
				for ir := r0; ir < r1; ir += 8 {
					g.gather8(kc, direct.a[ir*direct.lda+pc:], direct.lda, seg, rows, c[ir*ldc+q:], ldc, b, b == 0)
				}
				continue
			}
			for ir := r0; ir < r1; ir += gemmMR {
				p := (ir - r0) * kc
				g.gather6(kc, panels[p:p+gemmMR*kc], seg, rows, c[ir*ldc+q:], ldc, b, b == 0, min(gemmMR, r1-ir))
			}
		}
	}
}

// ConvBiasGrad adds to dbias the bias gradient of s.N images of dout:
// per image and output channel, its plane summed in float32 in order,
// then added (Conv2dBackward's bits).
func (t *Team) ConvBiasGrad(s backend.ConvShape, dbias, dout []float32) {
	if len(dbias) != s.OC || len(dout) != s.OutSize() {
		panic(fmt.Sprintf("kernels: conv bias gradient %+v: dbias=%d dout=%d", s, len(dbias), len(dout)))
	}
	P := s.OH() * s.OW()
	for n := range s.N {
		t.biasGrad(dbias, dout[n*s.OC*P:(n+1)*s.OC*P], P)
	}
}

// biasGrad adds to dbias[o] the sum of row o of g (rows of p values).
func (t *Team) biasGrad(dbias, g []float32, p int) {
	t.For(len(dbias), 1, func(lo, hi int) {
		for oc := lo; oc < hi; oc++ {
			var sum float32
			for _, v := range g[oc*p : (oc+1)*p] {
				sum += v
			}
			dbias[oc] += sum
		}
	})
}

// fillRows sets row r of o (len(rows) rows of p values) to rows[r].
func fillRows(t *Team, o, rows []float32, p int) {
	t.For(len(rows), max(1, (32<<10)/p), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			v, row := rows[r], o[r*p:(r+1)*p]
			for i := range row {
				row[i] = v
			}
		}
	})
}

// prepackFits reports whether ws values hold the flipped weights packed once
// for all images next to what the backward pass carves besides (the padded
// image, then the larger of the two GEMMs' scratch): for small images
// ConvWorkspace leaves room for one packing per image, which this spends
// once instead.
func prepackFits(g gemmImpl, s backend.ConvShape, ws int) bool {
	P, CKK, HW, OCKK := s.OH()*s.OW(), s.C*s.K*s.K, s.H*s.W, s.OC*s.K*s.K
	need := prepackSize(s.C, OCKK) + backPadSize(s, true)
	dw := g.planFor(s.OC, CKK, P, matA{lda: P}).scratch(s.OC, P)
	din := planGemm(s.C, HW, OCKK, true).scratch(s.C, OCKK)
	return ws >= need+max(dw, din)
}

// Conv2dBackward is the fast backward kernel (see Conv2dBackwardNaive for
// what it computes). Per image: dw += dout_n x col^T with col^T generated
// while packing (implicit im2col, see Conv2d), and din_n computed as the
// convolution of dout_n with the flipped, transposed weights,
//
//	din_n (C, H*W) = w' (C, OC*K*K) x im2col(dout_n, padding K-1-Pad),
//	w'[c, (o*K+i)*K+j] = w[o, c, K-1-i, K-1-j],
//
// which needs neither a col matrix nor col2im (for a 1x1 convolution
// without padding, din_n = w^T x dout_n). Where the gather kernels serve
// a 3x3 kernel with C a multiple of 8, w' is read in place from w through
// offsets; otherwise it is packed once for all images where that fits.
// ws is as for Conv2d. din and dbias may be nil.
func Conv2dBackward(s backend.ConvShape, din, dw, dbias, dout, in, w, ws []float32) {
	(*Team)(nil).Conv2dBackward(s, din, dw, dbias, dout, in, w, ws)
}

// Conv2dBackward is the package's Conv2dBackward on the team.
func (t *Team) Conv2dBackward(s backend.ConvShape, din, dw, dbias, dout, in, w, ws []float32) {
	conv2dBackward(gemmOn(t), s, din, dw, dbias, dout, Float32Image(in), w, ws)
}

// Conv2dBackwardImage is Conv2dBackward with the input an Image (16-bit
// widened as it is padded; float32 only for a Direct convolution).
func (t *Team) Conv2dBackwardImage(s backend.ConvShape, din, dw, dbias, dout []float32, in Image, w, ws []float32) {
	conv2dBackward(gemmOn(t), s, din, dw, dbias, dout, in, w, ws)
}

func conv2dBackward(gemm gemmImpl, s backend.ConvShape, din, dw, dbias, dout []float32, in Image, w, ws []float32) {
	checkConv(s, len(dout), in.Len(), len(w), len(dbias), len(ws), dbias != nil)
	if din != nil && len(din) != in.Len() || len(dw) != len(w) {
		panic("kernels: conv backward: din/dw sizes do not match in/w")
	}
	if s.Direct() && in.h != nil {
		panic("kernels: a 1x1 convolution reads its input unpadded: give it float32")
	}
	OH, OW := s.OH(), s.OW()
	P, CKK, HW := OH*OW, s.C*s.K*s.K, s.H*s.W
	inImage, outImage := s.C*HW, s.OC*P
	dpad := s.K - 1 - s.Pad // dout's padding for din (negative: Pad > K-1)
	// ws (no longer an im2col matrix) holds the packed weights and the
	// GEMMs' packing buffers, as in Conv2d.
	scratch := ws
	var wT packerA
	if din != nil {
		if s.Direct() {
			wT = matA{a: w, lda: s.C, trans: true}
		} else {
			wT = flippedWA{w: w, OC: s.OC, C: s.C, K: s.K}
		}
		// Prepacked where that pays, unless the gather kernels read them
		// in place.
		inPlace := !s.Direct() && dpad >= 0 && gemm.gatherDirect(s.C, wT) && gemm.canGather(s.C, wT, s.H, s.W)
		if !inPlace && (s.N*HW > 2*taskCols || prepackFits(gemm, s, len(ws))) {
			var buf []float32
			buf, scratch = gemm.carve(scratch, prepackSize(s.C, s.OC*s.K*s.K))
			wT = prepackA(gemm.team, wT, s.C, s.OC*s.K*s.K, buf)
		}
	}
	// One padded-image buffer serves the image (for dw) and then dout (for
	// din, padding K-1-Pad; a negative one, i.e. Pad > K-1, reads dout
	// through im2colB instead).
	var padBuf []float32
	if !s.Direct() {
		padBuf, scratch = gemm.carve(scratch, backPadSize(s, din != nil))
	}
	for n := 0; n < s.N; n++ {
		g := dout[n*outImage : (n+1)*outImage]
		x := in.slice(n*inImage, (n+1)*inImage)
		var colT packerB = matB{b: x.f, ldb: P, trans: true}
		if !s.Direct() {
			xp := padImage(gemm.team, padBuf, x, s.C, s.H, s.W, s.Pad)
			colT = im2colPT{im2colP{xp: xp, C: s.C, Hp: s.H + 2*s.Pad, Wp: s.W + 2*s.Pad, K: s.K, OH: OH, OW: OW}}
		}
		if im, ok := colT.(im2colPT); !ok || !gemm.weightGradRows(s, dw, g, im.im2colP, scratch) {
			gemm.gemm(s.OC, CKK, P, 1, matA{a: g, lda: P}, colT, 1, dw, CKK, scratch)
		}
		if dbias != nil {
			gemm.team.biasGrad(dbias, g, P)
		}
		if din == nil {
			continue
		}
		dx := din[n*inImage : (n+1)*inImage]
		// As in the forward, the gather kernels' tasks pad their own bands
		// of dout where they can.
		if !s.Direct() && dpad >= 0 && gemm.canGather(s.C, wT, s.H, s.W) && !gemm.packedByTasks(s.C, wT) &&
			gemm.gatherBands(s.C, s.OC*s.K*s.K, wT, Float32Image(g), s.OC, OH, OW, dpad, s.K, 0, dx, padBuf, scratch) {
			continue
		}
		var gcol packerB = matB{b: g, ldb: P}
		switch {
		case s.Direct():
		case dpad >= 0:
			gp := padImage(gemm.team, padBuf, Float32Image(g), s.OC, OH, OW, dpad)
			gcol = im2colP{xp: gp, C: s.OC, Hp: OH + 2*dpad, Wp: OW + 2*dpad, K: s.K, OH: s.H, OW: s.W}
		default:
			gcol = im2colB{x: g, C: s.OC, H: OH, W: OW, K: s.K, pad: dpad, OH: s.H, OW: s.W}
		}
		if im, ok := gcol.(im2colP); ok && gemm.canGather(s.C, wT, im.OH, im.OW) {
			gemm.gatherGemm(s.C, s.OC*s.K*s.K, wT, im, 0, dx, scratch)
			continue
		}
		gemm.gemm(s.C, HW, s.OC*s.K*s.K, 1, wT, gcol, 0, dx, HW, scratch)
	}
}

// weightGradRows adds one image's weight gradient to dw the transposed way,
// where few output channels would leave the usual product (dw += dout x
// col^T, OC rows) packing each block of the im2col for only OC rows:
//
//	dwT[(i*K+j)*C + c][o] = sum_{y,x} xp[c, y+i, x+j] * dout[o, y, x]
//
// For fixed (i,j), the rows of c are the padded image's planes, Hp*Wp
// apart, and along an output row y their pixels are consecutive: a direct
// kernel reads them unpacked, over k = the OW pixels of one output row,
// against dout's row y transposed (packed once per output row and task,
// OC columns). So nothing of the image is packed at all. Tasks take blocks
// of dwT's row panels over every output row (each element is one task's,
// summed over y and x in order, whatever the cores), and dwT, carved from
// scratch, is added to dw transposed at the end. Where the channels do not
// fill whole row panels, the last panel overlaps the one before and only
// its new rows are kept (computed into a tile, then stored as the kernels
// store).
//
// It reports false, doing nothing, where it does not pay or apply (as
// measured on the seed UNet's layers): output rows shorter than 64 pixels
// (k too short per call) or longer than a k slab, fewer channels than a
// row panel, OC not a multiple of 16, more than 32 output channels (the
// usual product already packs its blocks for enough rows), planes a
// multiple of 4 KiB apart, or scratch too short.
func (g gemmImpl) weightGradRows(s backend.ConvShape, dw, dout []float32, xp im2colP, scratch []float32) bool {
	C, OC, K, OH, OW := s.C, s.OC, s.K, s.OH(), s.OW()
	plane, KK, P := xp.Hp*xp.Wp, K*K, OH*OW
	// Row panels: 8 channels where the 8-row kernels serve (whole 32-column
	// pairs, or a 16-column panel), 6 otherwise.
	mr := gemmMR
	if C >= 8 && (g.wideDirect8 != nil && OC%(2*gemmNR) == 0 || g.narrowDirect8 != nil && OC == gemmNR) {
		mr = 8
	}
	if OC%gemmNR != 0 || OC > 2*gemmNR || OW < 64 || OW > gemmKC || C < mr || !useDirect(plane) {
		return false
	}
	panels := ceilDiv(C, mr)
	skip := panels*mr - C // rows of the last panel that the one before has
	units := KK * panels
	workers := runtime.GOMAXPROCS(0)
	if 2*float64(C)*float64(OC)*float64(KK*P) < gemmSerialFlops {
		workers = 1
	}
	total := min(units, 2*workers)
	bSize := OC*OW + gemmNR*gemmKC
	if len(scratch) < KK*C*OC+min(workers, total)*bSize {
		return false
	}
	dwT, scratch := g.carve(scratch, KK*C*OC)
	g.runTasks(min(workers, total), total, 0, bSize, scratch, func(_, t int, _, packB []float32, ps *packScratch) {
		bp := packB[:OC*OW]
		tile := ps.f[:mr*OC] // the overlapping panel's products
		for y := 0; y < OH; y++ {
			packBPanels(&g, bp, true, dout, P, y*OW, OW, 0, OC)
			var beta float32
			if y > 0 {
				beta = 1
			}
			for u := t * units / total; u < (t+1)*units/total; u++ {
				ij, c0 := u/panels, min(u%panels*mr, C-mr)
				a := xp.xp[c0*plane+(y+ij/K)*xp.Wp+ij%K:]
				c, ldc, b0 := dwT[(ij*C+c0)*OC:], OC, beta
				overlap := skip > 0 && u%panels == panels-1
				if overlap {
					c, b0 = tile, 0
				}
				for jr := 0; jr < OC; {
					b, cj := bp[jr*OW:], c[jr:]
					switch {
					case mr == 8 && OC == gemmNR:
						g.narrowDirect8(OW, a, plane, b, cj, ldc, 1, b0, b0 == 0, 8)
						jr += gemmNR
					case mr == 8:
						g.wideDirect8(OW, a, plane, b, cj, ldc, 1, b0, b0 == 0, 8)
						jr += 2 * gemmNR
					case OC-jr >= 2*gemmNR && g.wideDirect != nil:
						g.wideDirect(OW, a, plane, b, cj, ldc, 1, b0, b0 == 0, mr)
						jr += 2 * gemmNR
					default:
						g.direct(OW, a, plane, b, cj, ldc, 1, b0, b0 == 0, mr)
						jr += gemmNR
					}
				}
				if overlap {
					// Rows skip.. are new: stored as a kernel with beta
					// would store them (acc, then C + acc).
					dst := dwT[(ij*C+c0+skip)*OC : (ij*C+c0+mr)*OC]
					if beta == 0 {
						copy(dst, tile[skip*OC:])
					} else {
						for x, v := range tile[skip*OC : mr*OC] {
							dst[x] += v
						}
					}
				}
			}
		}
	})
	// dw[o, c, i, j] += dwT[(i*K+j)*C + c][o].
	g.team.For(OC, 1, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			row := dw[o*C*KK : (o+1)*C*KK]
			for c := 0; c < C; c++ {
				for ij := 0; ij < KK; ij++ {
					row[c*KK+ij] += dwT[(ij*C+c)*OC+o]
				}
			}
		}
	})
	return true
}
