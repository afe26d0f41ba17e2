// memunet's tensor-core convolutions: the convolution, its two gradients
// and the transposed convolution's, as implicit GEMMs on the tensor cores
// through WMMA (nvcuda::wmma), so the fragments' layouts are NVIDIA's and
// nothing here depends on them:
//   - 16-bit tensors (tc_conv_16, tc_wgrad_16): fp16 or bf16 operands,
//     fp32 accumulation, the result rounded once to its storage type;
//   - fp32 tensors with cuda.tf32 (tc_conv_tf32, tc_wgrad_tf32): operands
//     rounded to TF32 (10 mantissa bits, to nearest) as they enter the
//     fragments, fp32 accumulation; gemm.cu keeps the exact fp32 kernels.
//
// Every product is C (M x N) = A (M x K) B (K x N) over tiles of BM x 128
// (BM 32, 64 or 128, the smallest that holds M: few output channels waste
// no tensor work), 256 threads in 8 warps of BM/2 x 32, k-slices of 32
// values for the 16-bit types and 16 for TF32 (64 bytes of each row
// either way: 32 fp32 values would take the double-buffered tiles past the
// 48 KiB of static shared memory). Operands are gathered from the NCHW
// tensors into shared memory, double-buffered: with cp.async on the fp32
// path (__pipeline_memcpy_async: one 4-byte copy per value, zero-filled
// at padding and edges), through registers for the 16-bit types (cp.async
// copies 4, 8 or 16 aligned bytes, and an im2col gather of 2-byte values
// at any offset is not that). Each thread's part of a slice is fixed: its
// pixel or channel is decomposed once per block, each slice's filter
// position once per slice, and each value costs an add and a compare, in
// 32-bit (the Go side keeps every image and every tensor within 2^31
// values; images are based in 64 bits).
//
//   data GEMMs (tc_conv_*): out (M output channels x N pixels of NI images
//     of Hn x Wn) = weights (M x R positions x Cd channels) * the input
//     values each position of each pixel reads (im2col, never stored),
//     depth ordered position-major, channel-minor, so a slice is one
//     filter position of BK channels: the convolution (R = K*K), its
//     backward-data (the flipped filter over dout), the transposed
//     convolution (R = 1; out pixel (2y+i, 2x+j) for row (oc, i, j)) and
//     its backward-data (R = 4 positions (i, j) at stride 2);
//   weight GEMMs (tc_wgrad_*): dw (M x N) += A (M channels x the pixels of
//     every image) * B (those pixels x N = (channel, position) columns),
//     split over the depth into partial products (split_sum adds them in
//     order: deterministic) where the output has few tiles.
//
// The epilogue goes through shared memory (a warp's 16 x 32 values at a
// time): WMMA does not say which lane holds which accumulator value, so
// adding a bias, rounding to 16 bits and scattering to NCHW happen after
// store_matrix_sync, with each lane writing one pixel column (coalesced).
// Everything WMMA offers is enough here; no mma.sync PTX.
//
// Every result value is computed by one thread in a fixed order, so runs
// give the same bits. Memory is reached through gptr/GCAST and
// sptr/SPTR/SCAST (shared), which the emulator checks, as in ops.cu.

#include <stdint.h>

#include "half.h"

typedef long long i64;
typedef unsigned long long u64;

// TC_BLOCKS_PER_SM is the blocks an SM should hold at once: 1 (152-175
// registers, no spill), or 2 for tc2.fatbin (128 registers, a few bytes
// spilled), the device check's occupancy experiment.
#ifndef TC_BLOCKS_PER_SM
#define TC_BLOCKS_PER_SM 1
#endif

// KERNEL declares an entry point (backend/cuda/emu redefines it).
#ifndef KERNEL
#define KERNEL(name) extern "C" __global__ void __launch_bounds__(256, TC_BLOCKS_PER_SM) name
#endif

// gptr<T> points to global memory, sptr<T> to shared memory; SHARED
// declares a block's shared array (aligned for wmma tiles), SPTR(a, i)
// points to its element i and SCAST(T, p) views a shared pointer as one to
// T. backend/cuda/emu redefines them to check every access.
#ifndef GCAST
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <mma.h>
template <class T>
using gptr = T *;
template <class T>
using sptr = T *;
#define GCAST(T, p) ((T *)(p))
#define SHARED(T, name, n) __shared__ __align__(128) T name[n]
#define SPTR(name, off) ((name) + (off))
#define SCAST(T, p) ((T *)(p))
#endif

