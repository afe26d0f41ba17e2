package kernels

import (
	"fmt"
	"runtime"

	"github.com/memunet/memunet/backend"
)

// Winograd F(2x2,3x3) (Lavin and Gray, 2015) for 3x3 convolutions with
// padding 1: each 2x2 block of outputs (a tile) is
//
//	Y = A^T [ sum_c (G g_oc G^T) ⊙ (B^T d_c B) ] A
//
// with d_c the tile's 4x4 input window of channel c and g_oc the 3x3
// weights, so the product over channels is 16 GEMMs (one per position ξ
// of the 4x4 transformed tile), of 16 multiply-adds per tile and channel
// pair where the direct convolution takes 36: 2.25x fewer. The transforms
// are additions (and halvings, exact):
//
//	B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//	G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//	A^T = [1 1 1 0; 0 1 -1 -1]
//
// Position ξ = 4i+j is row i, column j of the 4x4 tile. Every transform
// applies its 1-D form along rows first (j), then along columns (i), in
// the fixed order of winoInputGo, winoOutputGo and winoGradGo, which the
// assembly follows operation for operation (bit-identical, tested).
//
// The input gradient is the same forward over the output gradient with
// the flipped, transposed weights. The weight gradient is the adjoint:
// dU[ξ][o][c] = sum over tiles of dM[ξ][o][t] V[ξ][c][t], dM = A dY A^T,
// and dw += G^T dU G.
//
// Error: F(2x2,3x3) rounds each output through 4 additions in the input
// transform, 4 in the filter's, one per channel in the product and 4 in
// the output's, so |Winograd - exact| <= (C+12)·u·E per output (u = 2^-24,
// first order), where E = sum_c (|A^T| (|G||g||G^T| ⊙ |B^T||d||B|) |A|)
// is the sum of the magnitudes it adds; E is at most 64/9 ≈ 7.1 times the
// direct convolution's sum of |w||x| (the transforms' magnification),
// so the error is within a small factor of the direct convolution's. The
// weight gradient likewise, with the tiles in place of the channels
// (TestWinogradErrorBound).
//
// Layout. A convolution's tile rows are cut into bands. A band's
// transformed input V holds, per ξ, C rows of the band's tiles: in the
// forward, as the micro-kernels' packed B panels (16 tiles wide, per k
// slab of gemmKC channels), so the transform is the packing; for the
// weight gradient, row-major (the direct kernels read it as A). The
// products M (per ξ, OC rows of the band's tiles, row-major) feed the
// output transform. The transforms work on chunks of 16 tiles, two halves
// of 8 whose windows lie half apart: 8 tiles of one tile row (rows of 16k
// tiles), or one tile row each (rows of 8 tiles: a chunk is two rows), so
// a shape qualifies where H and W are even and W/2 is a multiple of 16,
// or 8 with an even number of tile rows (winoShapeOK); any other shape
// runs the direct way.

const (
	winoChunk = 16 // tiles per transform chunk
	winoXi    = 16 // positions of a transformed tile
	// winoBandFloats is the cache budget of a forward band's buffers (its
	// V and M) per worker: 512 KiB, within a core's L2.
	winoBandFloats = 128 << 10
	// winoOutBlock is the output channels whose products a forward band
	// makes at a time (whole panels of the 8- and 6-row kernels), then
	// transforms while they are in cache.
	winoOutBlock = 24
	// winoGradFloats bounds a weight-gradient band's V and dM (shared by
	// the workers): 4 MiB, the last level's share of a core or two.
	winoGradFloats = 1 << 20
	// winoGradSlab is the k slab (tiles) of the weight gradient's
	// products: its bands are whole slabs, so the sums' order, and the
	// bits, do not depend on the band size.
	winoGradSlab = gemmKC
)

// winoWalk is how a transform walks its chunks of 16 tiles: chans
// channels chanStep apart, each rows groups of n chunks, chunk k of group
// r at r*rowStep + k*step, its tiles 0-7 at 2 floats a tile from there
// and tiles 8-15 likewise from half further (offsets in floats into the
// transform's image-side operand).
type winoWalk struct{ n, rows, step, rowStep, half, chans, chanStep int }

