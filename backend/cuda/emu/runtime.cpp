// The launch engine: a kernel's blocks run one after another; within a
// block each of the 256 CUDA threads is an OS thread, and __syncthreads is
// a barrier among them, so __shared__ (static) memory is the block's.
#include <barrier>
#include <thread>
#include <vector>

#include "cudashim.h"

thread_local Dim3 threadIdx, blockIdx;
Dim3 blockDim = {256, 1, 1}, gridDim;
static std::barrier<> *barrier_;

void emu_syncthreads() { barrier_->arrive_and_wait(); }

extern "C" void emu_run(void (*kernel)(int, const uint64_t *), int k, const uint64_t *args, int gx, int gy) {
	gridDim = {(unsigned)gx, (unsigned)gy, 1};
	std::barrier<> b(blockDim.x);
	barrier_ = &b;
	std::vector<std::thread> threads;
	for (unsigned t = 0; t < blockDim.x; t++) {
		threads.emplace_back([=] {
			threadIdx = {t, 0, 0};
			for (int by = 0; by < gy; by++) {
				for (int bx = 0; bx < gx; bx++) {
					blockIdx = {(unsigned)bx, (unsigned)by, 0};
					kernel(k, args);
					emu_syncthreads(); // the block is done before the next one uses its shared memory
				}
			}
		});
	}
	for (auto &t : threads) t.join();
	barrier_ = nullptr;
}