// UNROLL unrolls a loop over fragments or a thread's values, so that
// their arrays stay in registers.
#ifndef UNROLL
#define UNROLL _Pragma("unroll")
#endif

// PLANTED(bug) is false: the emulator's tests compile this file again with
// it true for one bug at a time, to show that they catch it.
#ifndef PLANTED
#define PLANTED(bug) false
#endif

namespace wmma = nvcuda::wmma;

// ---- operand types ----

// Async and Registers say how a slice reaches shared memory (mainloop).
struct Async {};
struct Registers {};

// TF32: fp32 tensors; shared memory holds fp32, the fragments TF32.
struct TF32 {
	typedef Async Pipe;
	typedef float S;                 // a shared-memory value
	typedef wmma::precision::tf32 F; // the fragments' type
	typedef float FE;                // what load_matrix_sync reads
	enum { BK = 16, FK = 8, PAD = 4 };
};

// F16 and BF16: 16-bit tensors; shared memory holds their bits.
struct F16 {
	typedef Registers Pipe;
	typedef uint16_t S;
	typedef __half F;
	typedef __half FE;
	enum { BK = 32, FK = 16, PAD = 8 };
};
struct BF16 {
	typedef Registers Pipe;
	typedef uint16_t S;
	typedef __nv_bfloat16 F;
	typedef __nv_bfloat16 FE;
	enum { BK = 32, FK = 16, PAD = 8 };
};

// to_operands rounds a TF32 fragment's values to TF32, as the API asks
// (the tensor cores would otherwise drop their low bits); 16-bit
// fragments are exact.
template <class Frag>
__device__ __forceinline__ void to_operands(Frag &f, TF32) {
	UNROLL
	for (int i = 0; i < f.num_elements; i++) f.x[i] = wmma::__float_to_tf32(f.x[i]);
}
template <class Frag, class Ty>
__device__ __forceinline__ void to_operands(Frag &, Ty) {}

// store_value writes a result rounded to the tensor's type.
__device__ __forceinline__ void store_value(TF32, gptr<float> o, i64 i, float v) { o[i] = v; }
__device__ __forceinline__ void store_value(F16, gptr<uint16_t> o, i64 i, float v) { o[i] = f32_to_f16(v); }
__device__ __forceinline__ void store_value(BF16, gptr<uint16_t> o, i64 i, float v) { o[i] = f32_to_bf16(v); }

// ---- tiles ----

// Tile is a block's geometry: BM x BN outputs, 8 warps of WM x WN, FM x FN
// fragments of 16 x 16 each; STAGE is one operand's slice in shared
// memory, in values, for the largest layout.
template <class Ty, int BM_>
struct Tile {
	enum {
		BM = BM_,
		BN = 128,
		BK = Ty::BK,
		FK = Ty::FK,
		PAD = Ty::PAD,
		WM = BM / 2,
		WN = BN / 4,
		FM = WM / 16,
		FN = WN / 16,
		STAGE = 128 * (Ty::BK + Ty::PAD),
		LDS = WN + 4, // the epilogue's row of a warp's 16 x WN values
	};
};

// A (BM x BK) is held k-contiguous, [BM][BK+PAD] (wmma::row_major); B
// (BK x BN) k-contiguous, [BN][BK+PAD] (wmma::col_major), or
// n-contiguous, [BK][BN+PAD] (wmma::row_major). The padding keeps rows
// 16-byte multiples (wmma's stride) and off one bank.
template <class T>
__device__ __forceinline__ int a_at(int m, int k) {
	return m * (T::BK + T::PAD) + k;
}
template <class T, bool kc>
__device__ __forceinline__ int b_at(int k, int n) {
	return kc ? n * (T::BK + T::PAD) + k : k * (T::BN + T::PAD) + n;
}
template <class T, bool kc>
__device__ __forceinline__ int b_ld() {
	return kc ? T::BK + T::PAD : T::BN + T::PAD;
}

template <bool kc>
struct BLayout {
	typedef wmma::row_major type;
};
template <>
struct BLayout<true> {
	typedef wmma::col_major type;
};

// ---- geometry ----

// ConvArgs is a data GEMM (see the top): M rows (output channels, or
// (oc, i, j) for the transposed convolution: up), N = NI*Hn*Wn pixel
// columns, depth R positions x Cd channels; the input (Cd, HT, WT) is read
// at (sp*y + f*(r/RW) + g, sp*x + f*(r%RW) + g) for position r of pixel
// (y, x); weight (m, c, r) at m*sm + c*sc + r*sr.
struct ConvArgs {
	int NI, M, Cd, R, RW, sp, f, g, HT, WT, Hn, Wn, sm, sc, sr, up;
	int N, Pn, HWT, CS, slices;
};

