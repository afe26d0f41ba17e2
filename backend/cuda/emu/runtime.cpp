// The launch engine: a kernel's blocks run one after another; within a
// block each of the 256 CUDA threads is one of 256 worker threads (started
// once, kept for the process), and __syncthreads is a barrier among them,
// so __shared__ (static) memory is the block's.
#include <barrier>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "cudashim.h"

thread_local Dim3 threadIdx, blockIdx;
Dim3 blockDim = {256, 1, 1}, gridDim;

namespace {

struct Job {
	void (*kernel)(int, const uint64_t *);
	int k;
	const uint64_t *args;
	int gx, gy;
};

std::mutex mu;
std::condition_variable start, done;
Job job;
unsigned long long generation = 0; // bumped per launch
int running = 0;                   // workers still on the current launch
std::barrier<> *blockBarrier;
std::once_flag started;

void worker(unsigned t) {
	threadIdx = {t, 0, 0};
	unsigned long long seen = 0;
	for (;;) {
		Job j;
		{
			std::unique_lock<std::mutex> l(mu);
			start.wait(l, [&] { return generation != seen; });
			seen = generation;
			j = job;
		}
		for (int by = 0; by < j.gy; by++) {
			for (int bx = 0; bx < j.gx; bx++) {
				blockIdx = {(unsigned)bx, (unsigned)by, 0};
				j.kernel(j.k, j.args);
				blockBarrier->arrive_and_wait(); // the block is done before the next uses its shared memory
			}
		}
		std::lock_guard<std::mutex> l(mu);
		if (--running == 0) done.notify_all();
	}
}

} // namespace

void emu_syncthreads() { blockBarrier->arrive_and_wait(); }

// emu_run runs kernel k on gx*gy blocks; one launch at a time (launches on
// one stream are ordered anyway).
extern "C" void emu_run(void (*kernel)(int, const uint64_t *), int k, const uint64_t *args, int gx, int gy) {
	static std::mutex launch;
	std::lock_guard<std::mutex> one(launch);
	std::call_once(started, [] {
		blockBarrier = new std::barrier<>(blockDim.x);
		for (unsigned t = 0; t < blockDim.x; t++) std::thread(worker, t).detach();
	});
	std::unique_lock<std::mutex> l(mu);
	gridDim = {(unsigned)gx, (unsigned)gy, 1};
	job = Job{kernel, k, args, gx, gy};
	running = blockDim.x;
	generation++;
	start.notify_all();
	done.wait(l, [] { return running == 0; });
}
