//go:build cudagen

// The kernels' PTX, with nvcc (CUDA 11.8's, the flags the committed PTX was
// made with): go generate -tags cudagen ./backend/cuda. Behind a tag so
// that go generate ./... needs no CUDA toolkit.

package cuda

//go:generate nvcc -ptx -arch=compute_80 -O3 -fmad=false -o kernels/ops.ptx kernels/ops.cu
//go:generate nvcc -ptx -arch=compute_80 -O3 --extended-lambda -o kernels/gemm.ptx kernels/gemm.cu