// WgradArgs is a weight GEMM: dw (M x N) over the K = NI*Hk*Wk pixels of
// the A tensor (M, Hk, Wk); column n of B is channel n/R of the B tensor
// (CB, HB, WB) at position n%R, read at (sp*y + f*(r/RW) + g, ...) as
// ConvArgs's.
struct WgradArgs {
	int NI, M, N, Hk, Wk, CB, HB, WB, R, RW, sp, f, g, splits;
	int Pk, K, HWB;
};

// ---- operand loaders: each thread's values of a slice ----
//
// A loader's begin(s) prepares slice s, src(j, ok) is where its j-th value
// comes from (ok false: a zero), dst(j) where it goes in the slice's
// shared tile. E values a thread.

// WeightLoader: A of a data GEMM, k-contiguous, threads along the depth.
template <class T, class Ty>
struct WeightLoader {
	typedef typename Ty::S S;
	enum { E = T::BM * T::BK / 256, STEP = 256 / T::BK };
	gptr<const S> w;
	int lm, lk, m0, M, Cd, sm, sc, sr, CS;
	int r, cb;
	__device__ WeightLoader(gptr<const S> w_, int t, int m0_, const ConvArgs &d)
	    : w(w_), lm(t / T::BK), lk(t % T::BK), m0(m0_), M(d.M), Cd(d.Cd), sm(d.sm), sc(d.sc), sr(d.sr), CS(d.CS), r(0), cb(0) {}
	__device__ __forceinline__ void begin(int s) {
		r = s / CS;
		cb = (s - r * CS) * T::BK;
	}
	__device__ __forceinline__ gptr<const S> src(int j, bool &ok) {
		int m = m0 + lm + j * STEP, c = cb + lk;
		ok = m < M && c < Cd;
		return ok ? w + (m * sm + c * sc + r * sr) : w;
	}
	__device__ __forceinline__ int dst(int j) { return a_at<T>(lm + j * STEP, lk); }
};

// PixelLoader: B of a data GEMM, n-contiguous, threads along the pixels:
// each thread keeps one pixel column for the whole product.
template <class T, class Ty>
struct PixelLoader {
	typedef typename Ty::S S;
	enum { E = T::BN * T::BK / 256, STEP = 256 / T::BN };
	gptr<const S> x, img, at;
	int ln, lk, py, px, HT, WT, HWT, Cd, CS, sp, f, g, RW, cb;
	bool col, pix;
	__device__ PixelLoader(gptr<const S> x_, int t, int n0, const ConvArgs &d)
	    : x(x_), img(x_), at(x_), ln(t % T::BN), lk(t / T::BN), py(0), px(0), HT(d.HT), WT(d.WT), HWT(d.HWT), Cd(d.Cd),
	      CS(d.CS), sp(d.sp), f(d.f), g(d.g), RW(d.RW), cb(0), pix(false) {
		int n = n0 + ln;
		col = n < d.N;
		if (col) {
			int i = n / d.Pn, p = n - i * d.Pn;
			py = p / d.Wn;
			px = p - py * d.Wn;
			img = x + (i64)i * d.Cd * d.HWT;
		}
	}
	__device__ __forceinline__ void begin(int s) {
		int r = s / CS, rr = r / RW;
		cb = (s - r * CS) * T::BK;
		int y = sp * py + f * rr + g, xx = sp * px + f * (r - rr * RW) + g;
		pix = col && y >= 0 && y < HT && xx >= 0 && xx < WT;
		at = pix ? img + (y * WT + xx) : x;
	}
	__device__ __forceinline__ gptr<const S> src(int j, bool &ok) {
		int c = cb + lk + j * STEP;
		ok = pix && c < Cd;
		return ok ? at + c * HWT : x;
	}
	__device__ __forceinline__ int dst(int j) { return b_at<T, false>(lk + j * STEP, ln); }
};

