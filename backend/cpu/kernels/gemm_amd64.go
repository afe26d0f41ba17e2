//go:build amd64 && !noasm

package kernels

import "golang.org/x/sys/cpu"

// asmGemms returns the assembly implementations this CPU supports, slowest
// first: AVX2+FMA (6x16 micro-kernel), and with AVX-512 also a 6x32
// micro-kernel over two adjacent 16-column panels (the 6x16 one serves the
// odd panel at a right edge).
func asmGemms() []gemmImpl {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return nil
	}
	avx2 := gemmImpl{
		name: "avx2+fma", kernel: microKernelAVX2, direct: microKernelAVX2Direct,
		copyChunks16: copyChunks16AVX2, transpose16: transpose16AVX2,
		gatherRows16: gatherRows16AVX2, transpose16Gather: transpose16GatherAVX2,
		wino: asmWino(false),
	}
	if !cpu.X86.HasAVX512F {
		return []gemmImpl{avx2}
	}
	avx512 := avx2
	avx512.name, avx512.wide, avx512.wideDirect = "avx512", microKernelAVX512, microKernelAVX512Direct
	avx512.wideDirect8, avx512.gather8, avx512.gather6 = microKernel8x32AVX512Direct, gather8x32AVX512, gather6x32AVX512
	avx512.narrowDirect8 = microKernel8x16AVX512Direct
	avx512.gatherFlipped8 = gatherFlipped8x32AVX512
	avx512.wino = asmWino(true)
	return []gemmImpl{avx2, avx512}
}

// asmGemm returns the fastest assembly implementation, if any.
func asmGemm() (gemmImpl, bool) {
	if impls := asmGemms(); len(impls) > 0 {
		return impls[len(impls)-1], true
	}
	return gemmImpl{}, false
}

// microKernelAVX512 adapts the 6x32 assembly kernel to microKernel: b holds
// two panels (2*kc*16 values), c a 6 x 32 tile.
func microKernelAVX512(kc int, a, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
	_ = a[kc*gemmMR-1]
	_ = b[2*kc*gemmNR-1]
	if rows < 1 || rows > gemmMR {
		panic("kernels: micro-kernel rows out of range")
	}
	_ = c[(rows-1)*ldc+2*gemmNR-1]
	mode := 1
	if overwrite {
		mode = 0
	}
	sgemmKernel6x32AVX512(kc, &a[0], &b[0], &c[0], ldc, alpha, beta, mode, rows)
}

// microKernelAVX2 adapts the assembly kernel to microKernel; the driver
// guarantees the slice lengths the assembly relies on.
func microKernelAVX2(kc int, a, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
	_ = a[kc*gemmMR-1]
	_ = b[kc*gemmNR-1]
	if rows < 1 || rows > gemmMR {
		panic("kernels: micro-kernel rows out of range")
	}
	_ = c[(rows-1)*ldc+gemmNR-1]
	mode := 1
	if overwrite {
		mode = 0
	}
	sgemmKernel6x16AVX2(kc, &a[0], &b[0], &c[0], ldc, alpha, beta, mode, rows)
}

// sgemmKernel6x16AVX2 is the 6x16 micro-kernel in gemm_amd64.s: kc >= 1
// steps over packed panels a (kc x 6) and b (kc x 16); C rows are ldc
// floats apart; mode 0 stores alpha*acc, mode 1 alpha*acc + beta*C, to the
// first rows rows of the tile.
//
//go:noescape
func sgemmKernel6x16AVX2(kc int, a, b, c *float32, ldc int, alpha, beta float32, mode, rows int)

// copyChunks16AVX2 is copyChunks16 with AVX loads and stores.
func copyChunks16AVX2(dst, src []float32, n, dstStride int) {
	if n <= 0 {
		return
	}
	_ = dst[(n-1)*dstStride+15]
	_ = src[16*n-1]
	copyChunks16AVX(&dst[0], &src[0], n, dstStride)
}

// transpose16AVX2 is transpose16 with 8x8 AVX transposes, the last kc%8
// values of each row in Go.
func transpose16AVX2(dst, src []float32, srcStride, kc int) {
	if kc <= 0 {
		return
	}
	_ = dst[kc*16-1]
	_ = src[15*srcStride+kc-1]
	blocks := kc / 8
	if blocks > 0 {
		transpose16AVX(&dst[0], &src[0], srcStride, blocks)
	}
	for l := 0; l < 16; l++ {
		for p := blocks * 8; p < kc; p++ {
			dst[p*16+l] = src[l*srcStride+p]
		}
	}
}

// gatherRows16AVX2 is gatherRows16 with AVX loads and stores; the offsets
// are checked against src first.
func gatherRows16AVX2(dst, src []float32, offs []int, panels int) {
	kc := len(offs)
	if kc == 0 || panels <= 0 {
		return
	}
	_ = dst[panels*kc*16-1]
	lo, hi := offs[0], offs[0]
	for _, o := range offs {
		lo, hi = min(lo, o), max(hi, o)
	}
	if lo < 0 || hi+16*panels > len(src) {
		panic("kernels: gatherRows16: offset out of range")
	}
	gatherRows16AVX(&dst[0], &src[0], &offs[0], kc, panels)
}

