//go:build !amd64 || noasm

package kernels

import "github.com/memunet/memunet/backend"

// asmElementwise: none in this build, so the *Asm wrappers below, which
// would take a prefix in assembly, are never called.
func asmElementwise() (elementwiseImpl, bool) { return elementwiseImpl{}, false }

func reluAsm(y, x []float32) int                                               { return 0 }
func reluBackwardAsm(dx, dy, y []float32) int                                  { return 0 }
func affineAsm(y, x []float32, scale, shift float32) int                       { return 0 }
func normGradAsm(dx, g, x []float32, mu, a, b, c float32) int                  { return 0 }
func addAsm(z, x, y []float32) int                                             { return 0 }
func relu16Asm(y, x []uint16, inf uint16) int                                  { return 0 }
func reluBack16Asm(dx, dy, y []uint16, inf uint16) int                         { return 0 }
func reluMaskAsm(mask []uint8, y []float32) int                                { return 0 }
func reluBackMaskAsm(dx, dy []float32, mask []uint8) int                       { return 0 }
func reluMask16Asm(mask []uint8, y []uint16, inf uint16) int                   { return 0 }
func reluBackMask16Asm(dx, dy []uint16, mask []uint8) int                      { return 0 }
func shiftedSumsAsm(xs []float32, k float64, c *chains) int                    { return 0 }
func gradSumsAsm(g, x []float32, mu float64, c *chains) int                    { return 0 }
func affineReLUMaskAsm(y, x []float32, mask []uint8, scale, shift float32) int { return 0 }
func reluBackMaskGradSumsAsm(dx, dy, x []float32, mask []uint8, mu float64, c *chains) int {
	return 0
}
func adamAsm(a *backend.AdamStep, w, g, m, v []float32) int         { return 0 }
func upsampleRowAsm(dst, r0, r1 []float32, a, b float32) int        { return 0 }
func upsampleRowAdjointAsm(dst, gu, ge, go_, gd []float32) int      { return 0 }
func maxPool2RowAsm(y []float32, idx []uint8, r0, r1 []float32) int { return 0 }
func maxPool2BackRowAsm(r0, r1, g []float32, idx []uint8) int       { return 0 }