// winoWalkOf walks rows tile rows of TW tiles of chans channels over image
// rows of width floats, planes chanStep apart: a group per tile row of 16k
// tiles (its two image rows), or, with 8-tile rows, one group whose
// chunks are pairs of tile rows.
func winoWalkOf(TW, rows, width, chans, chanStep int) winoWalk {
	if TW%winoChunk == 0 {
		return winoWalk{n: TW / winoChunk, rows: rows, step: 2 * winoChunk, rowStep: 2 * width, half: winoChunk, chans: chans, chanStep: chanStep}
	}
	return winoWalk{n: rows / 2, rows: 1, step: 4 * width, half: 2 * width, chans: chans, chanStep: chanStep}
}

// chunks is the number of chunks of a channel.
func (wk winoWalk) chunks() int { return wk.n * wk.rows }

// last is the offset of the last channel's last chunk's tiles 8-15.
func (wk winoWalk) last() int {
	return (wk.chans-1)*wk.chanStep + (wk.rows-1)*wk.rowStep + (wk.n-1)*wk.step + wk.half
}

// at is where channel c's chunk k's tile l lies.
func (wk winoWalk) at(c, k, l int) int {
	at := c*wk.chanStep + k/wk.n*wk.rowStep + k%wk.n*wk.step + 2*(l%8)
	if l >= 8 {
		at += wk.half
	}
	return at
}

// winoInputKernel transforms the chunks of wk's channels: tile l of
// channel c's chunk k has its 4x4 window at src[wk.at(c, k, l) + r*stride
// + j] (r, j < 4); it stores V[ξ] of the tile at dst[c*dstChan +
// ξ*xiStride + k*panelStride + l].
type winoInputKernel func(src []float32, stride int, wk winoWalk, dst []float32, xiStride, panelStride, dstChan int)

// winoOutputKernel is the output transform of wk's channels: M[ξ] of
// channel c's chunk k's tile l is m[c*mChan + ξ*xiStride + 16*k + l], and
// the tile's 2x2 outputs go to dst[wk.at(c, k, l) + a*stride + b] (a,
// b < 2), plus bias[c] where bias is not nil.
type winoOutputKernel func(m []float32, xiStride, mChan int, dst []float32, stride int, wk winoWalk, bias []float32)

// winoGradKernel is the weight gradient's transform of the output
// gradient, dM = A dY A^T, of wk's channels: tile l of channel c's chunk
// k has dY[a][b] at src[wk.at(c, k, l) + a*stride + b], its dM[ξ] goes to
// dst[c*dstChan + ξ*xiStride + 16*k + l].
type winoGradKernel func(src []float32, stride int, wk winoWalk, dst []float32, xiStride, dstChan int)

// winoKernels are an implementation's three transforms, and how wide a
// layer Auto takes them for.
type winoKernels struct {
	input  winoInputKernel
	output winoOutputKernel
	grad   winoGradKernel
	wide   winoWidth
}

// genericWino is the pure-Go transforms (Auto as wide as with AVX-512).
func genericWino() winoKernels {
	return winoKernels{input: winoInputGo, output: winoOutputGo, grad: winoGradGo, wide: winoWidthAVX512()}
}

// winoInputGo is the pure-Go winoInputKernel: V = B^T d B, the rows'
// transforms h first, then the columns'.
func winoInputGo(src []float32, stride int, wk winoWalk, dst []float32, xiStride, panelStride, dstChan int) {
	for c := range wk.chans {
		for k := range wk.chunks() {
			for l := range winoChunk {
				base := wk.at(c, k, l)
				var h [4][4]float32 // h[r][j]: row r's transform
				for r := range 4 {
					x := src[base+r*stride : base+r*stride+4]
					h[r][0] = x[0] - x[2]
					h[r][1] = x[1] + x[2]
					h[r][2] = x[2] - x[1]
					h[r][3] = x[1] - x[3]
				}
				o := c*dstChan + k*panelStride + l
				for j := range 4 {
					dst[j*xiStride+o] = h[0][j] - h[2][j]
					dst[(4+j)*xiStride+o] = h[1][j] + h[2][j]
					dst[(8+j)*xiStride+o] = h[2][j] - h[1][j]
					dst[(12+j)*xiStride+o] = h[1][j] - h[3][j]
				}
			}
		}
	}
}

