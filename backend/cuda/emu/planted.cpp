// planted.cpp: kernels with the bugs the sanitizer must find, for its
// tests (cgo cannot be in _test files): Device.LaunchPlanted runs them,
// Device.Substitute runs one in place of a backend kernel. Written as
// kernels/*.cu are.
#include "cudashim.h"

typedef long long i64;
typedef unsigned long long u64;

#define GRID_STRIDE(i, n) \
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

// missing_barrier: each thread passes in[t] to its neighbour t^1 through
// shared memory, with no __syncthreads between the write and the read.
KERNEL(missing_barrier)(u64 out, u64 in) {
	SHARED(float, s, 256);
	s[threadIdx.x] = GCAST(const float, in)[threadIdx.x];
	// __syncthreads() belongs here.
	GCAST(float, out)[threadIdx.x] = s[threadIdx.x ^ 1];
}

// read_past_view: out[i] = in[i+1], so the last thread reads one value past
// in (on a GPU, whatever lies after the view in its buffer).
KERNEL(read_past_view)(u64 out, u64 in, i64 n) {
	GRID_STRIDE(i, n) GCAST(float, out)[i] = GCAST(const float, in)[i + 1];
}

// blocks_write_one_word: thread 0 of every block writes out[0].
KERNEL(blocks_write_one_word)(u64 out) {
	if (threadIdx.x == 0) GCAST(float, out)[0] = (float)blockIdx.x;
}

// relu_write_past_end: relu's arguments (fp32), each result written one
// place on, so the last lands past out's end.
KERNEL(relu_write_past_end)(u64 out, u64 in, i64 dt, i64 n) {
	GRID_STRIDE(i, n) {
		float v = GCAST(const float, in)[i];
		GCAST(float, out)[i + 1] = v > 0 ? v : 0.0f;
	}
}

// emu_planted calls planted kernel k (emu.Planted) with its arguments.
extern "C" void emu_planted(int k, const uint64_t *a) {
	switch (k) {
	case 0: k_missing_barrier(a[0], a[1]); break;
	case 1: k_read_past_view(a[0], a[1], a[2]); break;
	case 2: k_blocks_write_one_word(a[0]); break;
	case 3: k_relu_write_past_end(a[0], a[1], a[2], a[3]); break;
	}
}
