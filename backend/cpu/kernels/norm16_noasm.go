//go:build !amd64 || noasm

package kernels

import "github.com/memunet/memunet/backend"

// halfPassesAsm: none in this build.
func halfPassesAsm(dt backend.DType) bool { return false }

func affineHalfAsm(dt backend.DType, y, x []uint16, scale, shift float32) int { return 0 }
func normGradHalfAsm(dt backend.DType, dx, g, x []uint16, mu, a, b, c float32) int {
	return 0
}
func shiftedSumsHalfAsm(dt backend.DType, xs []uint16, k float64, c *chains) int { return 0 }
func gradSumsHalfAsm(dt backend.DType, g, x []uint16, mu float64, c *chains) int { return 0 }