// winoOutputGo is the pure-Go winoOutputKernel: Y = A^T M A, the
// columns' transforms p first, then the rows'.
func winoOutputGo(m []float32, xiStride, mChan int, dst []float32, stride int, wk winoWalk, bias []float32) {
	for c := range wk.chans {
		for k := range wk.chunks() {
			for l := range winoChunk {
				var M [winoXi]float32
				for xi := range M {
					M[xi] = m[c*mChan+xi*xiStride+16*k+l]
				}
				var p [2][4]float32
				for j := range 4 {
					p[0][j] = (M[j] + M[4+j]) + M[8+j]
					p[1][j] = (M[4+j] - M[8+j]) - M[12+j]
				}
				base := wk.at(c, k, l)
				for a := range 2 {
					y0 := (p[a][0] + p[a][1]) + p[a][2]
					y1 := (p[a][1] - p[a][2]) - p[a][3]
					if bias != nil {
						y0 += bias[c]
						y1 += bias[c]
					}
					dst[base+a*stride] = y0
					dst[base+a*stride+1] = y1
				}
			}
		}
	}
}

// winoGradGo is the pure-Go winoGradKernel: dM = A dY A^T, the columns'
// adjoints q first, then the rows'.
func winoGradGo(src []float32, stride int, wk winoWalk, dst []float32, xiStride, dstChan int) {
	for c := range wk.chans {
		for k := range wk.chunks() {
			for l := range winoChunk {
				base := wk.at(c, k, l)
				var q [4][2]float32
				for b := range 2 {
					y0, y1 := src[base+b], src[base+stride+b]
					q[0][b] = y0
					q[1][b] = y0 + y1
					q[2][b] = y0 - y1
					q[3][b] = -y1
				}
				o := c*dstChan + 16*k + l
				for i := range 4 {
					dst[4*i*xiStride+o] = q[i][0]
					dst[(4*i+1)*xiStride+o] = q[i][0] + q[i][1]
					dst[(4*i+2)*xiStride+o] = q[i][0] - q[i][1]
					dst[(4*i+3)*xiStride+o] = -q[i][1]
				}
			}
		}
	}
}

// winoFilterTile is U = G g G^T of one 3x3 kernel g (row-major).
func winoFilterTile(g *[9]float32) (u [winoXi]float32) {
	var t [3][4]float32 // t[r]: row r's transform
	for r := range 3 {
		g0, g1, g2 := g[3*r], g[3*r+1], g[3*r+2]
		s := g0 + g2
		t[r] = [4]float32{g0, (s + g1) * 0.5, (s - g1) * 0.5, g2}
	}
	for j := range 4 {
		g0, g1, g2 := t[0][j], t[1][j], t[2][j]
		s := g0 + g2
		u[j], u[4+j], u[8+j], u[12+j] = g0, (s+g1)*0.5, (s-g1)*0.5, g2
	}
	return u
}

// winoFilterGradTile adds G^T du G (3x3, the adjoint of winoFilterTile)
// to dw (row-major).
func winoFilterGradTile(dw *[9]float32, du *[winoXi]float32) {
	var t [4][3]float32 // t[i]: row i's adjoint
	for i := range 4 {
		u0, u1, u2, u3 := du[4*i], du[4*i+1], du[4*i+2], du[4*i+3]
		s := (u1 + u2) * 0.5
		t[i] = [3]float32{u0 + s, (u1 - u2) * 0.5, s + u3}
	}
	for j := range 3 {
		u0, u1, u2, u3 := t[0][j], t[1][j], t[2][j], t[3][j]
		s := (u1 + u2) * 0.5
		dw[j] += u0 + s
		dw[3+j] += (u1 - u2) * 0.5
		dw[6+j] += s + u3
	}
}

