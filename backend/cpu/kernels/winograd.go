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
// Error: F(2x2,3x3) rounds each output through 2 additions in the input
// transform, 9 in the filter's (a GEMM by G ⊗ G, whose products are
// exact), one per channel in the product (and one per k slab of 256
// channels beyond the first), 4 in the output transform and 1 adding the
// bias, so |Winograd - exact| <= (C + 16 + slabs)·u·E per output (u =
// 2^-24, first order), where E = sum_c (|A^T| (|G||g||G^T| ⊙ |B^T||d||B|)
// |A|) is the sum of the magnitudes it adds; E is at most 64/9 ≈ 7.1
// times the direct convolution's sum of |w||x| (the transforms'
// magnification), so the error is within a small factor of the direct
// convolution's. The input gradient likewise with OC for C. The weight
// gradient sums over tiles in slabs of 256: |error| <= (256 + slabs + 20)
// ·u·E with E = |G^T| (sum over tiles of |A||dY||A^T| ⊙ |B^T||d||B|) |G|
// (TestWinogradErrorBound, at the seed UNet's widths).
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
	// products with F(2x2,3x3), winoGradSlab4 with F(4x4,3x3) (its 36
	// planes a tile take 2.25x the floats of 16; a slab of 64 takes 56%
	// of F(2x2,3x3)'s, so it runs wherever that fits): its bands are
	// whole slabs, each summed on its own, so the sums' order, and the
	// bits, do not depend on the band size.
	winoGradSlab  = gemmKC
	winoGradSlab4 = 64
)

// gradSlab is the weight gradient's k slab with m x m tiles.
func (m WinoTile) gradSlab() int {
	if m == Wino4 {
		return winoGradSlab4
	}
	return winoGradSlab
}

// winoWalk is how a transform walks its chunks of 16 tiles: chans
// channels chanStep apart, each rows groups of n chunks, chunk k of group
// r at r*rowStep + k*step, its tiles 0-7 at tile floats a tile (the
// tile's outputs a side: 2, or 4 for F(4x4,3x3)) from there and tiles
// 8-15 likewise from half further (offsets in floats into the
// transform's image-side operand).
type winoWalk struct{ n, rows, step, rowStep, half, chans, chanStep, tile int }

// winoWalkOf walks rows tile rows of TW tiles of m x m outputs, chans
// channels, over image rows of width floats, planes chanStep apart: a
// group per tile row of 16k tiles (its m image rows), or, with 8-tile
// rows, one group whose chunks are pairs of tile rows.
func winoWalkOf(m, TW, rows, width, chans, chanStep int) winoWalk {
	if TW%winoChunk == 0 {
		return winoWalk{n: TW / winoChunk, rows: rows, step: m * winoChunk, rowStep: m * width, half: m * winoChunk / 2, chans: chans, chanStep: chanStep, tile: m}
	}
	return winoWalk{n: rows / 2, rows: 1, step: 2 * m * width, half: m * width, chans: chans, chanStep: chanStep, tile: m}
}

// chunks is the number of chunks of a channel.
func (wk winoWalk) chunks() int { return wk.n * wk.rows }

// last is the offset of the last channel's last chunk's tiles 8-15.
func (wk winoWalk) last() int {
	return (wk.chans-1)*wk.chanStep + (wk.rows-1)*wk.rowStep + (wk.n-1)*wk.step + wk.half
}

// at is where channel c's chunk k's tile l lies.
func (wk winoWalk) at(c, k, l int) int {
	at := c*wk.chanStep + k/wk.n*wk.rowStep + k%wk.n*wk.step + wk.tile*(l%8)
	if l >= 8 {
		at += wk.half
	}
	return at
}

