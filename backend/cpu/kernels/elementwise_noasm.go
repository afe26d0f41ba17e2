//go:build !amd64 || noasm

package kernels

import "github.com/memunet/memunet/backend"

// asmElementwise: none in this build.
func asmElementwise() (elementwiseImpl, bool) { return elementwiseImpl{}, false }

// shiftedSumsAsm and gradSumsAsm are never called in this build.
func shiftedSumsAsm(xs []float32, k float64, c *chains) { shiftedSumsGo(xs, k, &c.a, &c.b) }
func gradSumsAsm(g, x []float32, mu float64, c *chains) { gradSumsGo(g, x, mu, &c.a, &c.b) }

// adamAsm is never called in this build.
func adamAsm(a *backend.AdamStep, w, g, m, v []float32) { adamGo(*a, w, g, m, v) }

// The upsampling rows have no assembly in this build.
func upsampleRowAsm(dst, r0, r1 []float32, a, b float32) int   { return 0 }
func upsampleRowAdjointAsm(dst, gu, ge, go_, gd []float32) int { return 0 }

// The pooling rows have no assembly in this build.
func maxPool2RowAsm(y []float32, idx []uint8, r0, r1 []float32) int { return 0 }
func maxPool2BackRowAsm(r0, r1, g []float32, idx []uint8) int       { return 0 }
