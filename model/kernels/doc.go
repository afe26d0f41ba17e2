// Package kernels holds memunet's compute kernels over plain slices in NCHW
// layout: convolution (im2col + GEMM), transposed convolution, and the
// parallel loop helper the layers use.
//
// Every fast kernel has a naive reference beside it (suffix Naive), written as
// the plain loop it computes and generic over float32 and float64 so the same
// code serves as the oracle for the fast kernel and, in float64, for finite
// difference checks. Tests hold each fast kernel to its reference on random
// inputs of odd sizes.
//
// Memory: kernels never allocate tensors. Outputs, gradients and workspaces
// are supplied by the caller (from the memory pool); the workspace size each
// kernel needs is given by a method of its shape type. Gradient outputs of
// parameters (dw, dbias) are accumulated into (+=), activation gradients (din)
// are overwritten. Shape mismatches are programmer errors and panic with a
// "kernels:" message.
package kernels