// PlainDepthLoader: A of a weight GEMM, the A tensor's values, threads
// along the pixels (the depth, contiguous).
template <class T, class Ty>
struct PlainDepthLoader {
	typedef typename Ty::S S;
	enum { E = T::BM * T::BK / 256, STEP = 256 / T::BK };
	gptr<const S> a, at;
	int lk, lm, m0, M, Pk, K;
	bool pix;
	__device__ PlainDepthLoader(gptr<const S> a_, int t, int m0_, const WgradArgs &d)
	    : a(a_), at(a_), lk(t % T::BK), lm(t / T::BK), m0(m0_), M(d.M), Pk(d.Pk), K(d.K), pix(false) {}
	__device__ __forceinline__ void begin(int s) {
		int k = s * T::BK + lk;
		pix = k < K;
		int i = k / Pk, p = k - i * Pk;
		at = pix ? a + ((i64)i * M * Pk + p) : a;
	}
	__device__ __forceinline__ gptr<const S> src(int j, bool &ok) {
		int m = m0 + lm + j * STEP;
		ok = pix && m < M;
		return ok ? at + m * Pk : a;
	}
	__device__ __forceinline__ int dst(int j) { return a_at<T>(lm + j * STEP, lk); }
};

// GatherDepthLoader: B of a weight GEMM, threads along the pixels; the
// block's columns (channel offset, position offsets, or -1 past N) are a
// table in shared memory, made once.
template <class T, class Ty>
struct GatherDepthLoader {
	typedef typename Ty::S S;
	enum { E = T::BN * T::BK / 256, STEP = 256 / T::BK };
	gptr<const S> b, at;
	sptr<int> tab;
	int lk, ln, HB, WB, image, Wk, Pk, K, sp, ys, xs;
	bool pix;
	__device__ GatherDepthLoader(gptr<const S> b_, sptr<int> tab_, int t, const WgradArgs &d)
	    : b(b_), at(b_), tab(tab_), lk(t % T::BK), ln(t / T::BK), HB(d.HB), WB(d.WB), image(d.CB * d.HWB), Wk(d.Wk),
	      Pk(d.Pk), K(d.K), sp(d.sp), ys(0), xs(0), pix(false) {}
	__device__ __forceinline__ void begin(int s) {
		int k = s * T::BK + lk;
		pix = k < K;
		int i = k / Pk, p = k - i * Pk, py = p / Wk;
		ys = sp * py;
		xs = sp * (p - py * Wk);
		at = pix ? b + (i64)i * image : b;
	}
	__device__ __forceinline__ gptr<const S> src(int j, bool &ok) {
		int n = ln + j * STEP, off = tab[3 * n], y = ys + tab[3 * n + 1], x = xs + tab[3 * n + 2];
		ok = pix && off >= 0 && y >= 0 && y < HB && x >= 0 && x < WB;
		return ok ? at + (off + y * WB + x) : b;
	}
	__device__ __forceinline__ int dst(int j) { return b_at<T, true>(lk, ln + j * STEP); }
};

// column_table fills GatherDepthLoader's table for columns n0.. of B.
template <class T>
__device__ __forceinline__ void column_table(sptr<int> tab, int n0, const WgradArgs &d) {
	int t = threadIdx.x;
	if (t < T::BN) {
		int n = n0 + t, off = -1, oy = 0, ox = 0;
		if (n < d.N) {
			int c = n / d.R, r = n - c * d.R, rr = r / d.RW;
			off = c * d.HWB;
			oy = d.f * rr + d.g;
			ox = d.f * (r - rr * d.RW) + d.g;
		}
		tab[3 * t] = off;
		tab[3 * t + 1] = oy;
		tab[3 * t + 2] = ox;
	}
	__syncthreads();
}

// ---- the product ----

// Acc is a warp's accumulator fragment for Ty.
template <class Ty>
using Acc = wmma::fragment<wmma::accumulator, 16, 16, Ty::FK, float>;

