// cudashim.h: just enough of CUDA C++ to compile memunet's kernels for the
// host (runtime.cpp runs them), with every memory access checked:
//   - global memory is reached through emu::Ptr (the kernels' gptr/GCAST):
//     each pointer carries the extent of the launch argument it derives
//     from, and each access outside it is reported and not made; each
//     byte written records the block that wrote it, so a second block
//     writing or reading it in the same launch is reported (atomics
//     excepted);
//   - shared memory (SHARED/SHARED2) is the block's own, and each word
//     records which thread last wrote it, and read it, since the last
//     __syncthreads: a read of a word another thread wrote, or a write of
//     a word another thread wrote or read, in the same interval is
//     reported, as is a read of a word never written.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

struct Dim3 {
	unsigned x, y, z;
};
extern thread_local Dim3 threadIdx, blockIdx;
extern Dim3 blockDim, gridDim;
void emu_syncthreads();

#define __global__
#define __device__
#define __forceinline__ inline
#define UNROLL
#define __syncthreads() emu_syncthreads()
#define KERNEL(name) static void k_##name

using std::max;
using std::min;

namespace emu {

// Extent is a launch argument's memory: the bytes a pointer derived from
// it may touch, and, while the launch is checked, a word per byte naming
// the block that last wrote it (0: none in this launch).
struct Extent {
	char *lo;
	long long bytes;
	std::atomic<uint32_t> *writers; // nullptr: races are not tracked
	int arg;                        // its position among the kernel's arguments; -1 unchecked
};

// extent_of is the current launch's argument at address a (nullptr for 0);
// an address that is no pointer argument is reported when used.
const Extent *extent_of(uint64_t a);
// global_fault reports an access outside a pointer's extent.
void global_fault(const Extent *e, const char *what, long long offset, int size);
// global_race reports a byte of e another block wrote in this launch.
void global_race(const Extent *e, const char *what, long long offset, uint32_t other);
// block_tag is the current block's linear index + 1.
uint32_t block_tag();

// check is the address of size bytes at p for e, or nullptr (reported)
// where they are not inside it.
inline void *check(const Extent *e, const void *p, int size, const char *what) {
	if (e == nullptr) {
		global_fault(nullptr, what, (long long)(uintptr_t)p, size);
		return nullptr;
	}
	long long off = (const char *)p - e->lo;
	if (off < 0 || off + size > e->bytes) {
		global_fault(e, what, off, size);
		return nullptr;
	}
	return (void *)p;
}

// note records a read or write of size bytes at p for the race check.
inline void note(const Extent *e, const void *p, int size, bool write) {
	if (e->writers == nullptr) return;
	long long off = (const char *)p - e->lo;
	uint32_t me = block_tag();
	for (int i = 0; i < size; i++) {
		std::atomic<uint32_t> &w = e->writers[off + i];
		uint32_t other = write ? w.exchange(me, std::memory_order_relaxed) : w.load(std::memory_order_relaxed);
		if (other != 0 && other != me) {
			global_race(e, write ? "write" : "read", off + i, other);
			return;
		}
	}
}

// read_at is the value at p, or 0 where p lies outside e (reported).
template <class T>
T read_at(const Extent *e, const T *p) {
	if (!check(e, p, sizeof(T), "read")) return T{};
	note(e, p, sizeof(T), false);
	return *p;
}

// write_at sets the value at p, unless p lies outside e (reported).
template <class T>
void write_at(const Extent *e, T *p, T v) {
	if (!check(e, p, sizeof(T), "write")) return;
	note(e, p, sizeof(T), true);
	*p = v;
}

// Ref is a writable element of global memory: reading it and assigning it
// are checked accesses.
template <class T>
struct Ref {
	T *p;
	const Extent *e;
	operator T() const { return read_at(e, (const T *)p); }
	Ref &operator=(T v) {
		write_at(e, p, v);
		return *this;
	}
	Ref &operator=(const Ref &o) { return *this = (T)o; }
	Ref &operator+=(T v) { return *this = (T)*this + v; }
	Ref &operator-=(T v) { return *this = (T)*this - v; }
	Ref &operator*=(T v) { return *this = (T)*this * v; }
};

// Ptr is a pointer into global memory with the extent it derives from.
template <class T>
struct Ptr {
	T *p = nullptr;
	const Extent *e = nullptr;

