package kernels

import "github.com/memunet/memunet/backend"

// Implicit im2col: GEMM operand packers that read a convolution's image
// directly, so the im2col matrix is never written to memory. im2colP and
// im2colPT (below) read a zero-padded copy of the image; im2colB reads the
// image itself, handling the edges per value, for the rare negative
// padding (the input gradient of a convolution with Pad > K-1). Packing a block
// of it costs about what copying that block of a materialised col matrix
// would, and saves im2col's full write and the packer's full read of it
// (C*K*K*OH*OW values per image each way, 37 MiB for 64 channels at
// 128x128), as well as col2im in the backward pass.

// im2colB is op(B) = the im2col matrix of one image x (C,H,W) for a KxK,
// stride-1 convolution with padding pad (negative crops) and output OH x OW:
//
//	op(B)[(c*K+i)*K+j][y*OW+xo] = x[c, y+i-pad, xo+j-pad], 0 outside the image.
//
// It is k x n with k = C*K*K and n = OH*OW.
type im2colB struct {
	x                       []float32
	C, H, W, K, pad, OH, OW int
}

// pixelRuns calls f for the output pixels [q0,q1) split at output rows:
// f(l, y, xo, run) covers pixels q0+l .. q0+l+run-1, output row y,
// columns xo .. xo+run-1.
func pixelRuns(q0, q1, ow int, f func(l, y, xo, run int)) {
	y, xo := q0/ow, q0%ow
	for q := q0; q < q1; {
		run := min(ow-xo, q1-q)
		f(q-q0, y, xo, run)
		q += run
		y, xo = y+1, 0
	}
}

// lanesPut writes vals to lanes l, l+1, ... of row p of NR-column panels
// (dst[(l/NR)*NR*kc + p*NR + l%NR]); vals == nil writes n zeros.
func lanesPut(dst []float32, kc, p, l, n int, vals []float32) {
	for n > 0 {
		lane := l % gemmNR
		cnt := min(gemmNR-lane, n)
		off := (l-lane)*kc + p*gemmNR + lane
		d := dst[off : off+cnt]
		if vals == nil {
			clear(d)
		} else {
			s := vals[:cnt]
			for t := range d {
				d[t] = s[t]
			}
			vals = vals[cnt:]
		}
		l, n = l+cnt, n-cnt
	}
}

func (s im2colB) packB(g *gemmImpl, dst []float32, _ *packScratch, p0, kc, j0, nw int) {
	if rem := nw % gemmNR; rem != 0 {
		for p := 0; p < kc; p++ {
			lanesPut(dst, kc, p, nw, gemmNR-rem, nil)
		}
	}
	KK, HW := s.K*s.K, s.H*s.W
	full := nw / gemmNR * gemmNR // lanes [0,full) are whole chunks
	c, i, j := p0/KK, p0/s.K%s.K, p0%s.K
	for p := 0; p < kc; p++ {
		off := j - s.pad
		// Output columns xo with 0 <= xo+off < W read the image.
		xlo, xhi := max(0, -off), min(s.OW, s.W-off)
		// When output and input rows have the same length, row r of im2col
		// is one contiguous range of the image, shifted by (i-Pad)*W+off,
		// except where it runs past the image's edges (left/right columns,
		// rows above/below): copy the whole range in chunks, then zero
		// those lanes. The range may start before or end after this
		// channel's plane (it is then zeroed), never outside x.
		start := c*HW + (i-s.pad)*s.W + off + j0
		if s.OW == s.W && full > 0 && start >= 0 && start+full <= len(s.x) {
			g.copyChunks16(dst[p*gemmNR:], s.x[start:start+full], full/gemmNR, kc*gemmNR)
			y, xo := j0/s.OW, j0%s.OW
			for l := 0; l < full; y, xo = y+1, 0 {
				run := min(s.OW-xo, full-l)
				if iy := y + i - s.pad; iy < 0 || iy >= s.H || xhi <= xlo {
					lanesPut(dst, kc, p, l, run, nil)
				} else {
					// Zero the lanes left of xlo and right of xhi (|off|
					// of them at most), one at a time.
					for L := l; L < l+min(xlo-xo, run); L++ {
						dst[(L-L%gemmNR)*kc+p*gemmNR+L%gemmNR] = 0
					}
					for L := l + max(xhi-xo, 0); L < l+run; L++ {
						dst[(L-L%gemmNR)*kc+p*gemmNR+L%gemmNR] = 0
					}
				}
				l += run
			}
			s.packRuns(g, dst, kc, p, c, i, off, xlo, xhi, j0+full, j0+nw, full)
		} else {
			s.packRuns(g, dst, kc, p, c, i, off, xlo, xhi, j0, j0+nw, 0)
		}
		if j++; j == s.K {
			if j, i = 0, i+1; i == s.K {
				i, c = 0, c+1
			}
		}
	}
}

