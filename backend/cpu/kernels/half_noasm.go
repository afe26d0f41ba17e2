//go:build !amd64 || noasm

package kernels

// No assembly conversions in this build.
func asmHalfImpls() []halfImpl { return nil }

func asmHalf() (halfImpl, bool) { return halfImpl{}, false }