// slice_product adds the slice in shared memory (a, b) to the warp's
// accumulators: WM x WN outputs at warp (wm, wn).
template <class T, class Ty, bool bkc>
__device__ __forceinline__ void slice_product(Acc<Ty> (&acc)[T::FM][T::FN], sptr<typename Ty::S> a, sptr<typename Ty::S> b,
					      int wm, int wn) {
	typedef typename Ty::FE FE;
	typedef typename BLayout<bkc>::type BL;
	UNROLL
	for (int kk = 0; kk < T::BK; kk += T::FK) {
		wmma::fragment<wmma::matrix_b, 16, 16, T::FK, typename Ty::F, BL> fb[T::FN];
		UNROLL
		for (int j = 0; j < T::FN; j++) {
			wmma::load_matrix_sync(fb[j], SCAST(const FE, (b + b_at<T, bkc>(kk, wn * T::WN + 16 * j))), b_ld<T, bkc>());
			to_operands(fb[j], Ty());
		}
		UNROLL
		for (int i = 0; i < T::FM; i++) {
			wmma::fragment<wmma::matrix_a, 16, 16, T::FK, typename Ty::F, wmma::row_major> fa;
			wmma::load_matrix_sync(fa, SCAST(const FE, (a + a_at<T>(wm * T::WM + 16 * i, kk))), T::BK + T::PAD);
			to_operands(fa, Ty());
			UNROLL
			for (int j = 0; j < T::FN; j++)
				wmma::mma_sync(acc[i][j], fa, fb[PLANTED(swapped_fragment) ? (j + 1) % T::FN : j], acc[i][j]);
		}
	}
}

// Stage moves a loader's values of a slice into shared memory: cp.async
// for TF32 (issue; complete at the wait), registers for the 16-bit types
// (fetch early, put after the slice before is used).
template <class Ty>
struct Stage {
	// Two 16-bit values a register: r holds value j in bits 16*(j%2) of
	// r[j/2], half the registers a value apiece would take.
	template <class L>
	__device__ __forceinline__ static void fetch(L &l, uint32_t (&r)[(L::E + 1) / 2], int s) {
		l.begin(s);
		UNROLL
		for (int j = 0; j < L::E; j++) {
			bool ok;
			gptr<const typename Ty::S> p = l.src(j, ok);
			uint32_t v = ok ? (uint32_t)p[0] : 0u;
			r[j / 2] = j % 2 ? r[j / 2] | v << 16 : v;
		}
	}
	template <class L>
	__device__ __forceinline__ static void put(L &l, const uint32_t (&r)[(L::E + 1) / 2], sptr<typename Ty::S> to) {
		UNROLL
		for (int j = 0; j < L::E; j++) to[l.dst(j)] = (typename Ty::S)(r[j / 2] >> (16 * (j % 2)));
	}
};

template <class L>
__device__ __forceinline__ void issue(L &l, sptr<float> to, int s) {
	l.begin(s);
	UNROLL
	for (int j = 0; j < L::E; j++) {
		bool ok;
		gptr<const float> p = l.src(j, ok);
		__pipeline_memcpy_async(to + l.dst(j), p, 4, ok ? 0 : 4);
	}
}

// mainloop adds slices [s0, s1) of A (la) times B (lb) to acc, each
// slice staged in one of two buffers of smA and smB while the other is
// multiplied.
template <class T, class Ty, bool bkc, class LA, class LB>
__device__ __forceinline__ void mainloop(Acc<Ty> (&acc)[T::FM][T::FN], sptr<typename Ty::S> smA, sptr<typename Ty::S> smB,
					 LA &la, LB &lb, int s0, int s1, int wm, int wn, Async) {
	if (s0 >= s1) return;
	issue(la, smA, s0);
	issue(lb, smB, s0);
	__pipeline_commit();
	for (int s = s0; s < s1; s++) {
		int cur = (s - s0) & 1;
		if (s + 1 < s1) {
			issue(la, smA + (cur ^ 1) * T::STAGE, s + 1);
			issue(lb, smB + (cur ^ 1) * T::STAGE, s + 1);
		}
		__pipeline_commit();
		__pipeline_wait_prior(PLANTED(early_stage) ? 2 : 1); // slice s has landed (s+1 may be in flight)
		__syncthreads();
		if (!(PLANTED(skipped_slice) && s == s0 + 1))
			slice_product<T, Ty, bkc>(acc, smA + cur * T::STAGE, smB + cur * T::STAGE, wm, wn);
		__syncthreads(); // its buffer is refilled next
	}
}

