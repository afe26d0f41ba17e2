//go:build !amd64 || noasm

package kernels

// asmGemm reports that this build has no assembly micro-kernel.
func asmGemm() (gemmImpl, bool) { return gemmImpl{}, false }

// asmGemms: none in this build.
func asmGemms() []gemmImpl { return nil }