// eachTile calls f for every tile the walk covers, channel by channel,
// chunk by chunk: channel c, chunk k, tile l, its offset base (at).
func (wk winoWalk) eachTile(f func(c, k, l, base int)) {
	for c := range wk.chans {
		for k := range wk.chunks() {
			for l := range winoChunk {
				f(c, k, l, wk.at(c, k, l))
			}
		}
	}
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

// winoTransforms are the three transforms of one tile.
type winoTransforms struct {
	input  winoInputKernel
	output winoOutputKernel
	grad   winoGradKernel
}

// winoKernels are an implementation's transforms of F(2x2,3x3) and of
// F(4x4,3x3) (winograd4.go), and how wide a layer Auto takes them for.
type winoKernels struct {
	f2, f4 winoTransforms
	wide   winoWidth
}

// of is the transforms of m x m tiles.
func (k winoKernels) of(m WinoTile) winoTransforms {
	if m == Wino4 {
		return k.f4
	}
	return k.f2
}

// genericWino is the pure-Go transforms (Auto as wide as with AVX-512).
func genericWino() winoKernels {
	return winoKernels{f2: winoTransforms{winoInputGo, winoOutputGo, winoGradGo},
		f4: winoTransforms{winoInput4Go, winoOutput4Go, winoGrad4Go}, wide: winoWidthAVX512()}
}

// winoInputGo is the pure-Go winoInputKernel: V = B^T d B, the rows'
// transforms h first, then the columns'.
func winoInputGo(src []float32, stride int, wk winoWalk, dst []float32, xiStride, panelStride, dstChan int) {
	wk.eachTile(func(c, k, l, base int) {
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
	})
}

// winoOutputGo is the pure-Go winoOutputKernel: Y = A^T M A, the
// columns' transforms p first, then the rows'.
func winoOutputGo(m []float32, xiStride, mChan int, dst []float32, stride int, wk winoWalk, bias []float32) {
	wk.eachTile(func(c, k, l, base int) {
		var M [winoXi]float32
		for xi := range M {
			M[xi] = m[c*mChan+xi*xiStride+16*k+l]
		}
		var p [2][4]float32
		for j := range 4 {
			p[0][j] = (M[j] + M[4+j]) + M[8+j]
			p[1][j] = (M[4+j] - M[8+j]) - M[12+j]
		}
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
	})
}

// winoGradGo is the pure-Go winoGradKernel: dM = A dY A^T, the columns'
// adjoints q first, then the rows'.
func winoGradGo(src []float32, stride int, wk winoWalk, dst []float32, xiStride, dstChan int) {
	wk.eachTile(func(c, k, l, base int) {
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
	})
}

// winoFilterMatrix is G ⊗ G as an (m+2)^2 x 9 matrix: U[ξ] = sum over k
// of K[ξ][k] g[k] for a 3x3 kernel g (row-major), ξ = (m+2)i+j, k = 3r+c,
// K[ξ][k] = G[i][r] G[j][c]. For F(2x2,3x3) its entries are 0, ±1, ±1/2
// and ±1/4, so each product is exact and U is 9 products summed; for
// F(4x4,3x3) (winoG4) they are rounded to float32. The filter transforms
// run as GEMMs by it.
func winoFilterMatrix(m WinoTile) []float32 {
	G := [][3]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}
	if m == Wino4 {
		G = winoG4[:]
	}
	n := len(G)
	k := make([]float32, n*n*9)
	for xi := range n * n {
		for r := range 3 {
			for c := range 3 {
				k[xi*9+3*r+c] = float32(G[xi/n][r] * G[xi%n][c])
			}
		}
	}
	return k
}

// winoShapeOK reports whether the F(2x2,3x3) kernels take s (winoTileOK).
func winoShapeOK(s backend.ConvShape) bool { return winoTileOK(s, Wino2) }

// winoTileOK reports whether the Winograd kernels of m x m output tiles
// (Wino2 or Wino4) take s: a 3x3 convolution with padding 1 over images
// whose height and width are multiples of m and whose rows are 16k tiles,
// or 8 tiles in an even number of tile rows.
func winoTileOK(s backend.ConvShape, t WinoTile) bool {
	m := int(t)
	if t != Wino2 && t != Wino4 || s.K != 3 || s.Pad != 1 || s.H%m != 0 || s.W%m != 0 || s.H < m {
		return false
	}
	TW, TH := s.W/m, s.H/m
	return TW%winoChunk == 0 || TW == winoChunk/2 && TH%2 == 0
}

// WinoTile is the side of a Winograd tile's outputs: 2 for F(2x2,3x3), 4
// for F(4x4,3x3) (1.78x fewer multiplications again, a looser bound:
// winograd4.go).
type WinoTile int

// The Winograd algorithms.
const (
	Wino2 WinoTile = 2
	Wino4 WinoTile = 4
)

// xi is the positions of a transformed tile: (m+2)^2.
func (m WinoTile) xi() int { return (int(m) + 2) * (int(m) + 2) }

// winoGeom is a Winograd convolution's tiles and bands: C input and OC
// output channels over H x W images, tiles of m x m outputs, bands of R
// tile rows.
type winoGeom struct {
	C, OC, H, W int
	TH, TW, R   int
	m           WinoTile
}