// transpose16GatherAVX2 is transpose16Gather with 8x8 AVX transposes, the
// last n%8 values of each row in Go.
func transpose16GatherAVX2(dst, src []float32, offs *[16]int, n int) {
	if n <= 0 {
		return
	}
	_ = dst[16*n-1]
	for _, o := range offs {
		if o < 0 || o > len(src)-n {
			panic("kernels: transpose16Gather: offset out of range")
		}
	}
	blocks := n / 8
	if blocks > 0 {
		transpose16GatherAVX(&dst[0], &src[0], offs, blocks)
	}
	for l, o := range offs {
		for t := blocks * 8; t < n; t++ {
			dst[t*16+l] = src[o+t]
		}
	}
}

//go:noescape
func gatherRows16AVX(dst, src *float32, offs *int, kc, panels int)

//go:noescape
func transpose16GatherAVX(dst, src *float32, offs *[16]int, blocks int)

// copyChunks16AVX and transpose16AVX are in pack_amd64.s.
//
//go:noescape
func copyChunks16AVX(dst, src *float32, n, dstStride int)

//go:noescape
func transpose16AVX(dst, src *float32, srcStride, blocks int)

// sgemmKernel6x32AVX512 is in gemm512_amd64.s: like sgemmKernel6x16AVX2
// over a 6 x 32 tile, b holding two 16-column panels kc*16 floats apart.
//
//go:noescape
func sgemmKernel6x32AVX512(kc int, a, b, c *float32, ldc int, alpha, beta float32, mode, rows int)

// microKernelAVX2Direct is microKernelAVX2 reading A unpacked (see
// directKernel); a bottom-edge tile (rows < MR) is packed first, since the
// assembly reads all six rows.
func microKernelAVX2Direct(kc int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
	if rows < gemmMR {
		directFromPacked(microKernelAVX2)(kc, a, lda, b, c, ldc, alpha, beta, overwrite, rows)
		return
	}
	_ = a[(gemmMR-1)*lda+kc-1]
	_ = b[kc*gemmNR-1]
	_ = c[(rows-1)*ldc+gemmNR-1]
	sgemmKernel6x16AVX2Direct(kc, &a[0], lda, &b[0], &c[0], ldc, alpha, beta, modeOf(overwrite), rows)
}

// microKernelAVX512Direct is microKernelAVX512 reading A unpacked, as
// microKernelAVX2Direct.
func microKernelAVX512Direct(kc int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
	if rows < gemmMR {
		directFromPacked(microKernelAVX512)(kc, a, lda, b, c, ldc, alpha, beta, overwrite, rows)
		return
	}
	_ = a[(gemmMR-1)*lda+kc-1]
	_ = b[2*kc*gemmNR-1]
	_ = c[(rows-1)*ldc+2*gemmNR-1]
	sgemmKernel6x32AVX512Direct(kc, &a[0], lda, &b[0], &c[0], ldc, alpha, beta, modeOf(overwrite), rows)
}

// modeOf is the assembly kernels' store mode: 0 overwrites, 1 adds beta*C.
func modeOf(overwrite bool) int {
	if overwrite {
		return 0
	}
	return 1
}

// The direct-A twins of the kernels above, generated into the same files.
//
//go:noescape
func sgemmKernel6x16AVX2Direct(kc int, a *float32, lda int, b, c *float32, ldc int, alpha, beta float32, mode, rows int)

//go:noescape
func sgemmKernel6x32AVX512Direct(kc int, a *float32, lda int, b, c *float32, ldc int, alpha, beta float32, mode, rows int)

// microKernel8x32AVX512Direct is microKernelAVX512Direct over 8 rows of A
// (rows must be 8: the driver gives it whole panels only).
func microKernel8x32AVX512Direct(kc int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
	if rows != 8 {
		panic("kernels: the 8-row micro-kernel takes 8 rows")
	}
	_ = a[7*lda+kc-1]
	_ = b[2*kc*gemmNR-1]
	_ = c[7*ldc+2*gemmNR-1]
	sgemmKernel8x32AVX512Direct(kc, &a[0], lda, &b[0], &c[0], ldc, alpha, beta, modeOf(overwrite), rows)
}

// microKernel8x16AVX512Direct is microKernel8x32AVX512Direct over one
// 16-column panel (rows must be 8).
func microKernel8x16AVX512Direct(kc int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
	if rows != 8 {
		panic("kernels: the 8-row micro-kernel takes 8 rows")
	}
	_ = a[7*lda+kc-1]
	_ = b[kc*gemmNR-1]
	_ = c[7*ldc+gemmNR-1]
	sgemmKernel8x16AVX512Direct(kc, &a[0], lda, &b[0], &c[0], ldc, alpha, beta, modeOf(overwrite), rows)
}