template <class T, class Ty, bool bkc, class LA, class LB>
__device__ __forceinline__ void mainloop(Acc<Ty> (&acc)[T::FM][T::FN], sptr<typename Ty::S> smA, sptr<typename Ty::S> smB,
					 LA &la, LB &lb, int s0, int s1, int wm, int wn, Registers) {
	typedef typename Ty::S S;
	if (s0 >= s1) return;
	uint32_t ra[(LA::E + 1) / 2], rb[(LB::E + 1) / 2];
	Stage<Ty>::fetch(la, ra, s0);
	Stage<Ty>::fetch(lb, rb, s0);
	Stage<Ty>::put(la, ra, smA);
	Stage<Ty>::put(lb, rb, smB);
	__syncthreads();
	for (int s = s0; s < s1; s++) {
		int cur = (s - s0) & 1;
		if (s + 1 < s1) {
			Stage<Ty>::fetch(la, ra, s + 1);
			Stage<Ty>::fetch(lb, rb, s + 1);
		}
		if (!(PLANTED(skipped_slice) && s == s0 + 1))
			slice_product<T, Ty, bkc>(acc, smA + cur * T::STAGE, smB + cur * T::STAGE, wm, wn);
		if (s + 1 < s1) {
			int next = PLANTED(early_stage) ? cur : cur ^ 1; // the buffer no warp reads now
			Stage<Ty>::put(la, ra, smA + next * T::STAGE);
			Stage<Ty>::put(lb, rb, smB + next * T::STAGE);
		}
		__syncthreads();
	}
}

// epilogue hands each output of the block to store(m, n, value), m and n
// within the tile: each warp stages 16 x WN of its values in shared
// memory (over the operands' buffers, which it no longer needs) and each
// lane stores one column of them.
template <class T, class Ty, class Store>
__device__ __forceinline__ void epilogue(Acc<Ty> (&acc)[T::FM][T::FN], sptr<float> stage, int wm, int wn, Store store) {
	int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
	sptr<float> mine = stage + warp * 16 * T::LDS;
	__syncthreads();
	UNROLL
	for (int i = 0; i < T::FM; i++) {
		UNROLL
		for (int j = 0; j < T::FN; j++) wmma::store_matrix_sync(mine + 16 * j, acc[i][j], T::LDS, wmma::mem_row_major);
		__syncthreads();
		UNROLL
		for (int r = 0; r < 16; r++) store(wm * T::WM + 16 * i + r, wn * T::WN + lane, (float)mine[r * T::LDS + lane]);
		__syncthreads();
	}
}

template <class T, class Ty>
__device__ __forceinline__ void zero(Acc<Ty> (&acc)[T::FM][T::FN]) {
	UNROLL
	for (int i = 0; i < T::FM; i++)
		UNROLL
		for (int j = 0; j < T::FN; j++) wmma::fill_fragment(acc[i][j], 0.0f);
}

// ---- the data GEMMs ----

// conv_tile computes the block's tile of a data GEMM into out (Ty's
// storage), adding bias (fp32, per output channel) unless it is 0.
template <class Ty, int BM>
__device__ void conv_tile(const ConvArgs &d, u64 out, u64 in, u64 w, u64 bias, sptr<typename Ty::S> smA,
			  sptr<typename Ty::S> smB) {
	typedef Tile<Ty, BM> T;
	typedef typename Ty::S S;
	int t = threadIdx.x, wm = t / 32 / 4, wn = t / 32 % 4;
	int m0 = blockIdx.y * BM, n0 = blockIdx.x * T::BN;
	WeightLoader<T, Ty> la(GCAST(const S, w), t, m0, d);
	PixelLoader<T, Ty> lb(GCAST(const S, in), t, n0, d);
	Acc<Ty> acc[T::FM][T::FN];
	zero<T, Ty>(acc);
	mainloop<T, Ty, false>(acc, smA, smB, la, lb, 0, d.slices, wm, wn, typename Ty::Pipe());
	// Each lane stores one column: its pixel's offset, once.
	int n = n0 + wn * T::WN + (t & 31);
	i64 col = 0;
	if (n < d.N) {
		int i = n / d.Pn, p = n - i * d.Pn, y = p / d.Wn;
		col = (i64)i * d.M * d.Pn + (d.up ? 4 * y * d.Wn + 2 * (p - y * d.Wn) : p);
	}
	gptr<S> o = GCAST(S, out);
	gptr<const float> bs = GCAST(const float, bias);
	epilogue<T, Ty>(acc, SCAST(float, smA), wm, wn, [&](int mr, int nr, float v) {
		int m = m0 + mr;
		if (m >= d.M || n0 + nr >= d.N) return;
		int row = d.up ? (m >> 2) * 4 * d.Pn + ((m >> 1) & 1) * 2 * d.Wn + (m & 1) : m * d.Pn;
		if (bs) v = v + bs[d.up ? m >> 2 : m];
		store_value(Ty(), o, col + row, v);
	});
}