// winoShapeOK reports whether the Winograd kernels take s: a 3x3
// convolution with padding 1 over images of even height and width whose
// rows are 16k tiles, or 8 tiles in an even number of tile rows.
func winoShapeOK(s backend.ConvShape) bool {
	if s.K != 3 || s.Pad != 1 || s.H%2 != 0 || s.W%2 != 0 || s.H < 2 {
		return false
	}
	TW, TH := s.W/2, s.H/2
	return TW%winoChunk == 0 || TW == winoChunk/2 && TH%2 == 0
}

// winoGeom is a Winograd convolution's tiles and bands: C input and OC
// output channels over H x W images, bands of R tile rows.
type winoGeom struct {
	C, OC, H, W int
	TH, TW, R   int
}

func newWinoGeom(s backend.ConvShape, R int) winoGeom {
	return winoGeom{C: s.C, OC: s.OC, H: s.H, W: s.W, TH: s.H / 2, TW: s.W / 2, R: R}
}

// rowStep is the granularity of a band's tile rows: 2 for rows of 8
// tiles (a chunk is two rows), else 1.
func rowStep(TW int) int {
	if TW%winoChunk != 0 {
		return 2
	}
	return 1
}

// bands is the number of bands of an image.
func (gm winoGeom) bands() int { return ceilDiv(gm.TH, gm.R) }

// tiles is the largest band's tile count (a multiple of 16).
func (gm winoGeom) tiles() int { return min(gm.R, gm.TH) * gm.TW }

// plane is a padded channel: (H+2) x (W+2).
func (gm winoGeom) plane() int { return (gm.H + 2) * (gm.W + 2) }

// padded is the zero-padded image, rounded to 64 bytes so that what
// follows starts on a cache line (the transforms' stores then write
// whole lines).
func (gm winoGeom) padded() int { return roundUp(gm.C*gm.plane(), 16) }

// forwardBand is the floats a forward band takes: its V and the M of a
// block of output channels.
func (gm winoGeom) forwardBand() int {
	return winoXi * (winoPlaneLd(gm.C*gm.tiles()) + winoPlaneLd(winoOutBlock*gm.tiles()))
}

// winoPlaneLd is the stride of the 16 planes (one per ξ) of n values each
// that a transform writes or reads together: n rounded to an odd number
// of cache lines, so that the 16 accesses of a tile fall in 16 different
// L1 sets (a multiple of 4 KiB apart, they would share one and evict each
// other).
func winoPlaneLd(n int) int {
	n = roundUp(n, 16)
	if n/16%2 == 0 {
		n += 16
	}
	return n
}

// winoWorkers is how many workers a Winograd convolution runs on.
func winoWorkers() int { return runtime.GOMAXPROCS(0) }

// winoForwardNeed is the workspace the forward (or, with C and OC
// swapped, the input gradient) takes in bands of R tile rows: the
// transformed weights, the padded image, then per worker a band and the
// direct kernels' edge scratch.
func winoForwardNeed(s backend.ConvShape, R int) int {
	gm := newWinoGeom(s, R)
	return WinogradFilterSize(s) + gm.padded() + winoWorkers()*(gm.forwardBand()+gemmNR*gemmKC)
}

// winoForwardRows is the band height (tile rows) of a forward over ws
// values: about three bands per worker, within the cache budget and ws,
// in steps whose tiles fill pairs of panels (the wide kernels') where
// that fits; 0 where even the least step does not fit.
func winoForwardRows(s backend.ConvShape, ws int) int {
	TW, TH := s.W/2, s.H/2
	step, pair := rowStep(TW), 2*winoChunk/gcd(TW, 2*winoChunk)
	R := roundUp(max(1, ceilDiv(TH, 3*winoWorkers())), pair)
	for R > pair && (newWinoGeom(s, R).forwardBand() > winoBandFloats || winoForwardNeed(s, R) > ws) {
		R -= pair
	}
	R = min(R, roundUp(TH, step))
	for R > step && winoForwardNeed(s, R) > ws {
		R -= step
	}
	if winoForwardNeed(s, R) > ws {
		return 0
	}
	return R
}

