// tcshim.h: what kernels/tc.cu takes of CUDA beyond cudashim.h, for the
// host: the 16-bit types, nvcuda::wmma's fragments and the cp.async
// pipeline primitives, each checked as cudashim.h checks memory.
//
// The fragments keep a layout of their own, not NVIDIA's: an operand
// fragment (matrix_a, matrix_b) holds the whole tile in every lane, column
// by column; an accumulator holds 8 of its 16x16 values in each lane, at
// positions scrambled over the tile. A kernel that relies on which lane
// or element of a fragment holds which value computes garbage here, as it
// would on a GPU: only load_matrix_sync, mma_sync, store_matrix_sync,
// fill_fragment and elementwise maps over x[num_elements] mean anything.
// Operands are what the tensor cores take: TF32 operands lose their 13 low
// mantissa bits in mma_sync (wmma::__float_to_tf32 rounds them first, to
// nearest, ties away), fp16 and bf16 are exact; products are exact in
// fp32, and each lane sums its values' products in order in fp32.
//
// load_matrix_sync is warp-collective: the first lane of a warp to reach
// its n-th load since the last barrier reads the tile (checked reads of
// shared memory) and the warp's other lanes take the same bytes, unless
// their n-th load names another tile, which is reported (the lanes of a
// warp must make the same calls). A pointer not 256-bit aligned or a
// stride not a multiple of 16 bytes is reported, as the hardware requires.
//
// __pipeline_memcpy_async marks the shared words it will write as pending
// (a read or write of them is reported) and copies at
// __pipeline_wait_prior, when its group completes; a thread that ends
// with copies not waited for is reported.
#pragma once
#include "half.h"

struct __half {
	uint16_t x;
};
struct __nv_bfloat16 {
	uint16_t x;
};

namespace emu {

// collective is the warp's record of the current lane's next
// load_matrix_sync in this barrier interval, keyed by the tile's address,
// stride and kind: where an earlier lane of the warp made the same load,
// *filled is true and the result holds its bytes; else the caller loads
// and fills it. nullptr: the caller loads without the record (a lane that
// names another tile is reported).
void *collective(const void *addr, long long ldm, int kind, int bytes, bool *filled);

// async_copy, async_commit and async_wait are the pipeline primitives'
// bookkeeping (runtime.cpp): size bytes to dst, the first size-zfill of
// them from src (in extent e), completed by the wait that covers their
// group.
void async_copy(SPtr<char> dst, const void *src, const Extent *e, int size, int zfill);
void async_commit();
void async_wait(int prior);

} // namespace emu

template <class T, class U>
static inline void __pipeline_memcpy_async(emu::SPtr<T> dst, emu::Ptr<U> src, size_t size, size_t zfill = 0) {
	emu::async_copy(dst.template as<char>(), src.p, src.e, (int)size, (int)zfill);
}
static inline void __pipeline_commit() { emu::async_commit(); }
static inline void __pipeline_wait_prior(size_t prior) { emu::async_wait((int)prior); }

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
} // namespace precision
enum layout_t { mem_row_major, mem_col_major };

// __float_to_tf32 rounds to TF32 (10 mantissa bits) to nearest, ties away
// from zero (cvt.rna.tf32.f32); infinities and NaN pass.
static inline float __float_to_tf32(float f) {
	uint32_t u = __float_as_uint(f);
	if ((u & 0x7f800000u) == 0x7f800000u) return f;
	return __uint_as_float((u + 0x1000u) & 0xffffe000u);
}

template <class T>
struct storage {
	typedef T type;
};
template <>
struct storage<precision::tf32> {
	typedef float type;
};

// operand is the value a tensor core takes of a fragment element.
static inline float operand(float f) {
	if (f != f) return f;
	return __uint_as_float(__float_as_uint(f) & 0xffffe000u); // TF32: the low 13 bits ignored
}
static inline float operand(__half h) { return f16_to_f32(h.x); }
static inline float operand(__nv_bfloat16 h) { return bf16_to_f32(h.x); }

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment;

