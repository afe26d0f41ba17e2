package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
)

// Tests of the packing primitives and the implicit-im2col packers against
// explicit references: the materialised im2col matrix (im2col below, the
// kernels' former workspace path) packed by the plain-matrix packer.

// im2col (reference for the implicit packers) writes one image x (C,H,W) as col (C*K*K, OH*OW):
// col[(c*K+i)*K+j, y*OW+x] = x[c, y+i-Pad, x+j-Pad], 0 outside the image.
func im2col(s backend.ConvShape, col, x []float32) {
	OH, OW, K := s.OH(), s.OW(), s.K
	P := OH * OW
	ParallelFor(s.C*K*K, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			c, i, j := r/(K*K), r/K%K, r%K
			dst := col[r*P : (r+1)*P]
			plane := x[c*s.H*s.W : (c+1)*s.H*s.W]
			for y := 0; y < OH; y++ {
				row := dst[y*OW : (y+1)*OW]
				iy := y + i - s.Pad
				if iy < 0 || iy >= s.H {
					clear(row)
					continue
				}
				src := plane[iy*s.W : (iy+1)*s.W]
				// x+j-Pad is in [0,W) for x in [x0,x1). x0 is capped at OW:
				// when Pad-j > OW (kernel wider than image plus padding)
				// row[:Pad-j] would reach past the row into the next one,
				// which may belong to another goroutine.
				x0, x1 := min(OW, max(0, s.Pad-j)), min(OW, s.W+s.Pad-j)
				clear(row[:x0])
				if x1 > x0 {
					copy(row[x0:x1], src[x0+j-s.Pad:x1+j-s.Pad])
				}
				if x1 < OW {
					clear(row[max(x1, x0):])
				}
			}
		}
	})
}

// col2im is im2col's adjoint: dx (C,H,W) = sum of col's entries back at the
// pixels they were read from. Parallel over channels, so no two goroutines
// write the same pixel.
func col2im(s backend.ConvShape, dx, col []float32) {
	OH, OW, K := s.OH(), s.OW(), s.K
	P := OH * OW
	ParallelFor(s.C, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			plane := dx[c*s.H*s.W : (c+1)*s.H*s.W]
			clear(plane)
			for i := 0; i < K; i++ {
				for j := 0; j < K; j++ {
					src := col[((c*K+i)*K+j)*P : ((c*K+i)*K+j+1)*P]
					x0, x1 := max(0, s.Pad-j), min(OW, s.W+s.Pad-j)
					if x1 <= x0 {
						continue
					}
					for y := 0; y < OH; y++ {
						iy := y + i - s.Pad
						if iy < 0 || iy >= s.H {
							continue
						}
						dst := plane[iy*s.W+x0+j-s.Pad : iy*s.W+x1+j-s.Pad]
						for k, v := range src[y*OW+x0 : y*OW+x1] {
							dst[k] += v
						}
					}
				}
			}
		}
	})
}