// winoGradRows is the weight gradient's band height: whole slabs of
// winoGradSlab tiles (or the whole image), as many as fit the budget and
// ws; 0 where one slab's band does not fit ws.
func winoGradRows(s backend.ConvShape, ws int) int {
	TW, TH := s.W/2, s.H/2
	unit := max(rowStep(TW), winoGradSlab/gcd(TW, winoGradSlab))
	if unit >= TH {
		if winoGradNeed(s, TH) > ws {
			return 0
		}
		return TH
	}
	R := unit
	for R+unit <= TH && winoXi*(s.C+s.OC)*(R+unit)*TW <= winoGradFloats && winoGradNeed(s, R+unit) <= ws {
		R += unit
	}
	if R+unit > TH && winoXi*(s.C+s.OC)*TH*TW <= winoGradFloats && winoGradNeed(s, TH) <= ws {
		R = TH // the whole image: its last band would be short anyway
	}
	if winoGradNeed(s, R) > ws {
		return 0
	}
	return R
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// winoGradLd is the row stride of the weight gradient's V: its band's
// tiles and 16 more, so that rows are not a multiple of 4 KiB apart
// (the L1 sets the direct kernels' 8 rows would share).
func winoGradLd(tiles int) int { return tiles + 16 }

// winoGradNeed is the workspace the weight gradient takes in bands of R
// tile rows: dU (16 x C x OC), the padded image, the band's V and dM, and
// per worker the packed panels of dM^T.
func winoGradNeed(s backend.ConvShape, R int) int {
	gm := newWinoGeom(s, R)
	T := gm.tiles()
	return WinogradFilterSize(s) + gm.padded() + winoXi*(winoPlaneLd(s.C*winoGradLd(T))+winoPlaneLd(s.OC*T)) +
		winoWorkers()*(roundUp(s.OC, gemmNR)*min(T, gemmKC)+gemmNR*gemmKC)
}

// WinogradSwapped is s with its channels swapped: the input gradient's
// forward, over the output gradient, with WinogradFilter's flipped filter.
func WinogradSwapped(s backend.ConvShape) backend.ConvShape {
	s.C, s.OC = s.OC, s.C
	return s
}

// ConvPlan says which parts of a convolution run the Winograd way.
type ConvPlan struct {
	Forward, InputGrad, WeightGrad bool
}

// Any reports whether any part does.
func (p ConvPlan) Any() bool { return p.Forward || p.InputGrad || p.WeightGrad }

// PlanConv is how a convolution of shape s (one image or more) runs with
// ws workspace values: its s.Algo's choice. Direct runs the direct
// kernels; Winograd runs each part the Winograd way where winoShapeOK;
// Auto does so where the layer is wide enough for that part (winoWide)
// and the part fits in ws, which for Auto is the direct convolution's
// workspace: Auto never takes more memory.
func PlanConv(s backend.ConvShape, ws int) ConvPlan {
	one := s.Images(1)
	switch {
	case s.Algo == backend.ConvDirect || !winoShapeOK(one):
		return ConvPlan{}
	case s.Algo == backend.ConvWinograd:
		return ConvPlan{Forward: true, InputGrad: true, WeightGrad: true}
	}
	k := bestGemm().wino.wide
	return ConvPlan{
		Forward:    winoWide(s, k.products) && winoForwardRows(one, ws) > 0,
		InputGrad:  winoWide(s, k.products) && winoForwardRows(WinogradSwapped(one), ws) > 0,
		WeightGrad: winoWide(s, k.weightGrad) && winoGradRows(one, ws) > 0,
	}
}

// winoWide reports whether s is wide enough for Auto to take the Winograd
// way: the transforms cost in proportion to C+OC, the multiplications
// they save to C*OC, so it pays where 1/C + 1/OC <= 1/k, k depending on
// how fast the implementation multiplies (winoWidth).
func winoWide(s backend.ConvShape, k int) bool { return s.C*s.OC >= k*(s.C+s.OC) }

// winoWidth is an implementation's k of winoWide for the products
// (forward and input gradient) and for the weight gradient (which
// transforms the output gradient too). Measured on the seed UNet's
// layers, CPU time on one core: with AVX-512, the products 1.2-1.8x
// faster from 16-32 (1/C+1/OC = 0.094) on and slower at 16-16 (0.125),
// the weight gradient from 48-16 (0.083) on and slower at 16-32; with
// AVX2 (multiplying at half the rate), the products 1.5-2.0x faster
// from 16-16 on, the weight gradient from 16-32 on and slower at 16-16.
type winoWidth struct{ products, weightGrad int }

// winoWidthAVX512 and winoWidthAVX2 are the measured winoWidths.
func winoWidthAVX512() winoWidth { return winoWidth{products: 10, weightGrad: 12} }
func winoWidthAVX2() winoWidth   { return winoWidth{products: 6, weightGrad: 10} }

// winogradWorkspace is the workspace Winograd takes for one image of s
// at the preferred band heights (0 where the shape does not qualify).
func winogradWorkspace(s backend.ConvShape) int {
	if !winoShapeOK(s) {
		return 0
	}
	unlimited := int(^uint(0) >> 1)
	return max(winoForwardNeed(s, winoForwardRows(s, unlimited)),
		winoForwardNeed(WinogradSwapped(s), winoForwardRows(WinogradSwapped(s), unlimited)),
		winoGradNeed(s, winoGradRows(s, unlimited)))
}

// WinogradFilterSize is the values of a transformed filter: 16 planes of
// C*OC (winoPlaneLd apart).
func WinogradFilterSize(s backend.ConvShape) int { return winoXi * winoPlaneLd(s.C*s.OC) }

// WinogradFilter writes u (WinogradFilterSize values: u[ξ][o][c]) = G w[o][c] G^T
// for s's forward and returns the rest of ws after u, or with flipped the
// input gradient's, u[ξ][c][o] of the flipped kernel w[o][c][2-i][2-j]
// (the forward over the output gradient with the channels swapped).
func (t *Team) WinogradFilter(s backend.ConvShape, w, ws []float32, flipped bool) (u, rest []float32) {
	g := gemmOn(t)
	if len(w) != s.WeightSize() || s.K != 3 {
		panic(fmt.Sprintf("kernels: winograd filter of %+v: %d weights", s, len(w)))
	}
	u, rest = g.carve(ws, WinogradFilterSize(s))
	ld := winoPlaneLd(s.C * s.OC)
	C, OC := s.C, s.OC
	t.For(OC, max(1, 4096/C), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			for c := range C {
				g := (*[9]float32)(w[(o*C+c)*9:])
				if flipped {
					var f [9]float32
					for i := range f {
						f[i] = g[8-i]
					}
					g = &f
				}
				tile := winoFilterTile(g)
				at := o*C + c // u[ξ][o][c]
				if flipped {
					at = c*OC + o // u[ξ][c][o]
				}
				for xi, v := range tile {
					u[xi*ld+at] = v
				}
			}
		}
	})
	return u, rest
}

