//go:build !amd64 || noasm

package kernels

// asmElementwise: none in this build.
func asmElementwise() (elementwiseImpl, bool) { return elementwiseImpl{}, false }
