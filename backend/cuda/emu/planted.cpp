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

// tc.cu compiled again with a bug planted: planted_tc::bug chooses which
// of its PLANTED(...) hooks is true (one at a time).
namespace planted_tc {
enum Bug { none, swapped_fragment, skipped_slice, early_stage };
Bug bug;
} // namespace planted_tc
#define PLANTED(b) (planted_tc::bug == planted_tc::b)
namespace planted_tc {
#include "tc_cu.h"

// run calls tc.cu's kernel k (its place in the file) with its arguments.
void run(int k, const uint64_t *a) {
	switch (k) {
	case 0: k_tc_conv_tf32(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20]); break;
	case 1: k_tc_conv_16(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21]); break;
	case 2: k_tc_wgrad_tf32(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18]); break;
	case 3: k_tc_wgrad_16(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19]); break;
	}
}
} // namespace planted_tc

// emu_planted calls planted kernel k&255 (emu.Planted) with its arguments;
// a tensor-core bug runs in place of tc.cu's kernel k>>8.
extern "C" void emu_planted(int k, const uint64_t *a) {
	switch (k & 255) {
	case 0: k_missing_barrier(a[0], a[1]); break;
	case 1: k_read_past_view(a[0], a[1], a[2]); break;
	case 2: k_blocks_write_one_word(a[0]); break;
	case 3: k_relu_write_past_end(a[0], a[1], a[2], a[3]); break;
	case 4: planted_tc::bug = planted_tc::swapped_fragment; planted_tc::run(k >> 8, a); break;
	case 5: planted_tc::bug = planted_tc::skipped_slice; planted_tc::run(k >> 8, a); break;
	case 6: planted_tc::bug = planted_tc::early_stage; planted_tc::run(k >> 8, a); break;
	}
}
