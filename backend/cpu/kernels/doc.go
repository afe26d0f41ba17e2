// Package kernels holds memunet's compute kernels over plain slices in NCHW
// layout: a packed, cache-blocked, parallel SGEMM; convolution and its
// gradients as GEMMs over an implicit im2col (packed block by block from a
// zero-padded copy of the image, never stored whole); transposed
// convolution; fp16/bf16 conversions; and the parallel loop helper the
// layers use.
//
// Every fast kernel has a naive reference beside it (suffix Naive), written as
// the plain loop it computes; the convolution references are generic over
// float32 and float64 so the same code serves as the oracle for the fast
// kernel and, in float64, for finite difference checks. Tests hold each fast
// kernel to its reference on random inputs of odd sizes.
//
// Dispatch: the GEMM micro-kernels (packed A, or A read unpacked: the
// direct ones; on AVX-512 also gather ones that read a convolution's im2col
// rows straight from the padded image through offsets, so where 32-pixel
// segments tile the output (rows of 32k pixels, or two of 16, or four of
// 8) nothing of the image is packed, and where A is an input gradient's
// flipped 3x3 weights they are read in place from w through offsets too;
// a weight gradient with few output channels is computed transposed, its
// A the padded image's planes read directly), the packing, conversion and
// elementwise inner loops are Go
// assembly (amd64: AVX2+FMA 6x16, AVX-512 6x32 and 8x32, F16C, AVX2), chosen
// at run time with golang.org/x/sys/cpu, with pure-Go versions used
// everywhere else (other architectures, older CPUs, the noasm build tag).
// How a product is cut into tasks (by rows and columns of C, by k slabs
// added in order, by one row block per core) and whether B is packed or
// gathered never changes an element's arithmetic: under one implementation
// every such path gives the same bits, whatever the cores (tested).
// The choice is an explicit value (gemmImpl, halfImpl, elementwiseImpl), not package state;
// tests run every implementation the machine supports, the pure-Go one
// always, so the fallback is exercised on any CI machine.
//
// Memory: kernels never allocate tensors. Outputs, gradients and workspaces
// are supplied by the caller (from the memory pool); the workspace each
// kernel takes is given by ConvWorkspace and UpConvWorkspace. (The conv kernels use
// their workspace as packing scratch; small internal buffers that do not fit
// are allocated.) Gradient outputs of parameters (dw, dbias) are accumulated
// into (+=), activation gradients (din) are overwritten. Shape mismatches are
// programmer errors and panic with a "kernels:" message.
package kernels