// tile is an operand fragment: rows x cols values, held column by column.
template <int R, int C, class T, class Layout, int Kind>
struct tile {
	typedef typename storage<T>::type element_type;
	enum { rows = R, cols = C, num_elements = R * C, kind = Kind };
	typedef Layout layout;
	element_type x[num_elements];
	element_type &at(int r, int c) { return x[c * R + r]; }
	const element_type &at(int r, int c) const { return x[c * R + r]; }
};

template <int M, int N, int K, class T, class L>
struct fragment<matrix_a, M, N, K, T, L> : tile<M, K, T, L, 1> {};
template <int M, int N, int K, class T, class L>
struct fragment<matrix_b, M, N, K, T, L> : tile<K, N, T, L, 2> {};

template <int M, int N, int K>
struct fragment<accumulator, M, N, K, float, void> {
	typedef float element_type;
	enum { num_elements = M * N / 32 };
	float x[num_elements];
	// position is slot s's place in the row-major M x N tile for lane l.
	static int position(int l, int s) { return ((l * num_elements + s) * 109 + 7) % (M * N); }
};

// aligned reports (and says false) a tile pointer or stride the hardware
// refuses: 256-bit aligned pointers, strides a multiple of 16 bytes.
template <class E>
static bool aligned(emu::SPtr<E> p, unsigned ldm) {
	if (p.byte % 32 != 0) {
		emu::shared_race(p.name, p.byte, "is a wmma tile pointer not 256-bit aligned", -1);
		return false;
	}
	if ((ldm * sizeof(E)) % 16 != 0) {
		emu::shared_race(p.name, p.byte, "starts a wmma tile whose stride is not a multiple of 16 bytes", -1);
		return false;
	}
	return true;
}

template <class F, class E>
static void load_matrix_sync(F &f, emu::SPtr<E> p, unsigned ldm) {
	typedef typename F::element_type S;
	static_assert(sizeof(S) == sizeof(E), "a fragment loads values of its own size");
	if (!aligned(p, ldm)) return;
	bool row = std::is_same_v<typename F::layout, row_major>;
	bool filled;
	void *rec = emu::collective(p.base + p.byte, ldm, F::kind * 2 + row, sizeof(f.x), &filled);
	if (rec && filled) {
		memcpy(f.x, rec, sizeof(f.x));
		return;
	}
	for (int r = 0; r < F::rows; r++)
		for (int c = 0; c < F::cols; c++) {
			auto v = p.load(row ? (long long)r * ldm + c : (long long)c * ldm + r);
			memcpy(&f.at(r, c), &v, sizeof(S));
		}
	if (rec) memcpy(rec, f.x, sizeof(f.x));
}

template <class F, class T>
static void fill_fragment(F &f, T v) {
	for (auto &e : f.x) e = v;
}

template <int M, int N, int K, class TA, class LA, class TB, class LB>
static void mma_sync(fragment<accumulator, M, N, K, float> &d, const fragment<matrix_a, M, N, K, TA, LA> &a,
		     const fragment<matrix_b, M, N, K, TB, LB> &b, const fragment<accumulator, M, N, K, float> &c) {
	typedef fragment<accumulator, M, N, K, float> Acc;
	int lane = threadIdx.x & 31;
	for (int s = 0; s < Acc::num_elements; s++) {
		int at = Acc::position(lane, s), r = at / N, col = at % N;
		float sum = c.x[s];
		for (int k = 0; k < K; k++) sum += operand(a.at(r, k)) * operand(b.at(k, col));
		d.x[s] = sum;
	}
}

template <int M, int N, int K>
static void store_matrix_sync(emu::SPtr<float> p, const fragment<accumulator, M, N, K, float> &f, unsigned ldm, layout_t layout) {
	typedef fragment<accumulator, M, N, K, float> Acc;
	if (!aligned(p, ldm)) return;
	int lane = threadIdx.x & 31;
	for (int s = 0; s < Acc::num_elements; s++) {
		int at = Acc::position(lane, s), r = at / N, c = at % N;
		p.store(f.x[s], layout == mem_row_major ? (long long)r * ldm + c : (long long)c * ldm + r);
	}
}

} // namespace wmma
} // namespace nvcuda