	explicit operator bool() const { return p != nullptr; }
	auto operator[](long long i) const {
		if constexpr (std::is_const_v<T>) return read_at(e, p + i);
		else return Ref<T>{p + i, e};
	}
	auto operator*() const { return (*this)[0]; }
	Ptr operator+(long long i) const { return Ptr{p + i, e}; }
	Ptr operator-(long long i) const { return Ptr{p - i, e}; }
	operator Ptr<const T>() const
		requires(!std::is_const_v<T>)
	{
		return Ptr<const T>{p, e};
	}
};

// cast is GCAST: a kernel argument's address as a pointer to T, or a
// pointer as a pointer to another type.
template <class T>
Ptr<T> cast(uint64_t a) {
	return Ptr<T>{(T *)a, extent_of(a)};
}
template <class T, class U>
Ptr<T> cast(Ptr<U> q) {
	return Ptr<T>{(T *)q.p, q.e};
}

// atomic applies f to the value at p atomically (integer atomics: any
// block may; no race is recorded).
template <class T, class F>
T atomic(Ptr<T> q, F f) {
	T *p = (T *)check(q.e, q.p, sizeof(T), "atomic");
	if (!p) return T{};
	return f(p);
}

// ---- shared memory ----

// shared_key is a declaration's storage in the current block (key: the
// declaration's __COUNTER__, bytes its size), made on first use, zeroed
// shadow.
void *shared_storage(int key, size_t bytes);
// shared_race reports a race (or an uninitialised read) on word i of the
// shared array name.
void shared_race(const char *name, long long byte, const char *what, int other);
// shared_epoch is the current block's count of barriers passed + 1.
uint32_t shared_epoch();

// Word is a shared element's shadow: which thread last wrote it and read
// it, in which barrier interval (0: none); reader -2 is several threads.
// pending is set while an asynchronous copy (cp.async) into it is in
// flight: until the thread that issued it waits for it, no thread may
// read or write the word.
struct Word {
	int16_t writer, reader;
	uint32_t wrote, read;
	uint8_t pending;
};

// shadow_read and shadow_write are the checks of one access by the current
// thread to a shared element with shadow w (byte byte of array name).
inline void shadow_read(Word *w, const char *name, long long byte) {
	int t = (int)threadIdx.x;
	uint32_t e = shared_epoch();
	if (w->pending) shared_race(name, byte, "read while a cp.async into it is in flight (not waited for)", -1);
	else if (w->wrote == 0) shared_race(name, byte, "read before any thread wrote it", -1);
	else if (w->wrote == e && w->writer != t) shared_race(name, byte, "read since another thread wrote it", w->writer);
	if (w->read != e) {
		w->read = e;
		w->reader = (int16_t)t;
	} else if (w->reader != t) {
		w->reader = -2;
	}
}

inline void shadow_write(Word *w, const char *name, long long byte) {
	int t = (int)threadIdx.x;
	uint32_t e = shared_epoch();
	if (w->pending) shared_race(name, byte, "written while a cp.async into it is in flight (not waited for)", -1);
	else if (w->wrote == e && w->writer != t) shared_race(name, byte, "written since another thread wrote it", w->writer);
	else if (w->read == e && w->reader != t) shared_race(name, byte, "written since another thread read it", w->reader);
	w->writer = (int16_t)t;
	w->wrote = e;
}

template <class T>
struct SRef {
	T *p;
	Word *w;
	const char *name;
	long long byte;

	operator T() const {
		shadow_read(w, name, byte);
		return *p;
	}
	SRef &operator=(T v) {
		shadow_write(w, name, byte);
		*p = v;
		return *this;
	}
	SRef &operator=(const SRef &o) { return *this = (T)o; }
	SRef &operator+=(T v) { return *this = (T)*this + v; }
};

template <class T>
struct SPtr;

// Shared is a block's shared array of n values with their shadow.
template <class T, int n>
struct Shared {
	T v[n];
	Word w[n];
	const char *name;
	// at is element i; one outside the array is reported and stands in
	// for a spare.
	SRef<T> at(long long i, bool inside) {
		if (!inside || i < 0 || i >= n) {
			shared_race(name, i * (long long)sizeof(T), "outside the array", -1);
			static thread_local T spare;
			static thread_local Word spareWord;
			spareWord = Word{(int16_t)threadIdx.x, -1, shared_epoch(), 0, 0};
			return SRef<T>{&spare, &spareWord, name, i * (long long)sizeof(T)};
		}
		return SRef<T>{&v[i], &w[i], name, i * (long long)sizeof(T)};
	}
	SRef<T> operator[](long long i) { return at(i, true); }
	// ptr is SPTR(name, i): a pointer to element i.
	SPtr<T> ptr(long long i);
};

// Shared2 is a block's n x m shared array, in rows.
template <class T, int n, int m>
struct Shared2 {
	Shared<T, n * m> flat;
	struct Row {
		Shared<T, n * m> *a;
		long long i;
		SRef<T> operator[](long long j) { return a->at(i * m + j, i >= 0 && i < n && j >= 0 && j < m); }
	};
	Row operator[](long long i) { return Row{&flat, i}; }
};

// SPtr is a pointer into a block's shared array (sptr; SPTR makes one,
// SCAST views it as another type): byte-addressed, so that a view of a
// 16-bit array as floats touches two elements' shadows per value. An
// access outside the array, or not aligned to its size, is reported.
template <class T>
struct SPtr {
	char *base;
	Word *w;
	int esize;       // bytes per element of the array (one shadow each)
	long long bytes; // the array's
	const char *name;
	long long byte; // where this pointer points

