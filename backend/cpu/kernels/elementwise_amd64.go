//go:build amd64 && !noasm

package kernels

import (
	"github.com/memunet/memunet/backend"
	"golang.org/x/sys/cpu"
)

// asmElementwise is the AVX2 implementation where the CPU has AVX2.
func asmElementwise() (elementwiseImpl, bool) {
	return elementwiseImpl{name: "avx2", avx2: true}, cpu.X86.HasAVX2
}

// The wrappers below run the assembly over the longest prefix its blocks
// cover (8 values, 16 for the 16-bit passes and the sums) and return its
// length; the caller's Go version does the rest.

func reluAsm(y, x []float32) int {
	n := len(x) &^ 7
	if n > 0 {
		_ = y[n-1]
		reluAVX2(&y[0], &x[0], n)
	}
	return n
}

func reluBackwardAsm(dx, dy, y []float32) int {
	n := len(y) &^ 7
	if n > 0 {
		_, _ = dx[n-1], dy[n-1]
		reluBackwardAVX2(&dx[0], &dy[0], &y[0], n)
	}
	return n
}

func affineAsm(y, x []float32, scale, shift float32) int {
	n := len(x) &^ 7
	if n > 0 {
		_ = y[n-1]
		affineAVX2(&y[0], &x[0], n, scale, shift)
	}
	return n
}

func normGradAsm(dx, g, x []float32, mu, a, b, c float32) int {
	n := len(g) &^ 7
	if n > 0 {
		_, _ = dx[n-1], x[n-1]
		normGradAVX2(&dx[0], &g[0], &x[0], n, mu, a, b, c)
	}
	return n
}

func addAsm(z, x, y []float32) int {
	n := len(x) &^ 7
	if n > 0 {
		_, _ = z[n-1], y[n-1]
		addAVX2(&z[0], &x[0], &y[0], n)
	}
	return n
}

func relu16Asm(y, x []uint16, inf uint16) int {
	n := len(x) &^ 15
	if n > 0 {
		_ = y[n-1]
		relu16AVX2(&y[0], &x[0], n, inf)
	}
	return n
}

func reluBack16Asm(dx, dy, y []uint16, inf uint16) int {
	n := len(y) &^ 15
	if n > 0 {
		_, _ = dx[n-1], dy[n-1]
		reluBack16AVX2(&dx[0], &dy[0], &y[0], n, inf)
	}
	return n
}

func reluMaskAsm(mask []uint8, y []float32) int {
	n := len(y) &^ 7
	if n > 0 {
		_ = mask[n/8-1]
		reluMaskAVX2(&mask[0], &y[0], n)
	}
	return n
}

func reluBackMaskAsm(dx, dy []float32, mask []uint8) int {
	n := len(dy) &^ 7
	if n > 0 {
		_, _ = dx[n-1], mask[n/8-1]
		reluBackMaskAVX2(&dx[0], &dy[0], &mask[0], n)
	}
	return n
}

func reluMask16Asm(mask []uint8, y []uint16, inf uint16) int {
	n := len(y) &^ 15
	if n > 0 {
		_ = mask[n/8-1]
		reluMask16AVX2(&mask[0], &y[0], n, inf)
	}
	return n
}

func reluBackMask16Asm(dx, dy []uint16, mask []uint8) int {
	n := len(dy) &^ 15
	if n > 0 {
		_, _ = dx[n-1], mask[n/8-1]
		reluBackMask16AVX2(&dx[0], &dy[0], &mask[0], n)
	}
	return n
}

func shiftedSumsAsm(xs []float32, k float64, c *chains) int {
	n := len(xs) &^ 15
	if n > 0 {
		shiftedSumsAVX2(&xs[0], n, k, &c.a, &c.b)
	}
	return n
}

func gradSumsAsm(g, x []float32, mu float64, c *chains) int {
	n := len(g) &^ 15
	if n > 0 {
		_ = x[n-1]
		gradSumsAVX2(&g[0], &x[0], n, mu, &c.a, &c.b)
	}
	return n
}

func affineReLUMaskAsm(y, x []float32, mask []uint8, scale, shift float32) int {
	n := len(x) &^ 7
	if n == 0 {
		return 0
	}
	_ = y[n-1]
	if mask == nil {
		affineReLUMaskAVX2(&y[0], &x[0], nil, n, scale, shift, 0)
		return n
	}
	_ = mask[n/8-1]
	affineReLUMaskAVX2(&y[0], &x[0], &mask[0], n, scale, shift, 1)
	return n
}

func reluBackMaskGradSumsAsm(dx, dy, x []float32, mask []uint8, mu float64, c *chains) int {
	n := len(dy) &^ 15
	if n > 0 {
		_, _, _ = dx[n-1], x[n-1], mask[n/8-1]
		reluBackMaskGradSumsAVX2(&dx[0], &dy[0], &x[0], &mask[0], n, mu, &c.a, &c.b)
	}
	return n
}

// affineReLUMaskAVX2 is affineAVX2, reluAVX2 and (withMask 1) reluMaskAVX2
// of each 8 values in registers; n a positive multiple of 8.
//
//go:noescape
func affineReLUMaskAVX2(y, x *float32, mask *uint8, n int, scale, shift float32, withMask int)

// reluBackMaskGradSumsAVX2 is reluBackMaskAVX2 then gradSumsAVX2 of each
// 16 values; n a positive multiple of 16.
//
//go:noescape
func reluBackMaskGradSumsAVX2(dx, dy, x *float32, mask *uint8, n int, mu float64, a, b *[16]float64)

// In elementwise_amd64.s; n is a positive multiple of 8.
//
//go:noescape
func reluAVX2(y, x *float32, n int)