// ConvWinograd is Conv2d the Winograd way over s.N images with the
// filter u from WinogradFilter (not flipped; or, flipped, with s the
// swapped shape: the input gradient from the output gradient); s must
// qualify (winoShapeOK), and ws (what WinogradFilter left) must hold a
// band per worker (PlanConv's choice guarantees it). bias may be nil.
func (t *Team) ConvWinograd(s backend.ConvShape, out []float32, in Image, u, bias, ws []float32) {
	gemmOn(t).winogradConv(s, out, in, u, bias, ws)
}

func (g gemmImpl) winogradConv(s backend.ConvShape, out []float32, in Image, u, bias, ws []float32) {
	if !winoShapeOK(s) || len(out) != s.OutSize() || in.Len() != s.InSize() || len(u) != WinogradFilterSize(s) || bias != nil && len(bias) != s.OC {
		panic(fmt.Sprintf("kernels: winograd conv %+v: sizes out=%d in=%d u=%d bias=%d do not match", s, len(out), in.Len(), len(u), len(bias)))
	}
	// ws holds the filter already: the rows are planned on ws as a whole.
	R := winoForwardRows(s.Images(1), len(ws)+len(u))
	if R == 0 {
		if g.strict {
			panic(fmt.Sprintf("kernels: winograd conv %+v: workspace of %d values is too small", s, len(ws)+len(u)))
		}
		R = rowStep(s.W / 2)
	}
	gm := newWinoGeom(s, R)
	padded, rest := g.carve(ws, gm.padded())
	workers := min(winoWorkers(), gm.bands())
	for n := range s.N {
		xp := padImage(g.team, padded, in.slice(n*s.C*s.H*s.W, (n+1)*s.C*s.H*s.W), s.C, s.H, s.W, 1)
		o := out[n*s.OC*s.H*s.W : (n+1)*s.OC*s.H*s.W]
		g.runTasks(workers, gm.bands(), gm.forwardBand(), gemmNR*gemmKC, rest, func(_, b int, buf, _ []float32, ps *packScratch) {
			g.winoForwardBand(gm, b, o, xp, u, bias, buf, ps)
		})
	}
}

