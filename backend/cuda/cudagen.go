//go:build cudagen

package cuda

// The kernels' machine code: go generate -tags cudagen ./backend/cuda
// (nvcc 11.8 or newer). Each fatbin holds SASS for the A100 (sm_80), the
// RTX 30xx/A10/A40 (sm_86), the RTX 40xx/L4/L40 (sm_89) and the H100/H200
// (sm_90), so no GPU of those compiles anything at start, and compute_80
// PTX, which the driver JIT-compiles for any newer GPU; compressed (the
// driver expands it as it loads). ops.cu rounds every float operation on
// its own (-fmad=false), as the CPU backend's Go code does; gemm.cu and
// tc.cu sum products in their own order anyway. fatbin.sum
// records the sources they were made from (TestGeneratedFilesUpToDate).
// tc2.fatbin is tc.cu built for two blocks an SM (TC_BLOCKS_PER_SM), the
// device check's occupancy experiment (TCBlocksEnv).
// The tag keeps these out of plain go generate, which CI runs without
// nvcc.

//go:generate nvcc -fatbin -O3 -fmad=false -Xfatbin=-compress-all -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_89,code=sm_89 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_80,code=compute_80 -o kernels/ops.fatbin kernels/ops.cu
//go:generate nvcc -fatbin -O3 --extended-lambda -Xfatbin=-compress-all -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_89,code=sm_89 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_80,code=compute_80 -o kernels/gemm.fatbin kernels/gemm.cu
//go:generate nvcc -fatbin -O3 -std=c++17 -Xfatbin=-compress-all -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_89,code=sm_89 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_80,code=compute_80 -o kernels/tc.fatbin kernels/tc.cu
//go:generate nvcc -fatbin -O3 -std=c++17 -DTC_BLOCKS_PER_SM=2 -Xfatbin=-compress-all -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_89,code=sm_89 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_80,code=compute_80 -o kernels/tc2.fatbin kernels/tc.cu
//go:generate sh -c "sha256sum kernels/ops.cu kernels/gemm.cu kernels/tc.cu kernels/half.h >kernels/fatbin.sum"