// TestPackPrimitives: copyChunks16, transpose16, gatherRows16 and
// transpose16Gather of each implementation
// against the loops they stand for, with odd counts and strides; bytes
// outside the destination ranges must be untouched.
func TestPackPrimitives(t *testing.T) {
	for _, g := range gemmImpls(t) {
		r := seedFor("prims " + g.name)
		for _, n := range []int{1, 2, 3, 7, 32} {
			stride := 16 + r.IntN(40)
			src := randSlice(r, 16*n)
			dst := garbage(r, (n-1)*stride+16+5)
			want := clone32(dst)
			for c := 0; c < n; c++ {
				copy(want[c*stride:c*stride+16], src[16*c:16*c+16])
			}
			g.copyChunks16(dst, src, n, stride)
			checkClose(t, fmt.Sprintf("%s copyChunks16 n=%d", g.name, n), dst, want, 0)
		}
		for _, kc := range []int{1, 5, 8, 9, 16, 23, 64, 256} {
			src := randSlice(r, 3*kc+40)
			offs := make([]int, kc)
			for p := range offs {
				offs[p] = r.IntN(len(src) - 15)
			}
			ext := append(clone32(src), randSlice(r, 32)...) // room for 3 panels
			for _, panels := range []int{1, 2, 3} {
				dst := garbage(r, panels*16*kc+3)
				want := clone32(dst)
				for q := 0; q < panels; q++ {
					for p, o := range offs {
						copy(want[(q*kc+p)*16:(q*kc+p)*16+16], ext[16*q+o:16*q+o+16])
					}
				}
				g.gatherRows16(dst, ext, offs, panels)
				checkClose(t, fmt.Sprintf("%s gatherRows16 kc=%d panels=%d", g.name, kc, panels), dst, want, 0)
			}

			var toffs [16]int
			for l := range toffs {
				toffs[l] = r.IntN(len(src) - kc + 1)
			}
			dst := garbage(r, 16*kc+3)
			want := clone32(dst)
			for l, o := range toffs {
				for t := 0; t < kc; t++ {
					want[t*16+l] = src[o+t]
				}
			}
			g.transpose16Gather(dst, src, &toffs, kc)
			checkClose(t, fmt.Sprintf("%s transpose16Gather n=%d", g.name, kc), dst, want, 0)
		}
		for _, kc := range []int{1, 5, 8, 9, 16, 23, 64, 256} {
			stride := kc + r.IntN(9)
			src := randSlice(r, 15*stride+kc)
			dst := garbage(r, 16*kc+3)
			want := clone32(dst)
			for l := 0; l < 16; l++ {
				for p := 0; p < kc; p++ {
					want[p*16+l] = src[l*stride+p]
				}
			}
			g.transpose16(dst, src, stride, kc)
			checkClose(t, fmt.Sprintf("%s transpose16 kc=%d", g.name, kc), dst, want, 0)
		}
	}
}

// packWindows is a set of (p0, kc, j0, nw) blocks of a k x n operand:
// whole, one slab at a time, and odd windows (lane offsets multiple of NR,
// p0 multiple of gemmKC as the driver uses them, plus odd ones the packers
// must handle too).
func packWindows(r *rand.Rand, k, n int) [][4]int {
	w := [][4]int{{0, min(k, gemmKC), 0, n}}
	for p0 := 0; p0 < k; p0 += gemmKC {
		w = append(w, [4]int{p0, min(gemmKC, k-p0), 0, n})
	}
	for range 6 {
		p0 := r.IntN(k)
		kc := 1 + r.IntN(min(gemmKC, k-p0))
		j0 := r.IntN(n)
		if r.IntN(2) == 0 {
			j0 = j0 / gemmNR * gemmNR
		}
		nw := 1 + r.IntN(n-j0)
		w = append(w, [4]int{p0, kc, j0, nw})
	}
	return w
}