// winoForwardBand computes band b of an image from its padded copy xp:
// the input transform, then per block of output channels the 16 products
// and their output transform into o, in the worker's buf.
func (g gemmImpl) winoForwardBand(gm winoGeom, b int, o, xp, u, bias, buf []float32, ps *packScratch) {
	C, OC, H, W, TW := gm.C, gm.OC, gm.H, gm.W, gm.TW
	Wp := W + 2
	r0 := b * gm.R
	rows := min(gm.R, gm.TH-r0)
	T := rows * TW // a multiple of 16
	ldV, ldM, ldU := winoPlaneLd(C*T), winoPlaneLd(winoOutBlock*T), winoPlaneLd(C*OC)
	V, M := buf[:winoXi*ldV], buf[winoXi*ldV:winoXi*(ldV+ldM)]
	// V[ξ] is C rows of T tiles as packed panels, per k slab of channels.
	for c0 := 0; c0 < C; c0 += gemmKC {
		kc := min(gemmKC, C-c0)
		g.wino.input(xp[c0*gm.plane()+2*r0*Wp:], Wp, winoWalkOf(TW, rows, Wp, kc, gm.plane()), V[c0*T:], ldV, kc*winoChunk, winoChunk)
	}
	for o0 := 0; o0 < OC; o0 += winoOutBlock {
		n := min(winoOutBlock, OC-o0)
		for xi := range winoXi {
			g.taskDirect(matA{a: u[xi*ldU+o0*C : xi*ldU+OC*C], lda: C}, panelsB{V[xi*ldV : xi*ldV+C*T], T},
				1, 0, M[xi*ldM:xi*ldM+n*T], T, 0, C, 0, n, 0, T, nil, ps)
		}
		var bo []float32
		if bias != nil {
			bo = bias[o0 : o0+n]
		}
		g.wino.output(M, ldM, T, o[o0*H*W+2*r0*W:], W, winoWalkOf(TW, rows, W, n, H*W), bo)
	}
}

// panelsB is a k x n op(B) stored as the micro-kernels' packed panels, per
// k slab of gemmKC: slab p0's panels start at p0*n, panel q at q*kc*16.
type panelsB struct {
	data []float32
	n    int
}

// packB copies the panels; taskDirect reads them in place (view).
func (x panelsB) packB(_ *gemmImpl, dst []float32, _ *packScratch, p0, kc, j0, nw int) {
	copy(dst, x.view(p0, kc, j0, nw))
}

// view is columns [j0,j0+nw) of slab p0 (kc deep) as packed panels; j0
// is a multiple of 16.
func (x panelsB) view(p0, kc, j0, nw int) []float32 {
	off := p0*x.n + j0*kc
	return x.data[off : off+roundUp(nw, gemmNR)*kc]
}

// WinogradWeightGrad adds to du (WinogradFilterSize values, du[ξ][c][o]) the
// weight gradient's transformed products over s.N images: sum over tiles
// of V[ξ][c][t] dM[ξ][o][t]. ws must hold what PlanConv's choice
// guarantees; WinogradWeightGradAdd then adds G^T du G to dw.
func (t *Team) WinogradWeightGrad(s backend.ConvShape, du, dout []float32, in Image, ws []float32) {
	gemmOn(t).winogradWeightGrad(s, du, dout, in, ws)
}