// packRuns writes row p of the packed panels (im2col row (c,i,j), j giving
// off = j-Pad and the valid output columns [xlo,xhi)) for the output pixels
// [q0,q1), which start at lane l0, one output row at a time.
func (s im2colB) packRuns(g *gemmImpl, dst []float32, kc, p, c, i, off, xlo, xhi, q0, q1, l0 int) {
	plane := s.x[c*s.H*s.W : (c+1)*s.H*s.W]
	pixelRuns(q0, q1, s.OW, func(l, y, xo, run int) {
		l += l0
		iy := y + i - s.pad
		if iy < 0 || iy >= s.H || xhi <= xlo {
			lanesPut(dst, kc, p, l, run, nil)
			return
		}
		// [xo,a) and [b,xo+run) are outside the image, [a,b) inside.
		a := min(max(xo, xlo), xo+run)
		b := max(min(xo+run, xhi), a)
		lanesPut(dst, kc, p, l, a-xo, nil)
		lanesPut(dst, kc, p, l+b-xo, xo+run-b, nil)
		if b == a {
			return
		}
		la, lb := l+a-xo, l+b-xo
		src := plane[iy*s.W+a+off : iy*s.W+b+off]
		// Whole lane-aligned chunks go through copyChunks16.
		fa, fb := roundUp(la, gemmNR), lb/gemmNR*gemmNR
		if fb <= fa {
			lanesPut(dst, kc, p, la, lb-la, src)
			return
		}
		lanesPut(dst, kc, p, la, fa-la, src[:fa-la])
		g.copyChunks16(dst[fa*kc+p*gemmNR:], src[fa-la:fb-la], (fb-fa)/gemmNR, kc*gemmNR)
		lanesPut(dst, kc, p, fb, lb-fb, src[fb-la:])
	})
}

// flippedWA is op(A) for the input gradient of a convolution computed as a
// convolution of dout: w is (OC,C,K,K) and
//
//	op(A)[c][(o*K+i)*K+j] = w[o, c, K-1-i, K-1-j]
//
// (C x OC*K*K), so din = op(A) x im2col(dout, padding K-1-pad).
type flippedWA struct {
	w        []float32
	OC, C, K int
}

func (s flippedWA) packA(buf []float32, i0, mc, p0, kc int) []float32 {
	buf = buf[:roundUp(mc, gemmMR)*kc]
	K, KK := s.K, s.K*s.K
	for r := 0; r < mc; r += gemmMR {
		d := buf[r*kc : (r+gemmMR)*kc]
		mr := min(gemmMR, mc-r)
		if mr < gemmMR {
			clear(d)
		}
		if K == 3 && mr == gemmMR {
			s.packPanel3(d, i0+r, p0, kc)
			continue
		}
		o, i, j := p0/KK, p0/K%K, p0%K
		for p := 0; p < kc; p++ {
			// w[o, c, K-1-i, K-1-j] for c = i0+r .. i0+r+mr-1, KK apart.
			base := (o*s.C+i0+r)*KK + (K-1-i)*K + K - 1 - j
			dp := d[p*gemmMR : p*gemmMR+gemmMR]
			if mr == gemmMR {
				src := s.w[base : base+5*KK+1]
				dp[0], dp[1], dp[2] = src[0], src[KK], src[2*KK]
				dp[3], dp[4], dp[5] = src[3*KK], src[4*KK], src[5*KK]
			} else {
				for ii := 0; ii < mr; ii++ {
					dp[ii] = s.w[base+ii*KK]
				}
			}
			if j++; j == K {
				if j, i = 0, i+1; i == K {
					i, o = 0, o+1
				}
			}
		}
	}
	return buf
}