// conv_args is a data GEMM's geometry from a kernel's arguments.
template <class Ty>
__device__ ConvArgs conv_args(i64 NI, i64 M, i64 Cd, i64 R, i64 RW, i64 sp, i64 f, i64 g, i64 HT, i64 WT, i64 Hn, i64 Wn,
			      i64 sm, i64 sc, i64 sr, i64 up) {
	ConvArgs d = {(int)NI, (int)M, (int)Cd, (int)R, (int)RW, (int)sp, (int)f, (int)g, (int)HT, (int)WT, (int)Hn, (int)Wn,
		      (int)sm, (int)sc, (int)sr, (int)up};
	d.Pn = d.Hn * d.Wn;
	d.N = d.NI * d.Pn;
	d.HWT = d.HT * d.WT;
	d.CS = (d.Cd + Ty::BK - 1) / Ty::BK;
	d.slices = d.R * d.CS;
	return d;
}

template <class Ty>
__device__ void conv_tiles(const ConvArgs &d, i64 bm, u64 out, u64 in, u64 w, u64 bias, sptr<typename Ty::S> smA,
			   sptr<typename Ty::S> smB) {
	if (bm == 32) conv_tile<Ty, 32>(d, out, in, w, bias, smA, smB);
	else if (bm == 64) conv_tile<Ty, 64>(d, out, in, w, bias, smA, smB);
	else conv_tile<Ty, 128>(d, out, in, w, bias, smA, smB);
}

// tc_conv_tf32: a data GEMM of fp32 tensors on TF32 operands; grid
// (ceil(N/128), ceil(M/bm)).
KERNEL(tc_conv_tf32)(u64 out, u64 in, u64 w, u64 bias, i64 NI, i64 M, i64 Cd, i64 R, i64 RW, i64 sp, i64 f, i64 g, i64 HT,
		     i64 WT, i64 Hn, i64 Wn, i64 sm, i64 sc, i64 sr, i64 up, i64 bm) {
	SHARED(float, smA, (2 * Tile<TF32, 128>::STAGE));
	SHARED(float, smB, (2 * Tile<TF32, 128>::STAGE));
	ConvArgs d = conv_args<TF32>(NI, M, Cd, R, RW, sp, f, g, HT, WT, Hn, Wn, sm, sc, sr, up);
	conv_tiles<TF32>(d, bm, out, in, w, bias, SPTR(smA, 0), SPTR(smB, 0));
}

// tc_conv_16: a data GEMM of 16-bit tensors (dt 1 fp16, 2 bf16).
KERNEL(tc_conv_16)(u64 out, u64 in, u64 w, u64 bias, i64 dt, i64 NI, i64 M, i64 Cd, i64 R, i64 RW, i64 sp, i64 f, i64 g,
		   i64 HT, i64 WT, i64 Hn, i64 Wn, i64 sm, i64 sc, i64 sr, i64 up, i64 bm) {
	SHARED(uint16_t, smA, (2 * Tile<F16, 128>::STAGE));
	SHARED(uint16_t, smB, (2 * Tile<F16, 128>::STAGE));
	ConvArgs d = conv_args<F16>(NI, M, Cd, R, RW, sp, f, g, HT, WT, Hn, Wn, sm, sc, sr, up);
	if (dt == 1) conv_tiles<F16>(d, bm, out, in, w, bias, SPTR(smA, 0), SPTR(smB, 0));
	else conv_tiles<BF16>(d, bm, out, in, w, bias, SPTR(smA, 0), SPTR(smB, 0));
}

// ---- the weight GEMMs ----

// wgrad_tile computes the block's tile of a weight GEMM over its split's
// share of the depth: dw (fp32) += it, or, split, partial[split] = it.
template <class Ty, int BM>
__device__ void wgrad_tile(const WgradArgs &d, u64 dw, u64 asrc, u64 bsrc, u64 ws, sptr<typename Ty::S> smA,
			   sptr<typename Ty::S> smB, sptr<int> tab) {
	typedef Tile<Ty, BM> T;
	typedef typename Ty::S S;
	int t = threadIdx.x, wm = t / 32 / 4, wn = t / 32 % 4;
	int rowTiles = (d.M + BM - 1) / BM, split = blockIdx.y / rowTiles;
	int m0 = (blockIdx.y - split * rowTiles) * BM, n0 = blockIdx.x * T::BN;
	column_table<T>(tab, n0, d);
	PlainDepthLoader<T, Ty> la(GCAST(const S, asrc), t, m0, d);
	GatherDepthLoader<T, Ty> lb(GCAST(const S, bsrc), tab, t, d);
	int slices = (d.K + T::BK - 1) / T::BK, chunk = (slices + d.splits - 1) / d.splits;
	int s0 = min(slices, split * chunk), s1 = min(slices, s0 + chunk);
	Acc<Ty> acc[T::FM][T::FN];
	zero<T, Ty>(acc);
	mainloop<T, Ty, true>(acc, smA, smB, la, lb, s0, s1, wm, wn, typename Ty::Pipe());
	gptr<float> g = GCAST(float, d.splits > 1 ? ws : dw);
	i64 part = (i64)split * d.M * d.N;
	epilogue<T, Ty>(acc, SCAST(float, smA), wm, wn, [&](int mr, int nr, float v) {
		int m = m0 + mr, n = n0 + nr;
		if (m >= d.M || n >= d.N) return;
		if (d.splits > 1) g[part + m * d.N + n] = v;
		else g[m * d.N + n] += v;
	});
}

