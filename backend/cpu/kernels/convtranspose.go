package kernels

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// UpConvWorkspace is the float32 count the fast kernels need: one image's
// (OC*4, H*W) product before it is interleaved into (OC,2H,2W), then the
// GEMMs' packing scratch (see ConvWorkspace).
func UpConvWorkspace(s backend.UpConvShape) int {
	HW, OC4 := s.H*s.W, s.OC*4
	return OC4*HW + max(gemmScratchSize(OC4, HW, s.C, false), gemmScratchSize(s.C, OC4, HW, false), gemmScratchSize(s.C, HW, OC4, false))
}

func checkUpConv(s backend.UpConvShape, out, in, w, bias, ws int, hasBias bool) {
	if s.N <= 0 || s.C <= 0 || s.H <= 0 || s.W <= 0 || s.OC <= 0 {
		panic(fmt.Sprintf("kernels: bad transposed conv shape %+v", s))
	}
	if out != s.OutSize() || in != s.InSize() || w != s.WeightSize() || (hasBias && bias != s.OC) || ws < UpConvWorkspace(s) {
		panic(fmt.Sprintf("kernels: transposed conv %+v: sizes out=%d in=%d w=%d bias=%d ws=%d do not match", s, out, in, w, bias, ws))
	}
}

// UpConvNaive computes
//
//	out[n,o,2y+a,2x+b] = bias[o] + sum_c in[n,c,y,x] * w[c,o,a,b]
//
// bias may be nil.
func UpConvNaive[T float32 | float64](s backend.UpConvShape, out, in, w, bias []T) {
	checkUpConv(s, len(out), len(in), len(w), len(bias), UpConvWorkspace(s), bias != nil)
	W2 := 2 * s.W
	for n := 0; n < s.N; n++ {
		for o := 0; o < s.OC; o++ {
			for y := 0; y < 2*s.H; y++ {
				for x := 0; x < W2; x++ {
					var acc T
					if bias != nil {
						acc = bias[o]
					}
					for c := 0; c < s.C; c++ {
						acc += in[((n*s.C+c)*s.H+y/2)*s.W+x/2] * w[((c*s.OC+o)*2+y%2)*2+x%2]
					}
					out[((n*s.OC+o)*2*s.H+y)*W2+x] = acc
				}
			}
		}
	}
}

// UpConvBackwardNaive computes
//
//	din[n,c,y,x]  = sum_{o,a,b} w[c,o,a,b] * dout[n,o,2y+a,2x+b]   (overwritten; skipped if din is nil)
//	dw[c,o,a,b]  += sum_{n,y,x} in[n,c,y,x] * dout[n,o,2y+a,2x+b]
//	dbias[o]     += sum_{n,y,x} dout[n,o,y,x]                     (skipped if dbias is nil)
func UpConvBackwardNaive[T float32 | float64](s backend.UpConvShape, din, dw, dbias, dout, in, w []T) {
	checkUpConv(s, len(dout), len(in), len(w), len(dbias), UpConvWorkspace(s), dbias != nil)
	if din != nil && len(din) != len(in) || len(dw) != len(w) {
		panic("kernels: transposed conv backward: din/dw sizes do not match in/w")
	}
	clear(din)
	W2 := 2 * s.W
	for n := 0; n < s.N; n++ {
		for o := 0; o < s.OC; o++ {
			for y := 0; y < 2*s.H; y++ {
				for x := 0; x < W2; x++ {
					g := dout[((n*s.OC+o)*2*s.H+y)*W2+x]
					if dbias != nil {
						dbias[o] += g
					}
					for c := 0; c < s.C; c++ {
						ii := ((n*s.C+c)*s.H+y/2)*s.W + x/2
						wi := ((c*s.OC+o)*2+y%2)*2 + x%2
						dw[wi] += in[ii] * g
						if din != nil {
							din[ii] += w[wi] * g
						}
					}
				}
			}
		}
	}
}

// UpConv is the fast forward kernel: per image one GEMM
// tmp (OC*4, H*W) = w^T (OC*4, C) x in_n (C, H*W) into ws, then tmp is
// interleaved into out_n (OC,2H,2W) with the bias added.
func UpConv(s backend.UpConvShape, out, in, w, bias, ws []float32) {
	(*Team)(nil).UpConv(s, out, in, w, bias, ws)
}