//go:noescape
func reluBackwardAVX2(dx, dy, y *float32, n int)

//go:noescape
func affineAVX2(y, x *float32, n int, scale, shift float32)

//go:noescape
func normGradAVX2(dx, dy, x *float32, n int, mu, a, b, c float32)

//go:noescape
func addAVX2(z, x, y *float32, n int)

// In elementwise_amd64.s; n is a positive multiple of 16.
//
//go:noescape
func shiftedSumsAVX2(xs *float32, n int, k float64, s, q *[16]float64)

//go:noescape
func gradSumsAVX2(dy, x *float32, n int, mu float64, a, b *[16]float64)

// In elementwise_amd64.s; n is a positive multiple of 16.
//
//go:noescape
func relu16AVX2(y, x *uint16, n int, inf uint16)

//go:noescape
func reluBack16AVX2(dx, dy, y *uint16, n int, inf uint16)

//go:noescape
func reluMaskAVX2(mask *uint8, y *float32, n int)

//go:noescape
func reluBackMaskAVX2(dx, dy *float32, mask *uint8, n int)

//go:noescape
func reluMask16AVX2(mask *uint8, y *uint16, n int, inf uint16)

//go:noescape
func reluBackMask16AVX2(dx, dy *uint16, mask *uint8, n int)

func adamAsm(a *backend.AdamStep, w, g, m, v []float32) int {
	n := len(w) &^ 7
	if n == 0 {
		return 0
	}
	_, _, _ = g[n-1], m[n-1], v[n-1]
	wd := 0
	if a.WeightDecay != 0 {
		wd = 1
	}
	adamAVX2(&w[0], &g[0], &m[0], &v[0], n, a, wd)
	return n
}

// adamAVX2 is in elementwise_amd64.s; it reads a's fields at their offsets
// (float32s in declaration order: StepSize, SqrtBC2, Beta1, Beta2,
// OneMinusBeta1, OneMinusBeta2, Eps, WeightDecay).
//
//go:noescape
func adamAVX2(w, grad, m, v *float32, n int, a *backend.AdamStep, wd int)

// upsampleRowAsm writes outputs 2j+1 and 2j+2 for j < W-1 in AVX2 blocks
// of 8 (each needs cur[j+8]) and returns W-1, or 0 where W < 9: the last
// block ends at W-1, overlapping the one before where W-1 is not a
// multiple of 8 (it writes the same values again), so the pure-Go tail
// is the two edge outputs only.
func upsampleRowAsm(dst, r0, r1 []float32, a, b float32) int {
	W := len(r0)
	if W < 9 {
		return 0
	}
	n := (W - 1) &^ 7
	_, _ = r1[W-1], dst[2*W-2]
	upsampleRowAVX2(&dst[1], &r0[0], &r1[0], n/8, a, b)
	if n < W-1 {
		s := W - 9
		upsampleRowAVX2(&dst[1+2*s], &r0[s], &r1[s], 1, a, b)
	}
	return W - 1
}

// upsampleRowAdjointAsm writes dst[j] for 1 <= j < the value it returns
// (W-1, or 0 where W < 10) in AVX2 blocks of 8 whose columns 2j-1 ..
// 2j+16 lie inside the row, the last ending at W-1 and overlapping the
// one before where needed (the same values again).
func upsampleRowAdjointAsm(dst, gu, ge, go_, gd []float32) int {
	W := len(dst)
	if W < 10 {
		return 0
	}
	blocks := (W - 2) / 8 // 1 + 8*blocks <= W-1, so column 2j+17 <= 2W-1
	end := 1 + 8*blocks
	_, _, _, _, _ = dst[W-2], gu[2*W-1], ge[2*W-1], go_[2*W-1], gd[2*W-1]
	upsampleAdjointAVX2(&dst[1], &gu[1], &ge[1], &go_[1], &gd[1], blocks)
	if end < W-1 {
		s := W - 9
		upsampleAdjointAVX2(&dst[s], &gu[2*s-1], &ge[2*s-1], &go_[2*s-1], &gd[2*s-1], 1)
	}
	return W - 1
}

// In elementwise_amd64.s.
//
//go:noescape
func upsampleRowAVX2(dst, r0, r1 *float32, blocks int, a, b float32)

//go:noescape
func upsampleAdjointAVX2(dst, gu, ge, gO, gd *float32, blocks int)

// maxPool2RowAsm does the windows in whole blocks of 8 in AVX2 and
// returns how many.
func maxPool2RowAsm(y []float32, idx []uint8, r0, r1 []float32) int {
	n := len(y) &^ 7
	if n == 0 {
		return 0
	}
	_, _ = r0[2*n-1], r1[2*n-1]
	var at *uint8
	if idx != nil {
		_ = idx[n-1]
		at = &idx[0]
	}
	maxPool2RowAVX2(&y[0], at, &r0[0], &r1[0], n/8)
	return n
}

// maxPool2BackRowAsm does the windows in whole blocks of 8 in AVX2 and
// returns how many.
func maxPool2BackRowAsm(r0, r1, g []float32, idx []uint8) int {
	n := len(g) &^ 7
	if n == 0 {
		return 0
	}
	_, _, _ = r0[2*n-1], r1[2*n-1], idx[n-1]
	maxPool2BackRowAVX2(&r0[0], &r1[0], &g[0], &idx[0], n/8)
	return n
}

// In elementwise_amd64.s; idx may be nil (no positions stored).
//
//go:noescape
func maxPool2RowAVX2(y *float32, idx *uint8, r0, r1 *float32, blocks int)

//go:noescape
func maxPool2BackRowAVX2(r0, r1, grad *float32, idx *uint8, blocks int)