// Padded implicit im2col. With the image copied once into a zero border,
// every im2col value is a plain read, and the 16 pixels of a panel row that
// lie in one output row are 16 consecutive values of the padded image: a
// panel is 16-value copies (gatherRows16) or, transposed, a 16-row
// transpose (transpose16Gather), with no edge cases per value.

// paddedSize is the float32 count of a (c, h, w) image with a pad border.
func paddedSize(c, h, w, pad int) int { return c * (h + 2*pad) * (w + 2*pad) }

// Image is one or more images (C,H,W) as a convolution reads them:
// float32 values, or 16-bit bit patterns widened as they are copied into a
// padded image (so a 16-bit input needs no float32 copy of its own).
type Image struct {
	f     []float32
	h     []uint16
	widen func(dst []float32, src []uint16)
}

// Float32Image is x as an Image.
func Float32Image(x []float32) Image { return Image{f: x} }

// HalfImage is x, bit patterns of dt (Float16 or BFloat16), as an Image.
func HalfImage(dt backend.DType, x []uint16) Image { return Image{h: x, widen: Widen(dt)} }

// Len is the number of values.
func (x Image) Len() int { return max(len(x.f), len(x.h)) }

// slice is values [lo, hi).
func (x Image) slice(lo, hi int) Image {
	if x.h != nil {
		x.h = x.h[lo:hi]
	} else {
		x.f = x.f[lo:hi]
	}
	return x
}

// padRows is padRows of values [lo, hi), widened if 16-bit: row by row
// into place where rows are long, else (short rows, which the conversion
// kernels would take a few values at a time) all in one call into the end
// of dst, from where each row moves forward into place (a row's place
// never reaches past the start of a later row's copy).
func (x Image) padRows(dst []float32, lo, hi, W, pad int) {
	if x.h == nil {
		padRows(dst, x.f[lo:hi], W, pad)
		return
	}
	Wp, rows := W+2*pad, (hi-lo)/W
	if W >= shortRow || pad == 0 {
		for y := range rows {
			row := dst[y*Wp : (y+1)*Wp]
			clear(row[:pad])
			x.widen(row[pad:pad+W], x.h[lo+y*W:lo+(y+1)*W])
			clear(row[pad+W:])
		}
		return
	}
	dst = dst[:rows*Wp]
	tail := len(dst) - (hi - lo)
	x.widen(dst[tail:], x.h[lo:hi])
	for y := range rows {
		copy(dst[y*Wp+pad:y*Wp+pad+W], dst[tail+y*W:tail+(y+1)*W])
	}
	for y := range rows {
		row := dst[y*Wp : (y+1)*Wp]
		clear(row[:pad])
		clear(row[pad+W:])
	}
}

// shortRow is the row length below which Image.padRows widens all rows in
// one call.
const shortRow = 64

// padImage copies x (C,H,W) into dst as (C, H+2*pad, W+2*pad) with a zero
// border and returns dst[:paddedSize(C, H, W, pad)].
func padImage(t *Team, dst []float32, x Image, C, H, W, pad int) []float32 {
	Hp, Wp := H+2*pad, W+2*pad
	dst = dst[:C*Hp*Wp]
	t.For(C, max(1, (16<<10)/(Hp*Wp)), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			plane := dst[c*Hp*Wp : (c+1)*Hp*Wp]
			clear(plane[:pad*Wp])
			clear(plane[(pad+H)*Wp:])
			x.padRows(plane[pad*Wp:(pad+H)*Wp], c*H*W, (c+1)*H*W, W, pad)
		}
	})
	return dst
}

// padRows copies the rows of src (W values each) into dst's rows of
// W+2*pad values, between pad zeros on each side.
func padRows(dst, src []float32, W, pad int) {
	if pad == 1 {
		padRows1(dst, src, W)
		return
	}
	Wp := W + 2*pad
	for y := range len(src) / W {
		row := dst[y*Wp : (y+1)*Wp]
		clear(row[:pad])
		copy(row[pad:pad+W], src[y*W:(y+1)*W])
		clear(row[pad+W:])
	}
}

