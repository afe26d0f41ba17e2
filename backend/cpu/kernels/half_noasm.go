//go:build !amd64 || noasm

package kernels

// asmHalf: no assembly conversions in this build.
func asmHalf() (halfImpl, bool) { return halfImpl{}, false }
