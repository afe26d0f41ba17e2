package kernels

import (
	"fmt"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// GEMM benchmarks by size class, reporting GFLOP/s (2*m*n*k per product).
// The classes are the UNet's convolution GEMMs: per image, forward
// out (OC x P) = W (OC x C*K*K) x col (C*K*K x P), backward
// dW += dout (OC x P) x col^T and dcol (C*K*K x P) = W^T x dout.
// Run e.g. go test -run XXX -bench Sgemm -benchtime 3x ./model/kernels/
var gemmBenchSizes = []struct {
	name           string
	transA, transB bool
	m, n, k        int
}{
	{"fwd_64x16384x576", false, false, 64, 16384, 576}, // level-1 conv, 64 ch at 128x128
	{"fwd_16x16384x48", false, false, 16, 16384, 48},   // small-k class (first conv has k = 3*9 = 27)
	{"fwd_16x16384x144", false, false, 16, 16384, 144}, // base-16 conv at 128x128
	{"fwd_256x64x2304", false, false, 256, 64, 2304},   // bottleneck conv at 8x8
	{"sq_256x256x2304", false, false, 256, 256, 2304},  // square-ish
	{"dw_64x576x16384", false, true, 64, 576, 16384},   // dW += dout x col^T
	{"dcol_576x16384x64", true, false, 576, 16384, 64}, // dcol = W^T x dout
	{"dcol_144x16384x16", true, false, 144, 16384, 16}, // base-16 dcol
	{"sq_512x512x512_TT", true, true, 512, 512, 512},   // both transposed
}

func BenchmarkSgemm(b *testing.B) {
	impls := gemmImpls(b)
	for _, bs := range gemmBenchSizes {
		r := seedFor("bench " + bs.name)
		a, bb := randSlice(r, bs.m*bs.k), randSlice(r, bs.k*bs.n)
		c := make([]float32, bs.m*bs.n)
		lda, ldb := bs.k, bs.n
		if bs.transA {
			lda = bs.m
		}
		if bs.transB {
			ldb = bs.k
		}
		flops := 2 * float64(bs.m) * float64(bs.n) * float64(bs.k)
		for _, g := range impls {
			b.Run(fmt.Sprintf("%s/%s", bs.name, g.name), func(b *testing.B) {
				for range b.N {
					g.sgemm(bs.transA, bs.transB, bs.m, bs.n, bs.k, 1, a, lda, bb, ldb, 0, c, bs.n)
				}
				reportGFLOPs(b, flops)
			})
		}
		b.Run(bs.name+"/gonum", func(b *testing.B) {
			var impl gonum.Implementation
			tA, tB := blas.NoTrans, blas.NoTrans
			if bs.transA {
				tA = blas.Trans
			}
			if bs.transB {
				tB = blas.Trans
			}
			for range b.N {
				impl.Sgemm(tA, tB, bs.m, bs.n, bs.k, 1, a, lda, bb, ldb, 0, c, bs.n)
			}
			reportGFLOPs(b, flops)
		})
	}
}
