// The launch engine and the sanitizer's bookkeeping (cudashim.h checks each
// access). A launch's blocks are started in a shuffled order (seeded: the
// same seed, the same order) by a few worker OS threads at once; each
// worker runs a block's 256 CUDA threads as fibers on its own thread, one
// at a time up to its next __syncthreads, so a barrier is a switch back to
// the worker, and the block's shared memory is the worker's.
#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <pthread.h>
#include <signal.h>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <vector>

#include "cudashim.h"

thread_local Dim3 threadIdx, blockIdx;
Dim3 blockDim = {256, 1, 1}, gridDim;

// emu_extent is a pointer argument's extent, as the Go side passes it.
extern "C" typedef struct {
	uint64_t addr;
	int64_t bytes;
	int arg;
} emu_extent;

#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
// emu_switch (switch_amd64.S) saves this fiber's registers on its stack,
// stores its stack pointer in *from and resumes the one at to.
extern "C" void emu_switch(void **from, void *to);
#else
#include <ucontext.h>
#endif

namespace {

constexpr int kThreads = 256;
constexpr size_t kStack = 64 << 10;        // per fiber, with a guard page below
constexpr size_t kSharedArena = 1 << 20; // a block's shared arrays and their shadow (16 bytes a value)
constexpr int kSharedKeys = 64;
constexpr long long kTrackBytes = 256LL << 20; // extents above this are bounds-checked only
constexpr size_t kReports = 8;
constexpr int kWarps = kThreads / 32;
constexpr int kCollectives = 32;       // a warp's wmma loads recorded per barrier interval
constexpr int kCollectiveBytes = 1024; // the largest fragment: 16x16 floats

enum FiberState { kReady, kAtBarrier, kDone };

struct Fiber {
	char *stack;
	FiberState state;
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
	void *sp;
#else
	ucontext_t ctx;
#endif
};

struct Launch {
	void (*kernel)(int, const uint64_t *);
	int k;
	const uint64_t *args;
	const char *name;
	int gx, gy;
	uint64_t seed;
	int nworkers; // the workers that run this launch's blocks
	std::vector<uint32_t> order;
	std::atomic<size_t> next{0};
	std::vector<emu::Extent> extents;
	std::vector<std::vector<std::atomic<uint32_t>>> writers; // per merged region
	bool checked;
	emu::Extent unknown; // an address that is no argument: every access is reported
	emu::Extent unbounded; // unchecked launches
	std::mutex mu;
	std::vector<std::string> reports;
	std::vector<std::pair<std::string, int>> kinds; // reports kept of each kind
	long long violations = 0;
};

// Collective is one warp-collective wmma load: its key and the bytes the
// warp's first lane read.
struct Collective {
	const void *addr;
	long long ldm;
	int kind, bytes;
	alignas(16) unsigned char data[kCollectiveBytes];
};

// WarpRecord is a warp's collective loads of barrier interval epoch.
struct WarpRecord {
	uint32_t epoch;
	int count;
	Collective loads[kCollectives];
};

// AsyncCopy is a cp.async in flight: it lands when its thread waits for
// its group.
struct AsyncCopy {
	emu::SPtr<char> dst;
	const void *src;
	const emu::Extent *e;
	int size, zfill, group;
};

struct Worker {
	int index;
	Fiber fibers[kThreads];
	int order[kThreads];
	int cur;
	uint32_t epoch;
	uint32_t tag;
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
	void *sched;
#else
	ucontext_t sched;
#endif
	alignas(64) unsigned char arena[kSharedArena];
	size_t used;
	void *keys[kSharedKeys];
	WarpRecord warps[kWarps];
	uint32_t loadEpoch[kThreads]; // each thread's count of wmma loads in that interval
	int loads[kThreads];
	std::vector<AsyncCopy> copies[kThreads];
	int committed[kThreads]; // each thread's cp.async groups committed
};

Launch *launch; // the launch in progress (one at a time)
thread_local Worker *self;

// splitmix64: the seeded shuffles.
uint64_t mix(uint64_t x) {
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

template <class T>
void shuffle(T *v, size_t n, uint64_t seed) {
	for (size_t i = n; i > 1; i--) {
		seed = mix(seed);
		std::swap(v[i - 1], v[seed % i]);
	}
}

// report records a violation; the first two of each kind are kept, at
// most kReports in all.
void report(const char *kind, std::string msg) {
	Launch &L = *launch;
	std::lock_guard<std::mutex> l(L.mu);
	L.violations++;
	auto k = std::find_if(L.kinds.begin(), L.kinds.end(), [&](auto &p) { return p.first == kind; });
	if (k == L.kinds.end()) k = L.kinds.insert(L.kinds.end(), {kind, 0});
	if (k->second < 2 && L.reports.size() < kReports) {
		k->second++;
		L.reports.push_back(std::move(msg));
	}
}

std::string where() {
	char b[160];
	snprintf(b, sizeof b, "kernel %s, block (%u,%u), thread %u", launch->name, blockIdx.x, blockIdx.y, threadIdx.x);
	return b;
}

void complete(Worker &w, const AsyncCopy &c);

std::string c_name(const AsyncCopy &c) { return c.dst.name ? c.dst.name : "?"; }

[[noreturn]] void fiber_main() {
	Worker &w = *self;
	launch->kernel(launch->k, launch->args);
	if (!w.copies[w.cur].empty()) {
		report("cp.async not waited for", where() + ": ended with cp.async copies into shared " + c_name(w.copies[w.cur][0]) + " not waited for");
		for (auto &c : w.copies[w.cur]) complete(w, c);
		w.copies[w.cur].clear();
	}
	w.fibers[w.cur].state = kDone;
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
	emu_switch(&w.fibers[w.cur].sp, w.sched);
#else
	swapcontext(&w.fibers[w.cur].ctx, &w.sched);
#endif
	abort(); // never resumed
}

#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
// start_stack is a fresh fiber's saved stack: emu_switch's frame (MXCSR and
// x87 control word at their defaults, zeroed callee-saved registers)
// returning into fiber_main with the alignment of a call.
void *start_stack(char *stack) {
	uint64_t *top = (uint64_t *)(stack + kStack);
	uint64_t *sp = top - 9;      // 8 words of frame and a zero return address above it
	sp[0] = 0x037f00001f80ull;   // MXCSR 0x1f80 (low half), x87 control word 0x037f
	for (int i = 1; i <= 6; i++) sp[i] = 0;
	sp[7] = (uint64_t)(void *)fiber_main;
	sp[8] = 0;
	return sp;
}
#endif

void run_block(Worker &w, uint32_t b) {
	Launch &L = *launch;
	blockIdx = {b % (uint32_t)L.gx, b / (uint32_t)L.gx, 0};
	w.tag = b + 1;
	w.epoch = 1;
	w.used = 0;
	std::fill(std::begin(w.keys), std::end(w.keys), nullptr);
	for (auto &r : w.warps) r.epoch = 0;
	for (int t = 0; t < kThreads; t++) {
		w.loadEpoch[t] = 0;
		w.copies[t].clear();
		w.committed[t] = 0;
		w.order[t] = t;
		Fiber &f = w.fibers[t];
		f.state = kReady;
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
		f.sp = start_stack(f.stack);
#else
		getcontext(&f.ctx);
		f.ctx.uc_stack.ss_sp = f.stack;
		f.ctx.uc_stack.ss_size = kStack;
		f.ctx.uc_link = nullptr;
		makecontext(&f.ctx, (void (*)())fiber_main, 0);
#endif
	}
	shuffle(w.order, kThreads, L.seed ^ mix(b + 1));
	for (int live = kThreads; live > 0; w.epoch++) {
		for (int i = 0; i < kThreads; i++) {
			int t = w.order[i];
			Fiber &f = w.fibers[t];
			if (f.state == kDone) continue;
			f.state = kReady;
			w.cur = t;
			threadIdx = {(unsigned)t, 0, 0};
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
			emu_switch(&w.sched, f.sp);
#else
			swapcontext(&w.sched, &f.ctx);
#endif
			if (f.state == kDone) live--;
		}
	}
}

std::mutex mu;
std::condition_variable start, done;
unsigned long long generation = 0;
int running = 0;
std::vector<Worker *> workers;

void work(Worker *w) {
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, nullptr); // no signal handler runs on a fiber's small stack
	self = w;
	unsigned long long seen = 0;
	for (;;) {
		Launch *cur;
		{
			std::unique_lock<std::mutex> l(mu);
			start.wait(l, [&] { return generation != seen; });
			seen = generation;
			cur = launch;
		}
		// A worker the launch does not use may wake after it ended (launch
		// is null again, or the next one's): only its own workers read it.
		if (cur == nullptr || w->index >= cur->nworkers) continue;
		Launch &L = *cur;
		for (size_t i; (i = L.next.fetch_add(1)) < L.order.size();) run_block(*w, L.order[i]);
		std::lock_guard<std::mutex> l(mu);
		if (--running == 0) done.notify_all();
	}
}

Worker *new_worker(int index) {
	Worker *w = new Worker();
	w->index = index;
	size_t each = kStack + 4096;
	char *m = (char *)mmap(nullptr, each * kThreads, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) abort();
	for (int t = 0; t < kThreads; t++) {
		mprotect(m + t * each, 4096, PROT_NONE); // a fiber that overflows its stack faults
		w->fibers[t].stack = m + t * each + 4096;
	}
	return w;
}

// track gives each checked extent its shadow of writers, one per merged
// region of overlapping extents.
void track(Launch &L) {
	std::vector<size_t> idx;
	for (size_t i = 0; i < L.extents.size(); i++) idx.push_back(i);
	std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return L.extents[a].lo < L.extents[b].lo; });
	for (size_t i = 0; i < idx.size();) {
		char *lo = L.extents[idx[i]].lo, *hi = lo + L.extents[idx[i]].bytes;
		size_t j = i + 1;
		while (j < idx.size() && L.extents[idx[j]].lo < hi) {
			hi = std::max(hi, L.extents[idx[j]].lo + L.extents[idx[j]].bytes);
			j++;
		}
		if (hi - lo <= kTrackBytes) {
			L.writers.emplace_back(hi - lo);
			std::atomic<uint32_t> *region = L.writers.back().data();
			for (size_t k = i; k < j; k++) L.extents[idx[k]].writers = region + (L.extents[idx[k]].lo - lo);
		}
		i = j;
	}
}

} // namespace