func newWinoGeom(s backend.ConvShape, m WinoTile, R int) winoGeom {
	return winoGeom{C: s.C, OC: s.OC, H: s.H, W: s.W, TH: s.H / int(m), TW: s.W / int(m), R: R, m: m}
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
	return gm.m.xi() * (winoPlaneLd(gm.C*gm.tiles()) + winoPlaneLd(winoOutBlock*gm.tiles()))
}

// winoPlaneLd is the stride of the planes (one per ξ) of n values each
// that a transform writes or reads together: n rounded to an odd number
// of cache lines, so that the accesses of a tile fall in different
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
// swapped, the input gradient) takes with m x m tiles in bands of R tile
// rows: the transformed weights, the padded image, then per worker a
// band and the direct kernels' edge scratch.
func winoForwardNeed(s backend.ConvShape, m WinoTile, R int) int {
	gm := newWinoGeom(s, m, R)
	return WinogradFilterSize(s, m) + gm.padded() + winoWorkers()*(gm.forwardBand()+gemmNR*gemmKC)
}

// winoForwardRows is the band height (tile rows) of a forward over ws
// values: about three bands per worker, within the cache budget and ws,
// in steps whose tiles fill pairs of panels (the wide kernels') where
// that fits; 0 where even the least step does not fit.
func winoForwardRows(s backend.ConvShape, m WinoTile, ws int) int {
	TW, TH := s.W/int(m), s.H/int(m)
	step, pair := rowStep(TW), 2*winoChunk/gcd(TW, 2*winoChunk)
	R := roundUp(max(1, ceilDiv(TH, 3*winoWorkers())), pair)
	for R > pair && (newWinoGeom(s, m, R).forwardBand() > winoBandFloats || winoForwardNeed(s, m, R) > ws) {
		R -= pair
	}
	R = min(R, roundUp(TH, step))
	for R > step && winoForwardNeed(s, m, R) > ws {
		R -= step
	}
	if winoForwardNeed(s, m, R) > ws {
		return 0
	}
	return R
}

// winoGradRows is the weight gradient's band height: whole slabs of
// m.gradSlab() tiles (or the whole image), as many as fit the budget and
// ws; 0 where one slab's band does not fit ws, even with rows unpadded
// (winoGradLd).
func winoGradRows(s backend.ConvShape, m WinoTile, ws int) int {
	TW, TH, nxi := s.W/int(m), s.H/int(m), m.xi()
	unit := winoGradUnit(TW, m)
	if unit >= TH {
		if winoGradNeedLd(s, m, TH, false) > ws {
			return 0
		}
		return TH
	}
	R := unit
	for R+unit <= TH && nxi*(s.C+s.OC)*(R+unit)*TW <= winoGradFloats && winoGradNeed(s, m, R+unit) <= ws {
		R += unit
	}
	if R+unit > TH && nxi*(s.C+s.OC)*TH*TW <= winoGradFloats && winoGradNeed(s, m, TH) <= ws {
		R = TH // the whole image: its last band would be short anyway
	}
	if winoGradNeedLd(s, m, R, false) > ws {
		return 0
	}
	return R
}

