//go:build amd64 && !noasm

package kernels

import (
	"github.com/memunet/memunet/backend"
	"golang.org/x/sys/cpu"
)

// halfPassesAsm reports whether norm16_amd64.s serves dt here: AVX2 for
// both types, and F16C for fp16.
func halfPassesAsm(dt backend.DType) bool {
	return cpu.X86.HasAVX2 && (dt == backend.BFloat16 || dt == backend.Float16 && cpu.X86.HasF16C)
}

// The wrappers below run the assembly over the longest prefix its steps
// cover (8 values, 16 for the sums) and return its length.

func affineHalfAsm(dt backend.DType, y, x []uint16, scale, shift float32) int {
	n := len(x) &^ 7
	if n == 0 {
		return 0
	}
	_ = y[n-1]
	if dt == backend.Float16 {
		affineF16(&y[0], &x[0], n, scale, shift)
	} else {
		affineBF16(&y[0], &x[0], n, scale, shift)
	}
	return n
}

func normGradHalfAsm(dt backend.DType, dx, g, x []uint16, mu, a, b, c float32) int {
	n := len(g) &^ 7
	if n == 0 {
		return 0
	}
	_, _ = dx[n-1], x[n-1]
	if dt == backend.Float16 {
		normGradF16(&dx[0], &g[0], &x[0], n, mu, a, b, c)
	} else {
		normGradBF16(&dx[0], &g[0], &x[0], n, mu, a, b, c)
	}
	return n
}

func shiftedSumsHalfAsm(dt backend.DType, xs []uint16, k float64, c *chains) int {
	n := len(xs) &^ 15
	if n == 0 {
		return 0
	}
	if dt == backend.Float16 {
		shiftedSumsF16(&xs[0], n, k, &c.a, &c.b)
	} else {
		shiftedSumsBF16(&xs[0], n, k, &c.a, &c.b)
	}
	return n
}

func gradSumsHalfAsm(dt backend.DType, g, x []uint16, mu float64, c *chains) int {
	n := len(g) &^ 15
	if n == 0 {
		return 0
	}
	_ = x[n-1]
	if dt == backend.Float16 {
		gradSumsF16(&g[0], &x[0], n, mu, &c.a, &c.b)
	} else {
		gradSumsBF16(&g[0], &x[0], n, mu, &c.a, &c.b)
	}
	return n
}

// In norm16_amd64.s; n is a positive multiple of 8 (16 for the sums).
//
//go:noescape
func affineF16(y, x *uint16, n int, scale, shift float32)

//go:noescape
func affineBF16(y, x *uint16, n int, scale, shift float32)

//go:noescape
func normGradF16(dx, dy, x *uint16, n int, mu, a, b, c float32)

//go:noescape
func normGradBF16(dx, dy, x *uint16, n int, mu, a, b, c float32)

//go:noescape
func shiftedSumsF16(xs *uint16, n int, k float64, s, q *[16]float64)

//go:noescape
func shiftedSumsBF16(xs *uint16, n int, k float64, s, q *[16]float64)

//go:noescape
func gradSumsF16(dy, x *uint16, n int, mu float64, a, b *[16]float64)

//go:noescape
func gradSumsBF16(dy, x *uint16, n int, mu float64, a, b *[16]float64)
