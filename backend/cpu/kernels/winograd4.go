package kernels

// Winograd F(4x4,3x3): each 4x4 block of outputs is
//
//	Y = A^T [ sum_c (G g_oc G^T) ⊙ (B^T d_c B) ] A
//
// over the tile's 6x6 input window d_c, so the product over channels is
// 36 GEMMs of 36 multiply-adds per tile and channel pair where F(2x2,3x3)
// takes 64 (four of its tiles) and the direct convolution 144: 1.78x
// fewer than F(2x2,3x3), 4x fewer than direct. With the points 0, ±1, ±2
// and ∞ (Lavin and Gray):
//
//	B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
//	       0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//	G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6;
//	       1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//	A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
//
// The input and output transforms are written with multiplications by
// powers of two only (winoIn4, winoOut4), which are exact, so a fused
// multiply-add gives the same bits as the product and the sum apart: the
// assembly fuses them, the Go reference does not, and the bits agree
// (tested); so does the weight gradient's dM = A dY A^T (winoGradCol4).
// Each applies the 1-D form along columns first (down the window's rows:
// v = B^T d, P = A^T M, A dY), then along rows. The weight gradient sums
// its tiles in slabs of winoGradSlab4.
//
// Lanes. A chunk's 16 tiles are two halves of 8, and within a half tile q
// sits in lane winoLane4(q): the even tiles in lanes 0-3, the odd ones in
// 4-7. Four consecutive 8-float vectors of a window row (two tiles each)
// transpose within their 128-bit halves into the 4 columns of those
// lanes, and back, so the AVX2 transforms need no shuffle across halves
// but for the window's last two columns. The order is the transforms'
// alone: the products treat every lane alike.
//
// Error: the filter matrix's entries (winoFilterMatrix) are rounded to
// float32 (1/6, 1/12 and 1/24 are not binary fractions), each input value
// passes through up to 6 roundings in the input transform, one per
// channel in the product (and one per k slab), up to 6 in the output
// transform and 1 adding the bias, so |Winograd - exact| <= (C + 32 +
// slabs)·u·E per output, E as in winograd.go with |B^T|, |G| and |A^T| of
// these matrices; the weight gradient's (64 + slabs + 64)·u·E with its
// E (TestWinogradErrorBound's forms). Their magnification is larger than
// F(2x2,3x3)'s (entries up to 5, 8 and 1/4): TestWinograd4ErrorBound
// measures the errors against the direct convolution's at the seed
// UNet's widths.

// winoG4 is F(4x4,3x3)'s G.
var winoG4 = [6][3]float64{
	{1.0 / 4, 0, 0},
	{-1.0 / 6, -1.0 / 6, -1.0 / 6},
	{-1.0 / 6, 1.0 / 6, -1.0 / 6},
	{1.0 / 24, 1.0 / 12, 1.0 / 6},
	{1.0 / 24, -1.0 / 12, 1.0 / 6},
	{0, 0, 1},
}

// winoXi4 is the positions of an F(4x4,3x3) transformed tile.
const winoXi4 = 36

// winoLane4 is the lane of a chunk's tile l in the F(4x4,3x3) operands.
func winoLane4(l int) int {
	q := l % 8
	return l/8*8 + q%2*4 + q/2
}

// winoIn4 is B^T x of one column (or row) of a window: six values in, six
// out, multiplying by powers of two only.
func winoIn4(x *[6]float32) (h [6]float32) {
	d02, d42 := x[0]-x[2], x[4]-x[2]
	d13, d53 := x[1]-x[3], x[5]-x[3]
	t0, t1 := x[4]-4*x[2], x[3]-4*x[1]
	h[0] = d42 + 4*d02
	h[1] = t0 + t1
	h[2] = t0 - t1
	h[3] = d42 - 2*d13
	h[4] = d42 + 2*d13
	h[5] = d53 + 4*d13
	return h
}