// TestIm2colPackers: im2colB, im2colP (from the padded image) and
// im2colPT pack exactly what packing the explicit im2col matrix (or its
// transpose) would, for every conv test shape, padding K-1-Pad (the
// input-gradient convolution, possibly negative: im2colB only) included, on
// every implementation. dst starts as garbage, so every lane must be
// written.
func TestIm2colPackers(t *testing.T) {
	impls := gemmImpls(t)
	for _, s := range convShapes() {
		for _, pad := range []int{s.Pad, s.K - 1 - s.Pad} {
			cs := s
			cs.N, cs.Pad = 1, pad
			if cs.OH() <= 0 || cs.OW() <= 0 {
				continue
			}
			t.Run(convName(cs), func(t *testing.T) {
				r := seedFor("packers " + convName(cs))
				OH, OW := cs.OH(), cs.OW()
				k, n := cs.C*cs.K*cs.K, OH*OW
				x := randSlice(r, cs.InSize())
				col := make([]float32, k*n)
				im2col(cs, col, x)
				B := im2colB{x: x, C: cs.C, H: cs.H, W: cs.W, K: cs.K, pad: pad, OH: OH, OW: OW}
				packers := map[string]packerB{"im2colB": B}
				var PT packerB
				if pad >= 0 {
					xp := padImage(nil, garbage(r, paddedSize(cs.C, cs.H, cs.W, pad)+5), Float32Image(x), cs.C, cs.H, cs.W, pad)
					P := im2colP{xp: xp, C: cs.C, Hp: cs.H + 2*pad, Wp: cs.W + 2*pad, K: cs.K, OH: OH, OW: OW}
					packers["im2colP"], PT = P, im2colPT{P}
				}
				for _, g := range impls {
					scratch := &packScratch{f: garbage(r, gemmNR*gemmKC), offs: make([]int, gemmKC)}
					for _, win := range packWindows(r, k, n) {
						p0, kc, j0, nw := win[0], win[1], win[2], win[3]
						size := roundUp(nw, gemmNR) * kc
						want := make([]float32, size)
						matB{b: col, ldb: n}.packB(&g, want, scratch, p0, kc, j0, nw)
						for name, pk := range packers {
							got := garbage(r, size)
							pk.packB(&g, got, scratch, p0, kc, j0, nw)
							checkClose(t, fmt.Sprintf("%s %s window %v", g.name, name, win), got, want, 0)
						}
					}
					if PT == nil {
						continue
					}
					// Transposed: k = pixels, n = im2col rows.
					for _, win := range packWindows(r, n, k) {
						p0, kc, j0, nw := win[0], win[1], win[2], win[3]
						size := roundUp(nw, gemmNR) * kc
						want, got := make([]float32, size), garbage(r, size)
						matB{b: col, ldb: n, trans: true}.packB(&g, want, scratch, p0, kc, j0, nw)
						PT.packB(&g, got, scratch, p0, kc, j0, nw)
						checkClose(t, fmt.Sprintf("%s im2colPT window %v", g.name, win), got, want, 0)
					}
				}
			})
		}
	}
}

// TestFlippedWeightsPacker: flippedWA packs the explicit matrix
// w'[c][(o*K+i)*K+j] = w[o][c][K-1-i][K-1-j], and prepackA of it (and of a
// plain matrix) serves the same panels.
func TestFlippedWeightsPacker(t *testing.T) {
	for _, sz := range [][3]int{{1, 1, 1}, {4, 7, 3}, {13, 5, 3}, {3, 20, 5}, {70, 67, 1}} {
		OC, C, K := sz[0], sz[1], sz[2]
		r := seedFor(fmt.Sprint("flipped", sz))
		w := randSlice(r, OC*C*K*K)
		m, k := C, OC*K*K
		flipped := make([]float32, m*k)
		for o := 0; o < OC; o++ {
			for c := 0; c < C; c++ {
				for i := 0; i < K; i++ {
					for j := 0; j < K; j++ {
						flipped[c*k+(o*K+i)*K+j] = w[((o*C+c)*K+K-1-i)*K+K-1-j]
					}
				}
			}
		}
		A := flippedWA{w: w, OC: OC, C: C, K: K}
		ref := matA{a: flipped, lda: k}
		pre, preRef := prepackA(nil, A, m, k, nil), prepackA(nil, ref, m, k, garbage(r, prepackSize(m, k)+3))
		for _, win := range packWindows(r, k, m) {
			p0, kc, i0, mc := win[0], win[1], win[2]/gemmMR*gemmMR, win[3]
			mc = min(mc, m-i0)
			size := roundUp(mc, gemmMR) * kc
			want := ref.packA(make([]float32, size), i0, mc, p0, kc)
			got := A.packA(garbage(r, size), i0, mc, p0, kc)
			name := fmt.Sprintf("OC%d C%d K%d window p0=%d kc=%d i0=%d mc=%d", OC, C, K, p0, kc, i0, mc)
			checkClose(t, name, got, want, 0)
			if p0%gemmKC == 0 && (kc == min(gemmKC, k-p0)) {
				checkClose(t, name+" prepacked", pre.packA(nil, i0, mc, p0, kc), want, 0)
				checkClose(t, name+" prepacked plain", preRef.packA(nil, i0, mc, p0, kc), want, 0)
			}
		}
	}
}