namespace emu {

const Extent *extent_of(uint64_t a) {
	if (a == 0) return nullptr;
	if (!launch->checked) return &launch->unbounded;
	for (const Extent &e : launch->extents)
		if ((uint64_t)e.lo == a) return &e;
	return &launch->unknown;
}

void global_fault(const Extent *e, const char *what, long long offset, int size) {
	char b[256];
	const char *kind = "out of bounds";
	if (e == nullptr) {
		kind = "null";
		snprintf(b, sizeof b, ": %s of %d bytes through a null pointer", what, size);
	} else if (e->arg < 0) {
		kind = "no argument";
		snprintf(b, sizeof b, ": %s of %d bytes at %#llx, through an address that is no pointer argument", what, size,
			 (unsigned long long)(uintptr_t)(e->lo + offset));
	} else {
		snprintf(b, sizeof b, ": %s of %d bytes at byte %lld of argument %d, which has %lld bytes: out of bounds", what, size,
			 offset, e->arg, e->bytes);
	}
	report(kind, where() + b);
}

void global_race(const Extent *e, const char *what, long long offset, uint32_t other) {
	char b[256];
	snprintf(b, sizeof b, ": %s of byte %lld of argument %d, which block (%u,%u) wrote in this launch: blocks race",
		 what, offset, e->arg, (other - 1) % (uint32_t)launch->gx, (other - 1) / (uint32_t)launch->gx);
	report("blocks race", where() + b);
}

uint32_t block_tag() { return self->tag; }

uint32_t shared_epoch() { return self->epoch; }

void *shared_storage(int key, size_t bytes) {
	Worker &w = *self;
	if (key < 0 || key >= kSharedKeys) abort();
	if (!w.keys[key]) {
		size_t at = (w.used + 63) & ~(size_t)63;
		if (at + bytes > kSharedArena) abort();
		w.keys[key] = w.arena + at;
		memset(w.keys[key], 0, bytes);
		w.used = at + bytes;
	}
	return w.keys[key];
}

void shared_race(const char *name, long long byte, const char *what, int other) {
	char b[256];
	if (other >= 0) snprintf(b, sizeof b, ": shared %s byte %lld %s (thread %d) since the last __syncthreads", name, byte, what, other);
	else snprintf(b, sizeof b, ": shared %s byte %lld %s", name, byte, what);
	report(what, where() + b);
}

void *collective(const void *addr, long long ldm, int kind, int bytes, bool *filled) {
	Worker &w = *self;
	int t = w.cur;
	if (w.loadEpoch[t] != w.epoch) {
		w.loadEpoch[t] = w.epoch;
		w.loads[t] = 0;
	}
	int n = w.loads[t]++;
	WarpRecord &r = w.warps[t / 32];
	if (r.epoch != w.epoch) {
		r.epoch = w.epoch;
		r.count = 0;
	}
	*filled = false;
	if (n >= kCollectives) return nullptr; // loaded unrecorded
	if (bytes > kCollectiveBytes) abort();
	if (n > r.count || (n < r.count && (r.loads[n].addr != addr || r.loads[n].ldm != ldm || r.loads[n].kind != kind))) {
		char b[160];
		snprintf(b, sizeof b, ": its wmma load %d since the last __syncthreads is not the one its warp's other lanes made", n);
		report("warp diverged", where() + b);
		return nullptr;
	}
	Collective &c = r.loads[n];
	if (n < r.count) {
		*filled = true;
		return c.data;
	}
	c.addr = addr;
	c.ldm = ldm;
	c.kind = kind;
	c.bytes = bytes;
	r.count++;
	return c.data;
}

void async_copy(SPtr<char> dst, const void *src, const Extent *e, int size, int zfill) {
	Worker &w = *self;
	int t = w.cur;
	char b[200];
	if ((size != 4 && size != 8 && size != 16) || zfill < 0 || zfill > size) {
		snprintf(b, sizeof b, ": cp.async of %d bytes, %d of them zero-filled: the sizes are 4, 8 and 16", size, zfill);
		report("cp.async size", where() + b);
		return;
	}
	if (dst.byte < 0 || dst.byte + size > dst.bytes || dst.byte % size != 0 ||
	    (size > zfill && (uintptr_t)src % (uintptr_t)size != 0)) {
		snprintf(b, sizeof b, ": cp.async of %d bytes to byte %lld of shared %s (%lld bytes) from %p: outside or misaligned",
			 size, dst.byte, dst.name, dst.bytes, src);
		report("cp.async bounds", where() + b);
		return;
	}
	for (long long i = dst.byte / dst.esize; i <= (dst.byte + size - 1) / dst.esize; i++) {
		shadow_write(&dst.w[i], dst.name, i * dst.esize);
		dst.w[i].pending = 1;
	}
	w.copies[t].push_back(AsyncCopy{dst, src, e, size, zfill, w.committed[t]});
}

void async_commit() {
	Worker &w = *self;
	w.committed[w.cur]++;
}

void async_wait(int prior) {
	Worker &w = *self;
	int t = w.cur;
	auto &cs = w.copies[t];
	size_t keep = 0;
	for (size_t i = 0; i < cs.size(); i++) {
		if (cs[i].group < w.committed[t] - prior) complete(w, cs[i]);
		else cs[keep++] = cs[i];
	}
	cs.resize(keep);
}

} // namespace emu