// winoOut4 is A^T p of six values: four out.
func winoOut4(p *[6]float32) (y [4]float32) {
	s12, d12 := p[1]+p[2], p[1]-p[2]
	s34, d34 := p[3]+p[4], p[3]-p[4]
	y[0] = (p[0] + s12) + s34
	y[1] = d12 + 2*d34
	y[2] = s12 + 4*s34
	y[3] = (d12 + 8*d34) + p[5]
	return y
}

// winoInput4Go is the pure-Go winoInputKernel of F(4x4,3x3): tile l's
// 6x6 window at src[wk.at(c, k, l) + r*stride + j], V[ξ] (ξ = 6i+j) at
// dst[c*dstChan + ξ*xiStride + k*panelStride + winoLane4(l)].
func winoInput4Go(src []float32, stride int, wk winoWalk, dst []float32, xiStride, panelStride, dstChan int) {
	wk.eachTile(func(c, k, l, base int) {
		var v [6][6]float32 // v[i][x]: column x's transform
		for x := range 6 {
			var col [6]float32
			for r := range 6 {
				col[r] = src[base+r*stride+x]
			}
			h := winoIn4(&col)
			for i := range 6 {
				v[i][x] = h[i]
			}
		}
		o := c*dstChan + k*panelStride + winoLane4(l)
		for i := range 6 {
			h := winoIn4(&v[i])
			for j := range 6 {
				dst[(6*i+j)*xiStride+o] = h[j]
			}
		}
	})
}

// winoOutput4Go is the pure-Go winoOutputKernel of F(4x4,3x3): M[ξ] of
// tile l at m[c*mChan + ξ*xiStride + 16*k + winoLane4(l)], its 4x4
// outputs to dst[wk.at(c, k, l) + a*stride + b], plus bias[c] where bias
// is not nil.
func winoOutput4Go(m []float32, xiStride, mChan int, dst []float32, stride int, wk winoWalk, bias []float32) {
	wk.eachTile(func(c, k, l, base int) {
		o := c*mChan + 16*k + winoLane4(l)
		var p [4][6]float32 // p[a][j]: column j's transform
		for j := range 6 {
			var col [6]float32
			for i := range 6 {
				col[i] = m[(6*i+j)*xiStride+o]
			}
			y := winoOut4(&col)
			for a := range 4 {
				p[a][j] = y[a]
			}
		}
		for a := range 4 {
			y := winoOut4(&p[a])
			for b := range 4 {
				if bias != nil {
					y[b] += bias[c]
				}
				dst[base+a*stride+b] = y[b]
			}
		}
	})
}

// winoGradCol4 is A y of one column (or row) of a tile's output
// gradient: four values in, six out (the adjoint of winoOut4).
func winoGradCol4(y *[4]float32) (q [6]float32) {
	e, o := y[0]+y[2], y[1]+y[3]
	e4, o4 := y[0]+4*y[2], y[1]+4*y[3]
	q[0] = y[0]
	q[1] = e + o
	q[2] = e - o
	q[3] = e4 + 2*o4
	q[4] = e4 - 2*o4
	q[5] = y[3]
	return q
}

// winoGrad4Go is the pure-Go winoGradKernel of F(4x4,3x3), dM = A dY A^T:
// tile l's dY[a][b] at src[wk.at(c, k, l) + a*stride + b], its dM[ξ]
// (ξ = 6i+j) at dst[c*dstChan + ξ*xiStride + 16*k + winoLane4(l)].
func winoGrad4Go(src []float32, stride int, wk winoWalk, dst []float32, xiStride, dstChan int) {
	wk.eachTile(func(c, k, l, base int) {
		var q [6][4]float32 // q[i][b]: column b's transform
		for b := range 4 {
			var col [4]float32
			for a := range 4 {
				col[a] = src[base+a*stride+b]
			}
			t := winoGradCol4(&col)
			for i := range 6 {
				q[i][b] = t[i]
			}
		}
		o := c*dstChan + 16*k + winoLane4(l)
		for i := range 6 {
			t := winoGradCol4(&q[i])
			for j := range 6 {
				dst[(6*i+j)*xiStride+o] = t[j]
			}
		}
	})
}