// winoGradUnit is the weight gradient's least band height for rows of TW
// tiles of m x m: whole slabs of m.gradSlab() tiles, in steps of rowStep
// (a band holds no less, unless the image is shorter).
func winoGradUnit(TW int, m WinoTile) int {
	slab := m.gradSlab()
	return max(rowStep(TW), slab/gcd(TW, slab))
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// winoGradLd is the row stride of the weight gradient's V and dM: its
// band's tiles and, with pad, 16 more, so that rows are not a multiple of
// 4 KiB apart (the L1 sets the direct kernels' 8 rows would share). A
// workspace too small for the padded rows takes them unpadded: slower
// where the rows alias, the same sums in the same order, the same bits.
func winoGradLd(tiles int, pad bool) int {
	if pad {
		return tiles + 16
	}
	return tiles
}

// winoGradNeed is the workspace the weight gradient takes with m x m
// tiles in bands of R tile rows, its rows padded: dU (ξ x OC x C), the
// padded image, the band's V and dM, and per worker the packed panels of
// V^T.
func winoGradNeed(s backend.ConvShape, m WinoTile, R int) int { return winoGradNeedLd(s, m, R, true) }

// winoGradNeedLd is winoGradNeed with the rows padded or not.
func winoGradNeedLd(s backend.ConvShape, m WinoTile, R int, pad bool) int {
	return winoGradNeedOn(s, m, R, pad, winoWorkers())
}

// winoGradNeedOn is winoGradNeedLd on the given number of workers.
func winoGradNeedOn(s backend.ConvShape, m WinoTile, R int, pad bool, workers int) int {
	gm := newWinoGeom(s, m, R)
	T := gm.tiles()
	ld := winoGradLd(T, pad)
	bands := gm.padded() + m.xi()*(winoPlaneLd(s.C*ld)+winoPlaneLd(s.OC*ld)) + workers*winoGradPack(s, T)
	// WinogradWeightGradAdd's scratch, after the bands.
	return WinogradFilterSize(s, m) + max(bands, workers*winoAddScratch(m))
}

// autoGradTile is the weight gradient's tile under Auto, by the shape
// alone: F(4x4,3x3) where the shape takes it and its least band, on one
// worker, takes no more than F(2x2,3x3)'s (its transformed filter is
// 2.25x larger: the deep layers' keep F(2x2,3x3)).
func autoGradTile(s backend.ConvShape) WinoTile {
	if !winoTileOK(s, Wino4) || winoGradNeedOn(s, Wino4, winoGradLeast(s, Wino4), false, 1) > winoGradNeedOn(s, Wino2, winoGradLeast(s, Wino2), false, 1) {
		return Wino2
	}
	return Wino4
}

// winoGradLeast is the weight gradient's least band with m x m tiles.
func winoGradLeast(s backend.ConvShape, m WinoTile) int {
	return min(s.H/int(m), winoGradUnit(s.W/int(m), m))
}

// winoGradByOut reports whether the weight gradient's products run as
// du[ξ] (OC x C) = dM V^T (their columns the input channels, V packed
// transposed) rather than duT[ξ] (C x OC) = V dM^T: where the input
// channels are fewer than the output's (packing the smaller operand)
// but fill a panel (narrower columns run through tiles).
func winoGradByOut(s backend.ConvShape) bool { return s.C < s.OC && s.C >= gemmNR }

// winoGradPack is a worker's packing buffer in the weight gradient's
// products (the transposed operand's slab, and the kernels' scratch).
func winoGradPack(s backend.ConvShape, T int) int {
	n := s.OC
	if winoGradByOut(s) {
		n = s.C
	}
	return roundUp(n, gemmNR)*min(T, gemmKC) + gemmNR*gemmKC
}

// WinogradSwapped is s with its channels swapped: the input gradient's
// forward, over the output gradient, with WinogradFilter's flipped filter.
func WinogradSwapped(s backend.ConvShape) backend.ConvShape {
	s.C, s.OC = s.OC, s.C
	return s
}

// ConvPlan says which parts of a convolution run the Winograd way, and
// with which tiles: Tile the forward and the input gradient, GradTile
// the weight gradient.
type ConvPlan struct {
	Forward, InputGrad, WeightGrad bool
	Tile, GradTile                 WinoTile
}

// Any reports whether any part does.
func (p ConvPlan) Any() bool { return p.Forward || p.InputGrad || p.WeightGrad }

// PlanConv is how a convolution of shape s (one image or more) runs with
// ws workspace values: its s.Algo's choice. Direct runs the direct
// kernels; Winograd runs each part F(2x2,3x3)'s way where winoShapeOK;
// Auto does so where the layer is wide enough for that part (winoWide)
// and the part fits in ws, with F(4x4,3x3) where the shape takes it and
// it fits (autoTiles): ConvWorkspace's for Auto (autoWorkspace) holds
// every such part, so Auto's choice is the shape's (a smaller ws, as
// callers other than the model may give, runs what fits).
func PlanConv(s backend.ConvShape, ws int) ConvPlan {
	one := s.Images(1)
	switch {
	case s.Algo == backend.ConvDirect || !winoShapeOK(one):
		return ConvPlan{}
	case s.Algo == backend.ConvWinograd:
		return ConvPlan{Forward: true, InputGrad: true, WeightGrad: true, Tile: Wino2, GradTile: Wino2}
	}
	k := bestGemm().wino.wide
	var p ConvPlan
	if winoWide(s, k.products) {
		for _, m := range autoTiles(one) {
			p.Forward = winoForwardRows(one, m, ws) > 0
			p.InputGrad = winoForwardRows(WinogradSwapped(one), m, ws) > 0
			if p.Forward || p.InputGrad {
				p.Tile = m
				break
			}
		}
	}
	if winoWide(s, k.weightGrad) {
		for _, m := range []WinoTile{autoGradTile(one), Wino2} {
			if p.WeightGrad = winoGradRows(one, m, ws) > 0; p.WeightGrad {
				p.GradTile = m
				break
			}
		}
	}
	return p
}

// autoTiles is the tiles Auto tries for the products, best first:
// F(4x4,3x3) where the shape takes it, then F(2x2,3x3) (where a workspace
// smaller than Auto's own leaves no room for it).
func autoTiles(s backend.ConvShape) []WinoTile {
	if winoTileOK(s, Wino4) {
		return []WinoTile{Wino4, Wino2}
	}
	return []WinoTile{Wino2}
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
	return max(winoForwardNeed(s, Wino2, winoForwardRows(s, Wino2, unlimited)),
		winoForwardNeed(WinogradSwapped(s), Wino2, winoForwardRows(WinogradSwapped(s), Wino2, unlimited)),
		winoGradNeed(s, Wino2, winoGradRows(s, Wino2, unlimited)))
}

// autoWorkspace is the workspace Auto takes for one image of s, whose
// direct way takes direct: at least that, and the least Winograd's parts
// wide enough for it take (the shortest bands, rows unpadded where the
// padded ones would need more than direct), so that Auto costs memory only
// where even those exceed the direct way's; the bands are then as tall
// as the workspace holds (their height changes no bit).
func autoWorkspace(s backend.ConvShape, direct int) int {
	if !winoShapeOK(s) {
		return direct
	}
	k, need := bestGemm().wino.wide, direct
	if winoWide(s, k.products) {
		m := autoTiles(s)[0]
		least := rowStep(s.W / int(m))
		need = max(need, winoForwardNeed(s, m, least), winoForwardNeed(WinogradSwapped(s), m, least))
	}
	if m := autoGradTile(s); winoWide(s, k.weightGrad) {
		if least := winoGradLeast(s, m); winoGradNeed(s, m, least) > need {
			need = max(need, winoGradNeedLd(s, m, least, false))
		}
	}
	return need
}

// WinogradFilterSize is the values of a transformed filter with m x m
// tiles: (m+2)^2 planes of C*OC (winoPlaneLd apart).
func WinogradFilterSize(s backend.ConvShape, m WinoTile) int { return m.xi() * winoPlaneLd(s.C*s.OC) }

// WinogradFilter writes u (WinogradFilterSize values: u[ξ][o][c]) = G w[o][c] G^T
// for s's forward with m x m tiles and returns the rest of ws after u,
// or with flipped the input gradient's, u[ξ][c][o] of the flipped kernel
// w[o][c][2-i][2-j] (the forward over the output gradient with the
// channels swapped).
func (t *Team) WinogradFilter(s backend.ConvShape, m WinoTile, w, ws []float32, flipped bool) (u, rest []float32) {
	g := gemmOn(t)
	if len(w) != s.WeightSize() || s.K != 3 {
		panic(fmt.Sprintf("kernels: winograd filter of %+v: %d weights", s, len(w)))
	}
	u, rest = g.carve(ws, WinogradFilterSize(s, m))
	// U (ξ x pairs, planes winoPlaneLd apart) = K (ξ x 9) x the pairs'
	// kernels (9 x pairs): w's rows transposed, or flipped in (c, o) order.
	K := winoFilterMatrix(m)
	var B packerB = matB{b: w, ldb: 9, trans: true}
	if flipped {
		B = flippedPairsB{w: w, C: s.C, OC: s.OC}
	}
	g.gemm(m.xi(), s.C*s.OC, 9, 1, matA{a: K, lda: 9}, B, 0, u, winoPlaneLd(s.C*s.OC), rest)
	return u, rest
}

// flippedPairsB is op(B) of the input gradient's filter transform: column
// c*OC + o (channel pair in (c, o) order, as u[ξ][c][o]), row k the
// flipped kernel's value w[o][c][8-k].
type flippedPairsB struct {
	w     []float32
	C, OC int
}

func (x flippedPairsB) packB(g *gemmImpl, dst []float32, _ *packScratch, p0, kc, j0, nw int) {
	dst = dst[:roundUp(nw, gemmNR)*kc]
	full := 0
	if p0 == 0 && kc == 9 {
		// Whole panels: gather the 16 pairs' kernels (one per lane), then
		// reverse the 9 rows (the flip).
		var offs [gemmNR]int
		pair := pairAt(j0, x.C, x.OC)
		for full+gemmNR <= nw {
			for l := range offs {
				offs[l] = pair.weights()
				pair.next()
			}
			d := dst[full*kc : (full+gemmNR)*kc]
			g.transpose16Gather(d, x.w, &offs, kc)
			for p := range 4 {
				a, b := d[p*gemmNR:(p+1)*gemmNR], d[(8-p)*gemmNR:(9-p)*gemmNR]
				for l := range a {
					a[l], b[l] = b[l], a[l]
				}
			}
			full += gemmNR
		}
	}
	clear(dst[full*kc:])
	pair := pairAt(j0+full, x.C, x.OC)
	for j := full; j < nw; j++ {
		g := x.w[pair.weights() : pair.weights()+9]
		d := dst[j/gemmNR*gemmNR*kc+j%gemmNR:]
		for p := range kc {
			d[p*gemmNR] = g[8-p0-p]
		}
		pair.next()
	}
}

// pairCursor walks channel pairs in (c, o) order, pair j being input
// channel j/OC and output channel j%OC (the input gradient's filter
// order), without a division per pair.
type pairCursor struct{ c, o, C, OC int }

func pairAt(j, C, OC int) pairCursor { return pairCursor{c: j / OC, o: j % OC, C: C, OC: OC} }

// weights is where the pair's 3x3 kernel starts in w[o][c].
func (p pairCursor) weights() int { return (p.o*p.C + p.c) * 9 }

func (p *pairCursor) next() {
	if p.o++; p.o == p.OC {
		p.c, p.o = p.c+1, 0
	}
}

// ConvWinograd is Conv2d the Winograd way with m x m tiles over s.N
// images with the filter u from WinogradFilter (not flipped; or, flipped,
// with s the swapped shape: the input gradient from the output
// gradient); s must qualify (winoTileOK), and ws (what WinogradFilter
// left) must hold a band per worker (PlanConv's choice guarantees it).
// bias may be nil.
func (t *Team) ConvWinograd(s backend.ConvShape, m WinoTile, out []float32, in Image, u, bias, ws []float32) {
	gemmOn(t).winogradConv(s, m, out, in, u, bias, ws)
}

func (g gemmImpl) winogradConv(s backend.ConvShape, m WinoTile, out []float32, in Image, u, bias, ws []float32) {
	if !winoTileOK(s, m) || len(out) != s.OutSize() || in.Len() != s.InSize() || len(u) != WinogradFilterSize(s, m) || bias != nil && len(bias) != s.OC {
		panic(fmt.Sprintf("kernels: winograd conv %+v, %dx%d tiles: sizes out=%d in=%d u=%d bias=%d do not match", s, m, m, len(out), in.Len(), len(u), len(bias)))
	}
	// ws holds the filter already: the rows are planned on ws as a whole.
	R := winoForwardRows(s.Images(1), m, len(ws)+len(u))
	if R == 0 {
		if g.strict {
			panic(fmt.Sprintf("kernels: winograd conv %+v: workspace of %d values is too small", s, len(ws)+len(u)))
		}
		R = rowStep(s.W / int(m))
	}
	gm := newWinoGeom(s, m, R)
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
// the input transform, then per block of output channels the products
// (one per ξ) and their output transform into o, in the worker's buf.
func (g gemmImpl) winoForwardBand(gm winoGeom, b int, o, xp, u, bias, buf []float32, ps *packScratch) {
	C, OC, H, W, TW, m, nxi := gm.C, gm.OC, gm.H, gm.W, gm.TW, int(gm.m), gm.m.xi()
	tr := g.wino.of(gm.m)
	Wp := W + 2
	r0 := b * gm.R
	rows := min(gm.R, gm.TH-r0)
	T := rows * TW // a multiple of 16
	ldV, ldM, ldU := winoPlaneLd(C*T), winoPlaneLd(winoOutBlock*T), winoPlaneLd(C*OC)
	V, M := buf[:nxi*ldV], buf[nxi*ldV:nxi*(ldV+ldM)]
	// V[ξ] is C rows of T tiles as packed panels, per k slab of channels.
	for c0 := 0; c0 < C; c0 += gemmKC {
		kc := min(gemmKC, C-c0)
		tr.input(xp[c0*gm.plane()+m*r0*Wp:], Wp, winoWalkOf(m, TW, rows, Wp, kc, gm.plane()), V[c0*T:], ldV, kc*winoChunk, winoChunk)
	}
	// One operand for the band's ξ x OC/winoOutBlock products, in the
	// worker's scratch: a new one each would be an allocation each.
	B := &ps.pb
	B.n = T
	for o0 := 0; o0 < OC; o0 += winoOutBlock {
		n := min(winoOutBlock, OC-o0)
		for xi := range nxi {
			B.data = V[xi*ldV : xi*ldV+C*T]
			g.taskDirect(matA{a: u[xi*ldU+o0*C : xi*ldU+OC*C], lda: C}, B,
				1, 0, M[xi*ldM:xi*ldM+n*T], T, 0, C, 0, n, 0, T, nil, ps)
		}
		var bo []float32
		if bias != nil {
			bo = bias[o0 : o0+n]
		}
		tr.output(M, ldM, T, o[o0*H*W+m*r0*W:], W, winoWalkOf(m, TW, rows, W, n, H*W), bo)
	}
}

// panelsB is a k x n op(B) stored as the micro-kernels' packed panels, per
// k slab of gemmKC: slab p0's panels start at p0*n, panel q at q*kc*16.
type panelsB struct {
	data []float32
	n    int
}

// packB copies the panels; taskDirect reads them in place (view).
func (x *panelsB) packB(_ *gemmImpl, dst []float32, _ *packScratch, p0, kc, j0, nw int) {
	copy(dst, x.view(p0, kc, j0, nw))
}

// view is columns [j0,j0+nw) of slab p0 (kc deep) as packed panels; j0
// is a multiple of 16.
func (x *panelsB) view(p0, kc, j0, nw int) []float32 {
	off := p0*x.n + j0*kc
	return x.data[off : off+roundUp(nw, gemmNR)*kc]
}

// WinogradWeightGrad adds to du (WinogradFilterSize values: du[ξ][o][c],
// or du[ξ][c][o], winoGradByOut) the weight gradient's transformed
// products over s.N images: sum over tiles of dM[ξ][o][t] V[ξ][c][t]. ws must hold what PlanConv's choice
// guarantees; WinogradWeightGradAdd then adds G^T du G to dw.
func (t *Team) WinogradWeightGrad(s backend.ConvShape, m WinoTile, du, dout []float32, in Image, ws []float32) {
	gemmOn(t).winogradWeightGrad(s, m, du, dout, in, ws)
}

func (g gemmImpl) winogradWeightGrad(s backend.ConvShape, m WinoTile, du, dout []float32, in Image, ws []float32) {
	if !winoTileOK(s, m) || len(dout) != s.OutSize() || in.Len() != s.InSize() || len(du) != WinogradFilterSize(s, m) {
		panic(fmt.Sprintf("kernels: winograd weight gradient %+v, %dx%d tiles: sizes dout=%d in=%d du=%d do not match", s, m, m, len(dout), in.Len(), len(du)))
	}
	R := winoGradRows(s.Images(1), m, len(ws)+len(du))
	if R == 0 {
		if g.strict {
			panic(fmt.Sprintf("kernels: winograd weight gradient %+v: workspace of %d values is too small", s, len(ws)+len(du)))
		}
		R = winoGradUnit(s.W/int(m), m)
	}
	gm := newWinoGeom(s, m, R)
	C, OC, H, W, TW, nxi, mi := s.C, s.OC, s.H, s.W, gm.TW, m.xi(), int(m)
	tr := g.wino.of(m)
	T := gm.tiles()
	ld, ldU := winoGradLd(T, winoGradNeed(s.Images(1), m, R) <= len(ws)+len(du)), winoPlaneLd(C*OC)
	padded, rest := g.carve(ws, gm.padded())
	ldV, ldM := winoPlaneLd(C*ld), winoPlaneLd(OC*ld)
	V, rest := g.carve(rest, nxi*ldV)
	dM, rest := g.carve(rest, nxi*ldM)
	workers := winoWorkers()
	byOut := winoGradByOut(s)
	packSize, slab := winoGradPack(s, T), m.gradSlab()
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
					tr.input(xp[lo*gm.plane()+mi*r0*(W+2):], W+2, winoWalkOf(mi, TW, rows, W+2, c1-lo, gm.plane()), V[lo*ld:], ldV, winoChunk, ld)
				}
				if hi > C {
					o0 := max(lo, C) - C
					tr.grad(dy[o0*H*W+mi*r0*W:], W, winoWalkOf(mi, TW, rows, W, hi-C-o0, H*W), dM[o0*ld:], ldM, ld)
				}
			})
			// Phase 2: per ξ, in slabs of m.gradSlab() tiles, du[ξ] (OC x C)
			// += dM[ξ] (OC x Tb) V[ξ]^T, or duT[ξ] (C x OC) += V[ξ] dM[ξ]^T
			// (winoGradByOut).
			g.runTasks(min(workers, nxi), nxi, 0, packSize, rest, func(_, xi int, _, packB []float32, ps *packScratch) {
				dMx, Vx, dux := dM[xi*ldM:xi*ldM+OC*ld], V[xi*ldV:xi*ldV+C*ld], du[xi*ldU:xi*ldU+OC*C]
				A, i1, j1, ldc := matA{a: Vx, lda: ld}, C, OC, OC
				ps.mb = matB{b: dMx, ldb: ld, trans: true}
				if byOut {
					A, i1, j1, ldc = matA{a: dMx, lda: ld}, OC, C, C
					ps.mb = matB{b: Vx, ldb: ld, trans: true}
				}
				for k0 := 0; k0 < Tb; k0 += slab {
					g.taskDirect(A, &ps.mb, 1, 1, dux, ldc, k0, min(k0+slab, Tb), 0, i1, 0, j1, packB, ps)
				}
			})
		}
	}
}