//go:noescape
func sgemmKernel8x16AVX512Direct(kc int, a *float32, lda int, b, c *float32, ldc int, alpha, beta float32, mode, rows int)

//go:noescape
func sgemmKernel8x32AVX512Direct(kc int, a *float32, lda int, b, c *float32, ldc int, alpha, beta float32, mode, rows int)

// gather8x32AVX512 is the gatherKernel of the AVX-512 implementation.
func gather8x32AVX512(kc int, a []float32, lda int, b []float32, rows gatherRows, c []float32, ldc int, beta float32, overwrite bool) {
	if kc < 1 || kc > len(rows.offs) || rows.lo < 0 || rows.end() > len(b) {
		panic("kernels: gather micro-kernel: offsets out of range")
	}
	_ = a[7*lda+kc-1]
	_ = c[7*ldc+2*gemmNR-1]
	switch rows.run {
	case gemmNR / 2:
		sgemmKernel8x32AVX512Quarters(kc, &a[0], lda, &b[0], &rows.offs[0], rows.step, &c[0], ldc, 1, beta, modeOf(overwrite), 8)
	default:
		sgemmKernel8x32AVX512Gather(kc, &a[0], lda, &b[0], &rows.offs[0], rows.half(), &c[0], ldc, 1, beta, modeOf(overwrite), 8)
	}
}

//go:noescape
func sgemmKernel8x32AVX512Gather(kc int, a *float32, lda int, b *float32, offs *int, half int, c *float32, ldc int, alpha, beta float32, mode, rows int)

// gather6x32AVX512 is the packedGatherKernel of the AVX-512 implementation.
func gather6x32AVX512(kc int, a, b []float32, rows gatherRows, c []float32, ldc int, beta float32, overwrite bool, mrows int) {
	if kc < 1 || kc > len(rows.offs) || rows.lo < 0 || rows.end() > len(b) || mrows < 1 || mrows > gemmMR {
		panic("kernels: gather micro-kernel: offsets or rows out of range")
	}
	_ = a[kc*gemmMR-1]
	_ = c[(mrows-1)*ldc+2*gemmNR-1]
	switch rows.run {
	case gemmNR / 2:
		sgemmKernel6x32AVX512Quarters(kc, &a[0], &b[0], &rows.offs[0], rows.step, &c[0], ldc, 1, beta, modeOf(overwrite), mrows)
	default:
		sgemmKernel6x32AVX512Gather(kc, &a[0], &b[0], &rows.offs[0], rows.half(), &c[0], ldc, 1, beta, modeOf(overwrite), mrows)
	}
}

//go:noescape
func sgemmKernel6x32AVX512Gather(kc int, a, b *float32, offs *int, half int, c *float32, ldc int, alpha, beta float32, mode, rows int)

//go:noescape
func sgemmKernel8x32AVX512Quarters(kc int, a *float32, lda int, b *float32, offs *int, quarter int, c *float32, ldc int, alpha, beta float32, mode, rows int)

//go:noescape
func sgemmKernel6x32AVX512Quarters(kc int, a, b *float32, offs *int, quarter int, c *float32, ldc int, alpha, beta float32, mode, rows int)

// gatherFlipped8x32AVX512 is the flippedGatherKernel of the AVX-512
// implementation.
func gatherFlipped8x32AVX512(kc int, a []float32, aoffs aOffsets, b []float32, rows gatherRows, c []float32, ldc int, beta float32, overwrite bool) {
	if kc < 1 || kc > len(rows.offs) || kc > len(aoffs.offs) || rows.lo < 0 || rows.end() > len(b) || aoffs.lo < 0 || aoffs.hi+7*9 >= len(a) {
		panic("kernels: gather micro-kernel: offsets out of range")
	}
	_ = c[7*ldc+2*gemmNR-1]
	switch rows.run {
	case gemmNR / 2:
		sgemmKernel8x32AVX512QuartersFlipped(kc, &a[0], &aoffs.offs[0], &b[0], &rows.offs[0], rows.step, &c[0], ldc, 1, beta, modeOf(overwrite), 8)
	default:
		sgemmKernel8x32AVX512GatherFlipped(kc, &a[0], &aoffs.offs[0], &b[0], &rows.offs[0], rows.half(), &c[0], ldc, 1, beta, modeOf(overwrite), 8)
	}
}

//go:noescape
func sgemmKernel8x32AVX512GatherFlipped(kc int, a *float32, aoffs *int, b *float32, offs *int, half int, c *float32, ldc int, alpha, beta float32, mode, rows int)

//go:noescape
func sgemmKernel8x32AVX512QuartersFlipped(kc int, a *float32, aoffs *int, b *float32, offs *int, quarter int, c *float32, ldc int, alpha, beta float32, mode, rows int)