// padRows1 copies the rows of src (W values each) into dst's rows of W+2,
// between a zero on each side: the common padding 1, without a call per
// row for the narrow rows of small images.
func padRows1(dst, src []float32, W int) {
	Wp := W + 2
	H := len(src) / W
	switch W {
	case 4:
		for y := range H {
			row := dst[y*Wp : (y+1)*Wp : (y+1)*Wp]
			row[0], row[W+1] = 0, 0
			*(*[4]float32)(row[1:]) = *(*[4]float32)(src[y*W:])
		}
	case 8:
		for y := range H {
			row := dst[y*Wp : (y+1)*Wp : (y+1)*Wp]
			row[0], row[W+1] = 0, 0
			*(*[8]float32)(row[1:]) = *(*[8]float32)(src[y*W:])
		}
	case 16:
		for y := range H {
			row := dst[y*Wp : (y+1)*Wp : (y+1)*Wp]
			row[0], row[W+1] = 0, 0
			*(*[16]float32)(row[1:]) = *(*[16]float32)(src[y*W:])
		}
	default:
		for y := range H {
			row := dst[y*Wp : (y+1)*Wp : (y+1)*Wp]
			row[0], row[W+1] = 0, 0
			copy(row[1:W+1], src[y*W:(y+1)*W])
		}
	}
}

// im2colP is op(B) = the im2col matrix of a padded image xp
// (C, Hp, Wp) for a KxK stride-1 convolution with output OH x OW
// (OH = Hp-K+1, OW = Wp-K+1):
//
//	op(B)[(c*K+i)*K+j][y*OW+xo] = xp[c, y+i, xo+j].
type im2colP struct {
	xp                   []float32
	C, Hp, Wp, K, OH, OW int
}

func (s im2colP) packB(g *gemmImpl, dst []float32, scratch *packScratch, p0, kc, j0, nw int) {
	offs := scratch.offs[:kc]
	s.rowOffsets(offs, p0)
	for q := 0; q < nw; {
		d := dst[q*kc:]
		pix := j0 + q
		y, xo := pix/s.OW, pix%s.OW
		// Whole panels that lie in output row y: one call.
		if panels := min(nw-q, s.OW-xo) / gemmNR; panels > 0 {
			g.gatherRows16(d, s.xp[y*s.Wp+xo:], offs, panels)
			q += panels * gemmNR
			continue
		}
		// The panel crosses output rows (images narrower than 16) or the
		// right edge: one run of lanes per output row, each row of the
		// panel a copy of the run from the padded image.
		lanes := min(gemmNR, nw-q)
		for l := 0; l < lanes; {
			y, xo := (pix+l)/s.OW, (pix+l)%s.OW
			run := min(s.OW-xo, lanes-l)
			copyRun(d, s.xp[y*s.Wp+xo:], offs, l, run)
			l += run
		}
		if lanes < gemmNR {
			for p := 0; p < kc; p++ {
				clear(d[p*gemmNR+lanes : (p+1)*gemmNR])
			}
		}
		q += gemmNR
	}
}

// copyRun sets lanes [l,l+run) of each row p of the panel d (16 values a
// row): d[p*16+l+t] = src[offs[p]+t], t < run. Runs of 8 and 4 (the rows
// of 8x8 and 4x4 images) copy as arrays, which the compiler inlines.
func copyRun(d, src []float32, offs []int, l, run int) {
	switch run {
	case 8:
		for p, o := range offs {
			*(*[8]float32)(d[p*gemmNR+l:]) = *(*[8]float32)(src[o:])
		}
	case 4:
		for p, o := range offs {
			*(*[4]float32)(d[p*gemmNR+l:]) = *(*[4]float32)(src[o:])
		}
	default:
		for p, o := range offs {
			copy(d[p*gemmNR+l:p*gemmNR+l+run], src[o:o+run])
		}
	}
}