// UpConv is the package's UpConv on the team.
func (t *Team) UpConv(s backend.UpConvShape, out, in, w, bias, ws []float32) {
	upConv(gemmOn(t), s, out, in, w, bias, ws)
}

func upConv(gemm gemmImpl, s backend.UpConvShape, out, in, w, bias, ws []float32) {
	checkUpConv(s, len(out), len(in), len(w), len(bias), len(ws), bias != nil)
	HW, OC4 := s.H*s.W, s.OC*4
	for n := 0; n < s.N; n++ {
		x := in[n*s.C*HW : (n+1)*s.C*HW]
		tmp, scratch := ws[:OC4*HW], ws[OC4*HW:]
		gemm.gemm(OC4, HW, s.C, 1, matA{w, OC4, true}, matB{x, HW, false}, 0, tmp, HW, scratch)
		o := out[n*OC4*HW : (n+1)*OC4*HW]
		gemm.team.For(s.OC, 1, func(lo, hi int) {
			for oc := lo; oc < hi; oc++ {
				var b float32
				if bias != nil {
					b = bias[oc]
				}
				plane := o[oc*4*HW : (oc+1)*4*HW]
				for ab := 0; ab < 4; ab++ {
					a, bb := ab/2, ab%2
					src := tmp[(oc*4+ab)*HW : (oc*4+ab+1)*HW]
					for y := 0; y < s.H; y++ {
						dst := plane[(2*y+a)*2*s.W:]
						for xx, v := range src[y*s.W : (y+1)*s.W] {
							dst[2*xx+bb] = v + b
						}
					}
				}
			}
		})
	}
}

// UpConvBackward is the fast backward kernel (see UpConvBackwardNaive): per
// image dout_n is gathered into ws as (OC*4, H*W), then dw += in_n x ws^T and
// din_n = w x ws. din and dbias may be nil.
func UpConvBackward(s backend.UpConvShape, din, dw, dbias, dout, in, w, ws []float32) {
	(*Team)(nil).UpConvBackward(s, din, dw, dbias, dout, in, w, ws)
}

// UpConvBackward is the package's UpConvBackward on the team.
func (t *Team) UpConvBackward(s backend.UpConvShape, din, dw, dbias, dout, in, w, ws []float32) {
	upConvBackward(gemmOn(t), s, din, dw, dbias, dout, in, w, ws)
}

func upConvBackward(gemm gemmImpl, s backend.UpConvShape, din, dw, dbias, dout, in, w, ws []float32) {
	checkUpConv(s, len(dout), len(in), len(w), len(dbias), len(ws), dbias != nil)
	if din != nil && len(din) != len(in) || len(dw) != len(w) {
		panic("kernels: transposed conv backward: din/dw sizes do not match in/w")
	}
	HW, OC4 := s.H*s.W, s.OC*4
	for n := 0; n < s.N; n++ {
		g := dout[n*OC4*HW : (n+1)*OC4*HW]
		tmp, scratch := ws[:OC4*HW], ws[OC4*HW:]
		gemm.team.For(s.OC, 1, func(lo, hi int) {
			for oc := lo; oc < hi; oc++ {
				plane := g[oc*4*HW : (oc+1)*4*HW]
				var sum float32
				for ab := 0; ab < 4; ab++ {
					a, bb := ab/2, ab%2
					dst := tmp[(oc*4+ab)*HW : (oc*4+ab+1)*HW]
					for y := 0; y < s.H; y++ {
						src := plane[(2*y+a)*2*s.W:]
						row := dst[y*s.W : (y+1)*s.W]
						for xx := range row {
							row[xx] = src[2*xx+bb]
						}
					}
				}
				if dbias != nil {
					for _, v := range plane {
						sum += v
					}
					dbias[oc] += sum
				}
			}
		})
		x := in[n*s.C*HW : (n+1)*s.C*HW]
		gemm.gemm(s.C, OC4, HW, 1, matA{x, HW, false}, matB{tmp, HW, true}, 1, dw, OC4, scratch)
		if din != nil {
			gemm.gemm(s.C, HW, OC4, 1, matA{w, OC4, false}, matB{tmp, HW, false}, 0, din[n*s.C*HW:(n+1)*s.C*HW], HW, scratch)
		}
	}
}