template <class Ty>
__device__ WgradArgs wgrad_args(i64 NI, i64 M, i64 N, i64 Hk, i64 Wk, i64 CB, i64 HB, i64 WB, i64 R, i64 RW, i64 sp, i64 f,
				i64 g, i64 splits) {
	WgradArgs d = {(int)NI, (int)M, (int)N, (int)Hk, (int)Wk, (int)CB, (int)HB, (int)WB, (int)R, (int)RW, (int)sp, (int)f, (int)g,
		       (int)splits};
	d.Pk = d.Hk * d.Wk;
	d.K = d.NI * d.Pk;
	d.HWB = d.HB * d.WB;
	return d;
}

template <class Ty>
__device__ void wgrad_tiles(const WgradArgs &d, i64 bm, u64 dw, u64 asrc, u64 bsrc, u64 ws, sptr<typename Ty::S> smA,
			    sptr<typename Ty::S> smB, sptr<int> tab) {
	if (bm == 32) wgrad_tile<Ty, 32>(d, dw, asrc, bsrc, ws, smA, smB, tab);
	else if (bm == 64) wgrad_tile<Ty, 64>(d, dw, asrc, bsrc, ws, smA, smB, tab);
	else wgrad_tile<Ty, 128>(d, dw, asrc, bsrc, ws, smA, smB, tab);
}

// tc_wgrad_tf32: a weight GEMM of fp32 tensors on TF32 operands; grid
// (ceil(N/128), ceil(M/bm) * splits).
KERNEL(tc_wgrad_tf32)(u64 dw, u64 asrc, u64 bsrc, i64 NI, i64 M, i64 N, i64 Hk, i64 Wk, i64 CB, i64 HB, i64 WB, i64 R,
		      i64 RW, i64 sp, i64 f, i64 g, i64 splits, u64 ws, i64 bm) {
	SHARED(float, smA, (2 * Tile<TF32, 128>::STAGE));
	SHARED(float, smB, (2 * Tile<TF32, 128>::STAGE));
	SHARED(int, tab, 3 * 128);
	WgradArgs d = wgrad_args<TF32>(NI, M, N, Hk, Wk, CB, HB, WB, R, RW, sp, f, g, splits);
	wgrad_tiles<TF32>(d, bm, dw, asrc, bsrc, ws, SPTR(smA, 0), SPTR(smB, 0), SPTR(tab, 0));
}

// tc_wgrad_16: a weight GEMM of 16-bit tensors (dt 1 fp16, 2 bf16).
KERNEL(tc_wgrad_16)(u64 dw, u64 asrc, u64 bsrc, i64 dt, i64 NI, i64 M, i64 N, i64 Hk, i64 Wk, i64 CB, i64 HB, i64 WB, i64 R,
		    i64 RW, i64 sp, i64 f, i64 g, i64 splits, u64 ws, i64 bm) {
	SHARED(uint16_t, smA, (2 * Tile<F16, 128>::STAGE));
	SHARED(uint16_t, smB, (2 * Tile<F16, 128>::STAGE));
	SHARED(int, tab, 3 * 128);
	WgradArgs d = wgrad_args<F16>(NI, M, N, Hk, Wk, CB, HB, WB, R, RW, sp, f, g, splits);
	if (dt == 1) wgrad_tiles<F16>(d, bm, dw, asrc, bsrc, ws, SPTR(smA, 0), SPTR(smB, 0), SPTR(tab, 0));
	else wgrad_tiles<BF16>(d, bm, dw, asrc, bsrc, ws, SPTR(smA, 0), SPTR(smB, 0), SPTR(tab, 0));
}