// rowOffsets sets offs[p] to the offset in xp of im2col row r0+p =
// (c*K+i)*K+j at pixel 0.
func (s im2colP) rowOffsets(offs []int, r0 int) {
	KK, plane := s.K*s.K, s.Hp*s.Wp
	c, i, j := r0/KK, r0/s.K%s.K, r0%s.K
	base := c*plane + i*s.Wp
	for p := range offs {
		offs[p] = base + j
		if j++; j == s.K {
			j, base = 0, base+s.Wp
			if i++; i == s.K {
				i, c = 0, c+1
				base = c * plane
			}
		}
	}
}

// im2colPT is op(B) = the transposed im2col matrix of a padded image (see
// im2colP): k = OH*OW pixels by n = C*K*K columns, for dW += dout x col^T.
type im2colPT struct{ im2colP }

func (s im2colPT) packB(g *gemmImpl, dst []float32, scratch *packScratch, p0, kc, j0, nw int) {
	offs := (*[gemmNR]int)(scratch.offs[:gemmNR])
	for q := 0; q < nw; q += gemmNR {
		d := dst[q*kc : (q+gemmNR)*kc]
		// At the right edge (fewer than 16 columns) the missing lanes
		// gather the last column again and are cleared afterwards, so the
		// edge panel is as fast as a whole one.
		lanes := min(gemmNR, nw-q)
		s.rowOffsets(offs[:lanes], j0+q)
		for l := lanes; l < gemmNR; l++ {
			offs[l] = offs[lanes-1]
		}
		// The slab's pixels, one output row segment at a time.
		for t := 0; t < kc; {
			y, xo := (p0+t)/s.OW, (p0+t)%s.OW
			seg := min(s.OW-xo, kc-t)
			g.transpose16Gather(d[t*gemmNR:(t+seg)*gemmNR], s.xp[y*s.Wp+xo:], offs, seg)
			t += seg
		}
		if lanes < gemmNR {
			for t := 0; t < kc; t++ {
				clear(d[t*gemmNR+lanes : (t+1)*gemmNR])
			}
		}
	}
}

// prepack3 writes row panels [lo,hi) of the whole of op(A) for K = 3 into
// the prepacking x, reading w in order: for each o, the panels' channels'
// kernels are one run of w (54 values a panel), so the reads stream where
// packing panel by panel strides through w (C*9 values between o's), which
// the caches cannot follow when w comes from memory. Same values as packA.
func (s flippedWA) prepack3(x prepackedA, lo, hi int) {
	mp := roundUp(x.m, gemmMR)
	for o := 0; o < s.OC; o++ {
		for r := lo; r < hi; r++ {
			c0 := r * gemmMR
			rows := min(gemmMR, s.C-c0)
			src := s.w[(o*s.C+c0)*9 : (o*s.C+c0+rows)*9]
			for u := 0; u < 9; u++ {
				p := o*9 + u
				p0 := p / gemmKC * gemmKC
				kc := min(gemmKC, x.k-p0)
				d := (*[gemmMR]float32)(x.data[p0*mp+c0*kc+(p-p0)*gemmMR:])
				f := 8 - u
				if rows == gemmMR {
					d[0], d[1], d[2] = src[f], src[9+f], src[18+f]
					d[3], d[4], d[5] = src[27+f], src[36+f], src[45+f]
					continue
				}
				for i := range d {
					d[i] = 0
					if i < rows {
						d[i] = src[i*9+f]
					}
				}
			}
		}
	}
}

// packPanel3 is packA's common case, a whole 6-row panel for K = 3: for
// each o, the 6 channels' 3x3 kernels are 54 consecutive values of w,
// transposed and reversed into 9 rows of the panel.
func (s flippedWA) packPanel3(d []float32, c0, p0, kc int) {
	o, t := p0/9, p0%9
	for p := 0; p < kc; o, t = o+1, 0 {
		src := (*[54]float32)(s.w[(o*s.C+c0)*9:])
		n := min(9-t, kc-p)
		for u := t; u < t+n; u++ {
			f := 8 - u
			dp := (*[gemmMR]float32)(d[(p+u-t)*gemmMR:])
			dp[0], dp[1], dp[2] = src[f], src[9+f], src[18+f]
			dp[3], dp[4], dp[5] = src[27+f], src[36+f], src[45+f]
		}
		p += n
	}
}