func (g gemmImpl) winogradWeightGrad(s backend.ConvShape, du, dout []float32, in Image, ws []float32) {
	if !winoShapeOK(s) || len(dout) != s.OutSize() || in.Len() != s.InSize() || len(du) != WinogradFilterSize(s) {
		panic(fmt.Sprintf("kernels: winograd weight gradient %+v: sizes dout=%d in=%d du=%d do not match", s, len(dout), in.Len(), len(du)))
	}
	R := winoGradRows(s.Images(1), len(ws)+len(du))
	if R == 0 {
		if g.strict {
			panic(fmt.Sprintf("kernels: winograd weight gradient %+v: workspace of %d values is too small", s, len(ws)+len(du)))
		}
		R = max(rowStep(s.W/2), winoGradSlab/gcd(s.W/2, winoGradSlab))
	}
	gm := newWinoGeom(s, R)
	C, OC, H, W, TW := s.C, s.OC, s.H, s.W, gm.TW
	T := gm.tiles()
	ld, ldU := winoGradLd(T), winoPlaneLd(C*OC)
	padded, rest := g.carve(ws, gm.padded())
	ldV, ldM := winoPlaneLd(C*ld), winoPlaneLd(OC*T)
	V, rest := g.carve(rest, winoXi*ldV)
	dM, rest := g.carve(rest, winoXi*ldM)
	workers := winoWorkers()
	packSize := roundUp(OC, gemmNR)*min(T, gemmKC) + gemmNR*gemmKC
	for n := range s.N {
		xp := padImage(g.team, padded, in.slice(n*C*H*W, (n+1)*C*H*W), C, H, W, 1)
		dy := dout[n*OC*H*W : (n+1)*OC*H*W]
		for b := range gm.bands() {
			r0 := b * gm.R
			rows := min(gm.R, gm.TH-r0)
			Tb := rows * TW
			// Phase 1: V of the input channels (row-major, ld apart) and
			// dM of the output channels, channels [lo,hi) of both in turn.
			g.team.For(C+OC, 1, func(lo, hi int) {
				if lo < C {
					c1 := min(hi, C)
					g.wino.input(xp[lo*gm.plane()+2*r0*(W+2):], W+2, winoWalkOf(TW, rows, W+2, c1-lo, gm.plane()), V[lo*ld:], ldV, winoChunk, ld)
				}
				if hi > C {
					o0 := max(lo, C) - C
					g.wino.grad(dy[o0*H*W+2*r0*W:], W, winoWalkOf(TW, rows, W, hi-C-o0, H*W), dM[o0*T:], ldM, T)
				}
			})
			// Phase 2: per ξ, du[ξ] (C x OC) += V[ξ] (C x Tb) dM[ξ]^T, in
			// slabs of winoGradSlab tiles.
			g.runTasks(min(workers, winoXi), winoXi, 0, packSize, rest, func(_, xi int, _, packB []float32, ps *packScratch) {
				g.taskDirect(matA{a: V[xi*ldV : xi*ldV+C*ld], lda: ld}, matB{b: dM[xi*ldM : xi*ldM+OC*T], ldb: T, trans: true},
					1, 1, du[xi*ldU:xi*ldU+C*OC], OC, 0, Tb, 0, C, 0, OC, packB, ps)
			})
		}
	}
}

// WinogradWeightGradAdd adds G^T du[ξ][c][o] G to dw[o][c] (s's weights).
func (t *Team) WinogradWeightGradAdd(s backend.ConvShape, dw, du []float32) {
	if len(dw) != s.WeightSize() || len(du) != WinogradFilterSize(s) || s.K != 3 {
		panic(fmt.Sprintf("kernels: winograd weight gradient of %+v: dw=%d du=%d", s, len(dw), len(du)))
	}
	C, OC := s.C, s.OC
	ld := winoPlaneLd(C * OC)
	t.For(OC, max(1, 4096/C), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			for c := range C {
				var tile [winoXi]float32
				for xi := range tile {
					tile[xi] = du[xi*ld+c*OC+o]
				}
				winoFilterGradTile((*[9]float32)(dw[(o*C+c)*9:]), &tile)
			}
		}
	})
}