	SPtr operator+(long long i) const { return SPtr{base, w, esize, bytes, name, byte + i * (long long)sizeof(T)}; }
	template <class U>
	SPtr<U> as() const {
		return SPtr<U>{base, w, esize, bytes, name, byte};
	}
	operator SPtr<const T>() const
		requires(!std::is_const_v<T>)
	{
		return as<const T>();
	}
	// shadows checks the elements of the sizeof(T) bytes at byte+off with
	// f; false where they lie outside the array or are misaligned.
	template <class F>
	bool shadows(long long off, F f) const {
		long long b = byte + off;
		if (b < 0 || b + (long long)sizeof(T) > bytes || b % (long long)sizeof(T) != 0) {
			shared_race(name, b, b < 0 || b + (long long)sizeof(T) > bytes ? "outside the array" : "misaligned for its type", -1);
			return false;
		}
		for (long long e = b / esize; e <= (b + (long long)sizeof(T) - 1) / esize; e++) f(&w[e], e * esize);
		return true;
	}
	std::remove_const_t<T> load(long long i = 0) const {
		std::remove_const_t<T> v{};
		if (shadows(i * (long long)sizeof(T), [&](Word *s, long long at) { shadow_read(s, name, at); }))
			memcpy(&v, base + byte + i * (long long)sizeof(T), sizeof(T));
		return v;
	}
	void store(std::remove_const_t<T> v, long long i = 0) const {
		if (shadows(i * (long long)sizeof(T), [&](Word *s, long long at) { shadow_write(s, name, at); }))
			memcpy(base + byte + i * (long long)sizeof(T), &v, sizeof(T));
	}
	struct Ref {
		SPtr p;
		long long i;
		operator std::remove_const_t<T>() const { return p.load(i); }
		Ref &operator=(std::remove_const_t<T> v) {
			p.store(v, i);
			return *this;
		}
		Ref &operator=(const Ref &o) { return *this = (std::remove_const_t<T>)o; }
	};
	Ref operator[](long long i) const { return Ref{*this, i}; }
};

template <class T, int n>
SPtr<T> Shared<T, n>::ptr(long long i) {
	return SPtr<T>{(char *)v, w, (int)sizeof(T), (long long)sizeof(T) * n, name, i * (long long)sizeof(T)};
}

template <class S>
S &shared(int key, const char *name) {
	S *s = (S *)shared_storage(key, sizeof(S));
	if constexpr (requires { s->name; }) s->name = name;
	else s->flat.name = name;
	return *s;
}

} // namespace emu

template <class T>
using gptr = emu::Ptr<T>;
#define GCAST(T, p) (emu::cast<T>(p))
#define SHARED(T, name, n) auto &name = emu::shared<emu::Shared<T, (n)>>(__COUNTER__, #name)
#define SHARED2(T, name, n, m) auto &name = emu::shared<emu::Shared2<T, (n), (m)>>(__COUNTER__, #name)
template <class T>
using sptr = emu::SPtr<T>;
#define SPTR(name, off) ((name).ptr(off))
#define SCAST(T, p) ((p).template as<T>())

static inline int atomicMax(gptr<int> q, int v) {
	return emu::atomic(q, [v](int *p) {
		int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
		while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		}
		return old;
	});
}
static inline int atomicExch(gptr<int> q, int v) {
	return emu::atomic(q, [v](int *p) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); });
}
static inline unsigned long long atomicAdd(gptr<unsigned long long> q, unsigned long long v) {
	return emu::atomic(q, [v](unsigned long long *p) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); });
}

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
using std::isfinite;
using std::isinf;

// emu_double is a kernel's float64 argument from its 64 bits.
static inline double emu_double(uint64_t b) {
	double d;
	memcpy(&d, &b, 8);
	return d;
}

// The tensor-core kernels' part (kernels/tc.cu).
#include "tcshim.h"