// WinogradWeightGradAdd adds G^T du G to dw[o][c] (s's weights), du as
// WinogradWeightGrad leaves it, with ws (winoAddScratch per worker) as
// scratch.
func (t *Team) WinogradWeightGradAdd(s backend.ConvShape, m WinoTile, dw, du, ws []float32) {
	if len(dw) != s.WeightSize() || len(du) != WinogradFilterSize(s, m) || s.K != 3 {
		panic(fmt.Sprintf("kernels: winograd weight gradient of %+v: dw=%d du=%d", s, len(dw), len(du)))
	}
	// Per block of winoAddCols pairs: r (9 x pairs) = K^T (9 x ξ) du (ξ
	// x pairs), G^T du G of each pair (a column), then added to dw: pairs
	// in dw's (o, c) order, or (c, o) (winoGradByOut).
	g := gemmOn(t)
	K, nxi := winoFilterMatrix(m), m.xi()
	var kt [9 * winoXi4]float32
	KT := kt[:9*nxi]
	for xi := range nxi {
		for k := range 9 {
			KT[k*nxi+xi] = K[xi*9+k]
		}
	}
	ldU, pairs, byOut := winoPlaneLd(s.C*s.OC), s.OC*s.C, winoGradByOut(s)
	blocks := ceilDiv(pairs, winoAddCols)
	workers := min(winoWorkers(), blocks)
	per := ceilDiv(blocks, 4*workers) // blocks a task
	g.runTasks(workers, ceilDiv(blocks, per), 9*winoAddCols, winoAddPack(m), ws, func(_, task int, r, packB []float32, ps *packScratch) {
		for b := task * per; b < min(blocks, (task+1)*per); b++ {
			j0 := b * winoAddCols
			nw := min(winoAddCols, pairs-j0)
			ps.mb = matB{b: du[j0:], ldb: ldU}
			g.taskDirect(matA{a: KT, lda: nxi}, &ps.mb, 1, 0, r, winoAddCols, 0, nxi, 0, 9, 0, nw, packB, ps)
			addColumns(dw, r, j0, nw, byOut, s.C, s.OC)
		}
	})
}