namespace {

// complete lands copy c: its bytes from global memory (checked as a read),
// zeros after them, and its words no longer pending.
void complete(Worker &w, const AsyncCopy &c) {
	char *to = c.dst.base + c.dst.byte;
	int n = c.size - c.zfill;
	if (n > 0 && emu::check(c.e, c.src, n, "cp.async read")) {
		emu::note(c.e, c.src, n, false);
		memcpy(to, c.src, n);
	} else if (n > 0) {
		memset(to, 0, n);
	}
	memset(to + n, 0, c.zfill);
	for (long long i = c.dst.byte / c.dst.esize; i <= (c.dst.byte + c.size - 1) / c.dst.esize; i++) {
		c.dst.w[i].pending = 0;
		c.dst.w[i].writer = (int16_t)w.cur;
		c.dst.w[i].wrote = w.epoch;
	}
}

} // namespace

void emu_syncthreads() {
	Worker &w = *self;
	Fiber &f = w.fibers[w.cur];
	f.state = kAtBarrier;
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
	emu_switch(&f.sp, w.sched);
#else
	swapcontext(&f.ctx, &w.sched);
#endif
}

// emu_run runs kernel k (by dispatcher kernel) on gx*gy blocks, workers
// blocks at once, in an order shuffled by seed; with checked, every access
// through a pointer argument is checked against extents (the others'
// addresses are reported when used). It returns the number of violations
// and writes the first ones, a line each, into report. One launch at a
// time (launches on one stream are ordered anyway).
extern "C" long long emu_run(void (*kernel)(int, const uint64_t *), int k, const char *name, const uint64_t *args,
			     const emu_extent *extents, int nextents, int checked, int gx, int gy, uint64_t seed, int nworkers,
			     char *out, int outlen) {
	static std::mutex one;
	std::lock_guard<std::mutex> serial(one);
	Launch L;
	L.kernel = kernel;
	L.k = k;
	L.args = args;
	L.name = name;
	L.gx = gx;
	L.gy = gy;
	L.seed = seed;
	L.nworkers = std::max(1, nworkers);
	L.checked = checked != 0;
	L.unknown = emu::Extent{nullptr, 0, nullptr, -1};
	L.unbounded = emu::Extent{nullptr, LLONG_MAX, nullptr, -1};
	for (int i = 0; i < nextents; i++) L.extents.push_back(emu::Extent{(char *)extents[i].addr, extents[i].bytes, nullptr, extents[i].arg});
	track(L);
	L.order.resize((size_t)gx * gy);
	for (size_t i = 0; i < L.order.size(); i++) L.order[i] = (uint32_t)i;
	shuffle(L.order.data(), L.order.size(), seed);
	{
		std::unique_lock<std::mutex> l(mu);
		while ((int)workers.size() < L.nworkers) {
			workers.push_back(new_worker((int)workers.size()));
			std::thread(work, workers.back()).detach();
		}
		launch = &L;
		gridDim = {(unsigned)gx, (unsigned)gy, 1};
		running = L.nworkers;
		generation++;
		start.notify_all();
		done.wait(l, [] { return running == 0; });
		launch = nullptr;
	}
	std::string all;
	for (auto &r : L.reports) all += r + "\n";
	if (L.violations > (long long)L.reports.size()) all += "and " + std::to_string(L.violations - (long long)L.reports.size()) + " more\n";
	snprintf(out, outlen, "%s", all.c_str());
	return L.violations;
}
