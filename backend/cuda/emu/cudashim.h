// cudashim.h: just enough of CUDA C++ to compile memunet's kernels for the
// host, one block at a time, each CUDA thread an OS thread (see runtime.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>

struct Dim3 {
	unsigned x, y, z;
};
extern thread_local Dim3 threadIdx, blockIdx;
extern Dim3 blockDim, gridDim;
void emu_syncthreads();

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() emu_syncthreads()
#define KERNEL(name) static void k_##name

using std::max;
using std::min;

static inline uint32_t __float_as_uint(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}
static inline float __uint_as_float(uint32_t u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static inline float __int_as_float(int i) { return __uint_as_float((uint32_t)i); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }

static inline int atomicMax(int *p, int v) {
	int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
	while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
	}
	return old;
}
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
	return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
using std::isfinite;

// emu_double is a kernel's float64 argument from its 64 bits.
static inline double emu_double(uint64_t b) {
	double d;
	memcpy(&d, &b, 8);
	return d;
}