// addColumns adds column j of r (9 rows of winoAddCols values), pair
// j0+j's G^T du G, to that pair's 3x3 weights in dw, for j < nw: pairs in
// dw's (o, c) order where byOut, else (c, o). Row slices of one length let
// the compiler drop the bounds checks from the loop.
func addColumns(dw, r []float32, j0, nw int, byOut bool, C, OC int) {
	r0 := r[:nw]
	r1, r2, r3 := r[winoAddCols:][:len(r0)], r[2*winoAddCols:][:len(r0)], r[3*winoAddCols:][:len(r0)]
	r4, r5, r6 := r[4*winoAddCols:][:len(r0)], r[5*winoAddCols:][:len(r0)], r[6*winoAddCols:][:len(r0)]
	r7, r8 := r[7*winoAddCols:][:len(r0)], r[8*winoAddCols:][:len(r0)]
	pair := pairAt(j0, C, OC) // where byOut is false
	for j := range r0 {
		at := (j0 + j) * 9
		if !byOut {
			at = pair.weights()
			pair.next()
		}
		d := dw[at : at+9 : at+9]
		d[0] += r0[j]
		d[1] += r1[j]
		d[2] += r2[j]
		d[3] += r3[j]
		d[4] += r4[j]
		d[5] += r5[j]
		d[6] += r6[j]
		d[7] += r7[j]
		d[8] += r8[j]
	}
}

// winoAddCols is the pairs of channels WinogradWeightGradAdd transforms
// at a time per worker, whose scratch is winoAddScratch: the block's
// results (9 x winoAddCols) and its packing buffer (winoAddPack).
const winoAddCols = 64

func winoAddScratch(m WinoTile) int { return 9*winoAddCols + winoAddPack(m) }

func winoAddPack(m WinoTile) int { return roundUp(winoAddCols, gemmNR)*m.xi() + gemmNR*gemmKC }
