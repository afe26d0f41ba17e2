// memunet's CUDA kernels: every backend.Backend operation but the
// convolutions (gemm.cu). Compiled (cudagen.go) with -fmad=false, so that
// each float operation is rounded on its own as in the CPU backend's Go
// code, and with IEEE division and square root (nvcc's defaults).
//
// Conventions, for every kernel:
//   - parameters are 64 bits each (pointers, long long, double): the Go
//     side (backend/cuda's launchGrid) passes every argument as 8 bytes;
//     float arguments come as double and are exactly the float32 value;
//   - memory is reached only through gptr/GCAST and SHARED (below), which
//     the emulator checks; blocks share no word they write but through
//     atomics;
//   - tensors are NCHW; dtypes are backend.DType's values: 0 fp32, 1 fp16,
//     2 bf16 (raw bits), 3 u8;
//   - elementwise kernels loop grid-stride over their elements, so any grid
//     covers any size;
//   - reductions are per block in a fixed order (no float atomics), so every
//     result is the same from run to run.

#include <stdint.h>

typedef long long i64;
typedef unsigned long long u64;

// KERNEL declares an entry point (backend/cuda/emu redefines it to compile
// the kernels for the host).
#ifndef KERNEL
#define KERNEL(name) extern "C" __global__ void name
#endif

// gptr<T> is a pointer to global memory of T, GCAST(T, p) a 64-bit argument
// or pointer p as one, and SHARED/SHARED2 declare a block's shared array
// (backend/cuda/emu redefines them to check every access: its bounds, and
// races between threads and between blocks).
#ifndef GCAST
template <class T>
using gptr = T *;
#define GCAST(T, p) ((T *)(p))
#define SHARED(T, name, n) __shared__ T name[n]
#define SHARED2(T, name, n, m) __shared__ T name[n][m]
#endif

#define GRID_STRIDE(i, n) \
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

#define IGNORE_INDEX 255

// ---- 16-bit formats: half.h (backend/half.go's functions, bit for bit) ----

#include "half.h"

// load reads value i of a float tensor of dtype dt as float32.
__device__ __forceinline__ float load(gptr<const void> p, int dt, i64 i) {
	if (dt == 0) return GCAST(const float, p)[i];
	uint16_t h = GCAST(const uint16_t, p)[i];
	return dt == 1 ? f16_to_f32(h) : bf16_to_f32(h);
}

// store writes v into value i of a float tensor of dtype dt, rounded to it.
__device__ __forceinline__ void store(gptr<void> p, int dt, i64 i, float v) {
	if (dt == 0) GCAST(float, p)[i] = v;
	else GCAST(uint16_t, p)[i] = dt == 1 ? f32_to_f16(v) : f32_to_bf16(v);
}

// In reads a float tensor of any dtype as float32 values; Out writes one,
// rounding to its dtype (and reads it back).
struct In {
	gptr<const void> p;
	int dt;
	__device__ __forceinline__ float operator[](i64 i) const { return load(p, dt, i); }
};
struct Out {
	gptr<void> p;
	int dt;
	__device__ __forceinline__ void set(i64 i, float v) const { store(p, dt, i, v); }
	__device__ __forceinline__ float operator[](i64 i) const { return load(GCAST(const void, p), dt, i); }
};

__device__ __forceinline__ In input(u64 p, i64 dt) {
	In t = {GCAST(const void, p), (int)dt};
	return t;
}
__device__ __forceinline__ Out output(u64 p, i64 dt) {
	Out t = {GCAST(void, p), (int)dt};
	return t;
}

// ---- transfer ----

KERNEL(convert)(u64 dst, i64 ddt, u64 src, i64 sdt, i64 n) {
	In x = input(src, sdt);
	Out y = output(dst, ddt);
	GRID_STRIDE(i, n) y.set(i, x[i]);
}

// ---- pointwise ----

// relu: max(x, 0) on bit patterns: negative values and -0 become +0; NaN
// (of either sign) and non-negative values pass through.
KERNEL(relu)(u64 out, u64 in, i64 dt, i64 n) {
	if (dt == 0) {
		gptr<const uint32_t> x = GCAST(const uint32_t, in);
		gptr<uint32_t> y = GCAST(uint32_t, out);
		GRID_STRIDE(i, n) {
			uint32_t b = x[i];
			bool neg = (b & 0x80000000u) && (b & 0x7fffffffu) <= 0x7f800000u;
			y[i] = neg ? 0u : b;
		}
		return;
	}
	uint16_t inf = dt == 1 ? 0x7c00u : 0x7f80u;
	gptr<const uint16_t> x = GCAST(const uint16_t, in);
	gptr<uint16_t> y = GCAST(uint16_t, out);
	GRID_STRIDE(i, n) {
		uint16_t b = x[i];
		bool neg = (b & 0x8000u) && (b & 0x7fffu) <= inf;
		y[i] = neg ? 0 : b;
	}
}

// relu_back: din = dout where out is positive, non-zero and not NaN, else +0.
KERNEL(relu_back)(u64 din, u64 dout, u64 out, i64 dt, i64 n) {
	if (dt == 0) {
		gptr<const uint32_t> y = GCAST(const uint32_t, out), g = GCAST(const uint32_t, dout);
		gptr<uint32_t> d = GCAST(uint32_t, din);
		GRID_STRIDE(i, n) {
			uint32_t b = y[i];
			d[i] = (b >= 1u && b <= 0x7f800000u) ? g[i] : 0u;
		}
		return;
	}
	uint16_t inf = dt == 1 ? 0x7c00u : 0x7f80u;
	gptr<const uint16_t> y = GCAST(const uint16_t, out), g = GCAST(const uint16_t, dout);
	gptr<uint16_t> d = GCAST(uint16_t, din);
	GRID_STRIDE(i, n) {
		uint16_t b = y[i];
		d[i] = (b >= 1u && b <= inf) ? g[i] : (uint16_t)0;
	}
}

// pack_bits is mask byte j: bit k is pass(8j+k), for the values below n
// (the last byte's spare bits 0).
template <typename Pass>
__device__ __forceinline__ uint8_t pack_bits(i64 j, i64 n, Pass pass) {
	uint32_t bits = 0;
	for (int k = 0; k < 8 && 8 * j + k < n; k++) bits |= (uint32_t)pass(8 * j + k) << k;
	return (uint8_t)bits;
}

// relu_mask: bit i%8 of mask[i/8] is set where out[i] passes relu_back's
// test (positive, non-zero, not NaN); the last byte's spare bits are 0. One
// thread a byte.
KERNEL(relu_mask)(u64 mask, u64 out, i64 dt, i64 n) {
	gptr<uint8_t> m = GCAST(uint8_t, mask);
	uint16_t inf = dt == 1 ? 0x7c00u : 0x7f80u;
	GRID_STRIDE(j, (n + 7) / 8) {
		m[j] = pack_bits(j, n, [&](i64 i) {
			if (dt == 0) {
				uint32_t b = GCAST(const uint32_t, out)[i];
				return b >= 1u && b <= 0x7f800000u;
			}
			uint16_t b = GCAST(const uint16_t, out)[i];
			return b >= 1u && b <= inf;
		});
	}
}

// relu_and_mask: relu of in into out and relu_mask of that out into mask,
// in one pass (out may be in); one thread a byte of mask.
KERNEL(relu_and_mask)(u64 out, u64 mask, u64 in, i64 dt, i64 n) {
	gptr<uint8_t> m = GCAST(uint8_t, mask);
	uint16_t inf = dt == 1 ? 0x7c00u : 0x7f80u;
	GRID_STRIDE(j, (n + 7) / 8) {
		m[j] = pack_bits(j, n, [&](i64 i) {
			if (dt == 0) {
				uint32_t b = GCAST(const uint32_t, in)[i];
				uint32_t y = (b & 0x80000000u) && (b & 0x7fffffffu) <= 0x7f800000u ? 0u : b;
				GCAST(uint32_t, out)[i] = y;
				return y >= 1u && y <= 0x7f800000u;
			}
			uint16_t b = GCAST(const uint16_t, in)[i];
			uint16_t y = (b & 0x8000u) && (b & 0x7fffu) <= inf ? (uint16_t)0 : b;
			GCAST(uint16_t, out)[i] = y;
			return y >= 1u && y <= inf;
		});
	}
}

// relu_back_mask: din = dout where relu_mask's bit is set, else +0.
KERNEL(relu_back_mask)(u64 din, u64 dout, u64 mask, i64 dt, i64 n) {
	gptr<const uint8_t> m = GCAST(const uint8_t, mask);
	if (dt == 0) {
		gptr<const uint32_t> g = GCAST(const uint32_t, dout);
		gptr<uint32_t> d = GCAST(uint32_t, din);
		GRID_STRIDE(i, n) {
			d[i] = (m[i >> 3] >> (i & 7)) & 1u ? g[i] : 0u;
		}
		return;
	}
	gptr<const uint16_t> g = GCAST(const uint16_t, dout);
	gptr<uint16_t> d = GCAST(uint16_t, din);
	GRID_STRIDE(i, n) {
		d[i] = (m[i >> 3] >> (i & 7)) & 1u ? g[i] : (uint16_t)0;
	}
}

// max_pool2: the maximum of each 2x2 window (the first on ties, a NaN
// winning), its position 0..3 into argmax (when argmax is not 0); tensors
// of dtype dt (the maximum is one of the window's values: no rounding).
KERNEL(max_pool2)(u64 out, u64 argmax, u64 in, i64 dt, i64 planes, i64 H, i64 W) {
	In x = input(in, dt);
	Out y = output(out, dt);
	gptr<uint8_t> idx = GCAST(uint8_t, argmax);
	i64 OH = H / 2, OW = W / 2;
	GRID_STRIDE(o, planes * OH * OW) {
		i64 p = o / (OH * OW), r = o % (OH * OW), oy = r / OW, ox = r % OW;
		i64 r0 = p * H * W + 2 * oy * W + 2 * ox, r1 = r0 + W;
		float best = x[r0];
		uint8_t at = 0;
		float v = x[r0 + 1];
		if (v > best || v != v) { best = v; at = 1; }
		v = x[r1];
		if (v > best || v != v) { best = v; at = 2; }
		v = x[r1 + 1];
		if (v > best || v != v) { best = v; at = 3; }
		y.set(o, best);
		if (idx) idx[o] = at;
	}
}

// max_pool2_back: each input gets its window's dout value where the window's
// maximum was, +0 elsewhere (odd last rows and columns included).
KERNEL(max_pool2_back)(u64 din, u64 dout, u64 argmax, i64 dt, i64 planes, i64 H, i64 W) {
	In dy = input(dout, dt);
	gptr<const uint8_t> idx = GCAST(const uint8_t, argmax);
	Out dx = output(din, dt);
	i64 OH = H / 2, OW = W / 2;
	GRID_STRIDE(i, planes * H * W) {
		i64 p = i / (H * W), r = i % (H * W), y = r / W, xx = r % W;
		float g = 0.0f;
		if (y < 2 * OH && xx < 2 * OW) {
			i64 o = (p * OH + y / 2) * OW + xx / 2;
			if (idx[o] == (uint8_t)((y % 2) * 2 + xx % 2)) g = dy[o];
		}
		dx.set(i, g);
	}
}

// upsample2: bilinear, align_corners=False, scale 2 (backend/cpu's
// separable weights: rows blended first, then along the row).
KERNEL(upsample2)(u64 out, u64 in, i64 dt, i64 planes, i64 H, i64 W) {
	In x = input(in, dt);
	Out y = output(out, dt);
	i64 OW = 2 * W;
	GRID_STRIDE(o, planes * 4 * H * W) {
		i64 p = o / (4 * H * W), r = o % (4 * H * W), oy = r / OW, ox = r % OW;
		i64 i = oy / 2, src = p * H * W, r0, r1;
		float a, b;
		if (oy % 2 == 0) {
			r0 = src + (i > 0 ? i - 1 : 0) * W; r1 = src + i * W; a = 0.25f; b = 0.75f;
		} else {
			r0 = src + i * W; r1 = src + (i + 1 < H ? i + 1 : H - 1) * W; a = 0.75f; b = 0.25f;
		}
		float v;
		if (ox == 0) {
			v = a * x[r0] + b * x[r1];
		} else if (ox == OW - 1) {
			v = a * x[r0 + W - 1] + b * x[r1 + W - 1];
		} else {
			i64 j = (ox - 1) / 2; // ox is 2j+1 (0.75, 0.25) or 2j+2 (0.25, 0.75)
			float cur = a * x[r0 + j] + b * x[r1 + j];
			float next = a * x[r0 + j + 1] + b * x[r1 + j + 1];
			v = (ox % 2 == 1) ? 0.75f * cur + 0.25f * next : 0.25f * cur + 0.75f * next;
		}
		y.set(o, v);
	}
}

// upsample2_back: the adjoint, gathered per input pixel from the output
// rows 2i-1 .. 2i+2 and columns 2j-1 .. 2j+2 (clamped), as backend/cpu sums.
KERNEL(upsample2_back)(u64 din, u64 dout, i64 dt, i64 planes, i64 H, i64 W) {
	In dy = input(dout, dt);
	Out dx = output(din, dt);
	i64 OW = 2 * W;
	GRID_STRIDE(idx, planes * H * W) {
		i64 p = idx / (H * W), r = idx % (H * W), i = r / W, j = r % W;
		i64 g = p * 4 * H * W;
		i64 gu = g + (2 * i - 1 > 0 ? 2 * i - 1 : 0) * OW;
		i64 ge = g + 2 * i * OW;
		i64 go = g + (2 * i + 1) * OW;
		i64 gd = g + (2 * i + 2 < 2 * H - 1 ? 2 * i + 2 : 2 * H - 1) * OW;
#define COL(c) (0.25f * (dy[gu + (c)] + dy[gd + (c)]) + 0.75f * (dy[ge + (c)] + dy[go + (c)]))
		float e = COL(2 * j);
		float o = COL(2 * j + 1);
		float prevO = j > 0 ? COL(2 * j - 1) : e;
		float next = j + 1 < W ? COL(2 * j + 2) : o;
#undef COL
		dx.set(idx, 0.25f * (prevO + next) + 0.75f * (e + o));
	}
}

// concat_t: out's sample s is skip's sample s then up's (values of T).
template <class T>
__device__ void concat_t(u64 out, u64 skip, u64 up, i64 n, i64 sw, i64 uw) {
	gptr<T> o = GCAST(T, out);
	gptr<const T> s = GCAST(const T, skip), u = GCAST(const T, up);
	GRID_STRIDE(i, n * (sw + uw)) {
		i64 smp = i / (sw + uw), r = i % (sw + uw);
		o[i] = r < sw ? s[smp * sw + r] : u[smp * uw + r - sw];
	}
}

// concat: sw and uw values of esize bytes (1, 2 or 4) per sample.
KERNEL(concat)(u64 out, u64 skip, u64 up, i64 n, i64 sw, i64 uw, i64 esize) {
	if (esize == 4) concat_t<uint32_t>(out, skip, up, n, sw, uw);
	else if (esize == 2) concat_t<uint16_t>(out, skip, up, n, sw, uw);
	else concat_t<uint8_t>(out, skip, up, n, sw, uw);
}

template <class T>
__device__ void split_t(u64 dskip, u64 dup, u64 dout, i64 n, i64 sw, i64 uw) {
	gptr<const T> g = GCAST(const T, dout);
	gptr<T> s = GCAST(T, dskip), u = GCAST(T, dup);
	GRID_STRIDE(i, n * (sw + uw)) {
		i64 smp = i / (sw + uw), r = i % (sw + uw);
		if (r < sw) s[smp * sw + r] = g[i];
		else u[smp * uw + r - sw] = g[i];
	}
}

// split is concat's adjoint.
KERNEL(split)(u64 dskip, u64 dup, u64 dout, i64 n, i64 sw, i64 uw, i64 esize) {
	if (esize == 4) split_t<uint32_t>(dskip, dup, dout, n, sw, uw);
	else if (esize == 2) split_t<uint16_t>(dskip, dup, dout, n, sw, uw);
	else split_t<uint8_t>(dskip, dup, dout, n, sw, uw);
}

KERNEL(add)(u64 out, u64 x, u64 y, i64 dt, i64 n) {
	In a = input(x, dt), b = input(y, dt);
	Out o = output(out, dt);
	GRID_STRIDE(i, n) o.set(i, a[i] + b[i]);
}

// ---- block reductions (fixed order: the same result every run) ----

#define RED_THREADS 256

// block_sum2 sums a and b over the block's threads (blockDim.x ==
// RED_THREADS) and returns the totals to every thread.
__device__ void block_sum2(double &a, double &b) {
	SHARED(double, sa, RED_THREADS);
	SHARED(double, sb, RED_THREADS);
	sa[threadIdx.x] = a;
	sb[threadIdx.x] = b;
	__syncthreads();
	for (int s = RED_THREADS / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s) {
			sa[threadIdx.x] += sa[threadIdx.x + s];
			sb[threadIdx.x] += sb[threadIdx.x + s];
		}
		__syncthreads();
	}
	a = sa[0];
	b = sb[0];
	__syncthreads();
}

// ---- batch norm: one block per channel ----

// batch_norm: statistics (unless reuse) as float64 sums shifted by the
// channel's first value, saved as float32 mean and invstd; out from those
// float32 statistics; with update, the running statistics move by momentum
// towards the batch's (unbiased variance).
KERNEL(batch_norm)(u64 out, u64 in, u64 stats, u64 gamma, u64 beta, u64 rmean, u64 rvar,
		i64 N, i64 C, i64 HW, double eps, double momentum, i64 reuse, i64 update) {
	gptr<const float> x = GCAST(const float, in);
	gptr<float> y = GCAST(float, out);
	gptr<float> mean = GCAST(float, stats), inv = mean + C;
	i64 c = blockIdx.x, M = N * HW;
	double variance = 0, ss = 0;
	if (!reuse) {
		double k = x[c * HW];
		double s = 0, q = 0;
		for (i64 e = threadIdx.x; e < M; e += blockDim.x) {
			i64 n = e / HW, p = e % HW;
			double d = (double)x[(n * C + c) * HW + p] - k;
			s += d;
			q += d * d;
		}
		block_sum2(s, q);
		double d = s / (double)M;
		ss = fmax(q - s * d, 0.0);
		variance = ss / (double)M;
		if (threadIdx.x == 0) {
			mean[c] = (float)(k + d);
			inv[c] = (float)(1.0 / sqrt(variance + eps));
		}
		__syncthreads();
	}
	double mu = mean[c], invstd = inv[c];
	gptr<const float> g = GCAST(const float, gamma), b = GCAST(const float, beta);
	float scale = (float)((double)g[c] * invstd);
	float shift = (float)((double)b[c] - mu * (double)g[c] * invstd);
	for (i64 e = threadIdx.x; e < M; e += blockDim.x) {
		i64 i = ((e / HW) * C + c) * HW + e % HW;
		y[i] = x[i] * scale + shift;
	}
	if (update && threadIdx.x == 0) {
		gptr<float> rm = GCAST(float, rmean), rv = GCAST(float, rvar);
		double unbiased = M > 1 ? ss / (double)(M - 1) : variance;
		rm[c] = (float)((1 - momentum) * (double)rm[c] + momentum * (double)mean[c]);
		rv[c] = (float)((1 - momentum) * (double)rv[c] + momentum * unbiased);
	}
}

// batch_norm_eval: normalize with the running statistics.
KERNEL(batch_norm_eval)(u64 out, u64 in, u64 gamma, u64 beta, u64 rmean, u64 rvar,
		i64 N, i64 C, i64 HW, double eps) {
	gptr<const float> x = GCAST(const float, in), g = GCAST(const float, gamma), b = GCAST(const float, beta);
	gptr<const float> rm = GCAST(const float, rmean), rv = GCAST(const float, rvar);
	gptr<float> y = GCAST(float, out);
	GRID_STRIDE(i, N * C * HW) {
		i64 c = (i / HW) % C;
		double invstd = 1.0 / sqrt((double)rv[c] + eps);
		float scale = (float)((double)g[c] * invstd);
		float shift = b[c] - rm[c] * scale;
		y[i] = x[i] * scale + shift;
	}
}

// batch_norm_back: dgamma, dbeta += and din (which may be dout: every read
// of the channel happens before its first write).
KERNEL(batch_norm_back)(u64 din, u64 dgamma, u64 dbeta, u64 dout, u64 in, u64 stats, u64 gamma,
		i64 N, i64 C, i64 HW) {
	gptr<const float> x = GCAST(const float, in), dy = GCAST(const float, dout);
	gptr<const float> mean = GCAST(const float, stats), inv = mean + C;
	gptr<float> dx = GCAST(float, din);
	i64 c = blockIdx.x, M = N * HW;
	float mu = mean[c], invstd = inv[c];
	double sdy = 0, sdyx = 0;
	for (i64 e = threadIdx.x; e < M; e += blockDim.x) {
		i64 i = ((e / HW) * C + c) * HW + e % HW;
		double g = dy[i];
		sdy += g;
		sdyx += g * ((double)x[i] - (double)mu);
	}
	block_sum2(sdy, sdyx);
	sdyx *= (double)invstd;
	if (threadIdx.x == 0) {
		GCAST(float, dgamma)[c] += (float)sdyx;
		GCAST(float, dbeta)[c] += (float)sdy;
	}
	float k = GCAST(const float, gamma)[c] * invstd;
	float mdy = (float)(sdy / (double)M), mdyx = (float)(sdyx / (double)M);
	float ka = k, bx = -k * invstd * mdyx, c0 = -k * mdy;
	for (i64 e = threadIdx.x; e < M; e += blockDim.x) {
		i64 i = ((e / HW) * C + c) * HW + e % HW;
		dx[i] = ka * dy[i] + bx * (x[i] - mu) + c0;
	}
}

// ---- group norm ----

// group_norm: one block per (sample, group).
KERNEL(group_norm)(u64 out, u64 in, u64 stats, u64 gamma, u64 beta,
		i64 N, i64 C, i64 HW, i64 G, double eps, i64 reuse) {
	gptr<const float> x = GCAST(const float, in);
	gptr<float> y = GCAST(float, out);
	gptr<float> mean = GCAST(float, stats), inv = mean + N * G;
	i64 ng = blockIdx.x, cg = C / G, size = cg * HW;
	gptr<const float> xs = x + ng * size;
	if (!reuse) {
		double k = xs[0];
		double s = 0, q = 0;
		for (i64 e = threadIdx.x; e < size; e += blockDim.x) {
			double d = (double)xs[e] - k;
			s += d;
			q += d * d;
		}
		block_sum2(s, q);
		if (threadIdx.x == 0) {
			double d = s / (double)size;
			double ss = fmax(q - s * d, 0.0);
			mean[ng] = (float)(k + d);
			inv[ng] = (float)(1.0 / sqrt(ss / (double)size + eps));
		}
		__syncthreads();
	}
	double mu = mean[ng], invstd = inv[ng];
	gptr<const float> g = GCAST(const float, gamma), b = GCAST(const float, beta);
	for (i64 e = threadIdx.x; e < size; e += blockDim.x) {
		i64 c = (ng % G) * cg + e / HW;
		float scale = (float)((double)g[c] * invstd);
		float shift = (float)((double)b[c] - mu * (double)g[c] * invstd);
		y[ng * size + e] = xs[e] * scale + shift;
	}
}

// group_norm_params_back: dgamma, dbeta += per channel (one block each).
KERNEL(group_norm_params_back)(u64 dgamma, u64 dbeta, u64 dout, u64 in, u64 stats,
		i64 N, i64 C, i64 HW, i64 G) {
	gptr<const float> x = GCAST(const float, in), dy = GCAST(const float, dout);
	gptr<const float> mean = GCAST(const float, stats), inv = mean + N * G;
	i64 c = blockIdx.x, cg = C / G;
	double sdy = 0, sdyx = 0;
	for (i64 e = threadIdx.x; e < N * HW; e += blockDim.x) {
		i64 n = e / HW, ng = n * G + c / cg;
		i64 i = (n * C + c) * HW + e % HW;
		double g = dy[i];
		sdy += g;
		sdyx += g * ((double)x[i] - (double)mean[ng]) * (double)inv[ng];
	}
	block_sum2(sdy, sdyx);
	if (threadIdx.x == 0) {
		GCAST(float, dgamma)[c] += (float)sdyx;
		GCAST(float, dbeta)[c] += (float)sdy;
	}
}

// group_norm_back: din per (sample, group), one block each; din may be dout.
KERNEL(group_norm_back)(u64 din, u64 dout, u64 in, u64 stats, u64 gamma,
		i64 N, i64 C, i64 HW, i64 G) {
	gptr<const float> x = GCAST(const float, in), dy = GCAST(const float, dout), gm = GCAST(const float, gamma);
	gptr<const float> mean = GCAST(const float, stats), inv = mean + N * G;
	gptr<float> dx = GCAST(float, din);
	i64 ng = blockIdx.x, cg = C / G, size = cg * HW, base = ng * size;
	float mu = mean[ng], invstd = inv[ng];
	double s = 0, sx = 0;
	for (i64 e = threadIdx.x; e < size; e += blockDim.x) {
		double g = (double)gm[(ng % G) * cg + e / HW] * (double)dy[base + e];
		s += g;
		sx += g * ((double)x[base + e] - (double)mu);
	}
	block_sum2(s, sx);
	sx *= (double)invstd;
	float ms = (float)(s / (double)size), msx = (float)(sx / (double)size);
	float bx = -invstd * invstd * msx, c0 = -invstd * ms;
	for (i64 e = threadIdx.x; e < size; e += blockDim.x) {
		float a = invstd * gm[(ng % G) * cg + e / HW];
		dx[base + e] = a * dy[base + e] + bx * (x[base + e] - mu) + c0;
	}
}

// ---- loss ----

// softmax_terms: the maximum of the K logits at stride (NaN if any is) and
// the float64 sum of exp(z - max).
__device__ __forceinline__ void softmax_terms(gptr<const float> z, i64 K, i64 stride, float &mx, double &se) {
	mx = -INFINITY;
	for (i64 k = 0; k < K; k++) {
		float v = z[k * stride];
		mx = (v != v || mx != mx) ? __int_as_float(0x7fc00000) : fmaxf(mx, v);
	}
	se = 0;
	for (i64 k = 0; k < K; k++) se += exp((double)(z[k * stride] - mx));
}

// cross_entropy: each block writes its partial float64 loss sum and pixel
// count to partial[2*block] (the count as a double, exact below 2^53); a
// target that is neither a class nor IGNORE_INDEX raises bad[n] to the
// largest such value + 1 of its sample (integer atomics: deterministic).
KERNEL(cross_entropy)(u64 partial, u64 bad, u64 logits, u64 target, i64 N, i64 K, i64 HW) {
	gptr<const float> z = GCAST(const float, logits);
	gptr<const uint8_t> tg = GCAST(const uint8_t, target);
	double sum = 0, count = 0;
	GRID_STRIDE(i, N * HW) {
		i64 n = i / HW, p = i % HW;
		int t = tg[i];
		if (t == IGNORE_INDEX) continue;
		if (t >= K) {
			atomicMax(GCAST(int, bad) + n, t + 1);
			continue;
		}
		float mx;
		double se;
		softmax_terms(z + n * K * HW + p, K, HW, mx, se);
		sum += log(se) - (double)(z[(n * K + t) * HW + p] - mx);
		count += 1;
	}
	block_sum2(sum, count);
	if (threadIdx.x == 0) {
		GCAST(double, partial)[2 * blockIdx.x] = sum;
		GCAST(double, partial)[2 * blockIdx.x + 1] = count;
	}
}

// cross_entropy_back: dlogits = k*(softmax - onehot) at counted pixels, 0 at
// ignored ones (everywhere when k is 0); each pixel reads its K logits
// before writing, so dlogits may be logits.
KERNEL(cross_entropy_back)(u64 dlogits, u64 logits, u64 target, i64 N, i64 K, i64 HW, double kd) {
	gptr<const float> z = GCAST(const float, logits);
	gptr<float> g = GCAST(float, dlogits);
	gptr<const uint8_t> tg = GCAST(const uint8_t, target);
	float k = (float)kd;
	GRID_STRIDE(i, N * HW) {
		i64 n = i / HW, p = i % HW;
		int t = tg[i];
		if (t == IGNORE_INDEX || k == 0.0f) {
			for (i64 c = 0; c < K; c++) g[(n * K + c) * HW + p] = 0.0f;
			continue;
		}
		float mx;
		double se;
		softmax_terms(z + n * K * HW + p, K, HW, mx, se);
		for (i64 c = 0; c < K; c++) {
			i64 idx = (n * K + c) * HW + p;
			float prob = (float)(exp((double)(z[idx] - mx)) / se);
			if (c == t) prob -= 1.0f;
			g[idx] = k * prob;
		}
	}
}

// focal_q: 1 - p_t summed from the other classes' terms (exact where p_t
// is near 1), for the K logits at stride with max mx and sum se.
__device__ __forceinline__ double focal_q(gptr<const float> z, i64 K, i64 stride, i64 t, float mx, double se) {
	double q = 0;
	for (i64 c = 0; c < K; c++)
		if (c != t) q += exp((double)(z[c * stride] - mx));
	return q / se;
}

// loss_sums: block c sums class c's four values over every pixel
// (backend.LossSums; no atomics, so the sums are deterministic) into
// sums[4*c..4*c+3]: the focal term and count of pixels with t = c, their
// p_c, and p_c over all counted pixels. Block 0 also flags bad targets.
KERNEL(loss_sums)(u64 sums, u64 bad, u64 logits, u64 target, i64 N, i64 K, i64 HW, double gamma) {
	gptr<const float> z = GCAST(const float, logits);
	gptr<const uint8_t> tg = GCAST(const uint8_t, target);
	i64 c = blockIdx.x;
	double focal = 0, count = 0, inter = 0, pred = 0;
	for (i64 i = threadIdx.x; i < N * HW; i += blockDim.x) {
		i64 n = i / HW, p = i % HW;
		int t = tg[i];
		if (t == IGNORE_INDEX) continue;
		if (t >= K) {
			if (c == 0) atomicMax(GCAST(int, bad) + n, t + 1);
			continue;
		}
		gptr<const float> zp = z + n * K * HW + p;
		float mx;
		double se;
		softmax_terms(zp, K, HW, mx, se);
		double pc = exp((double)(zp[c * HW] - mx)) / se;
		pred += pc;
		if (t == c) {
			double nll = log(se) - (double)(zp[c * HW] - mx);
			focal += gamma == 0 ? nll : pow(focal_q(zp, K, HW, c, mx, se), gamma) * nll;
			count += 1;
			inter += pc;
		}
	}
	block_sum2(focal, count);
	block_sum2(inter, pred);
	if (threadIdx.x == 0) {
		gptr<double> out = GCAST(double, sums) + 4 * c;
		out[0] = focal;
		out[1] = count;
		out[2] = inter;
		out[3] = pred;
	}
}

// loss_back: backend.LossBack, coef (3K floats) on the device; each pixel
// reads its K logits before writing, so dlogits may be logits.
KERNEL(loss_back)(u64 dlogits, u64 logits, u64 target, u64 coefs, i64 N, i64 K, i64 HW, double gamma) {
	gptr<const float> z = GCAST(const float, logits);
	gptr<float> g = GCAST(float, dlogits);
	gptr<const uint8_t> tg = GCAST(const uint8_t, target);
	gptr<const float> coef = GCAST(const float, coefs);
	GRID_STRIDE(i, N * HW) {
		i64 n = i / HW, p = i % HW;
		int t = tg[i];
		if (t == IGNORE_INDEX) {
			for (i64 c = 0; c < K; c++) g[(n * K + c) * HW + p] = 0.0f;
			continue;
		}
		gptr<const float> zp = z + n * K * HW + p;
		float mx;
		double se;
		softmax_terms(zp, K, HW, mx, se);
		double f = 1;
		if (gamma != 0) {
			double q = focal_q(zp, K, HW, t, mx, se);
			double logp = (double)(zp[t * HW] - mx) - log(se);
			f = q <= 0 ? 0 : pow(q, gamma) - gamma * (exp((double)(zp[t * HW] - mx)) / se) * pow(q, gamma - 1) * logp;
		}
		double a = (double)coef[t] * f, dot = 0;
		for (i64 c = 0; c < K; c++) {
			double d = (double)coef[2 * K + c] + (c == t ? (double)coef[K + c] : 0.0);
			dot += exp((double)(zp[c * HW] - mx)) / se * d;
		}
		gptr<float> gp = g + n * K * HW + p;
		for (i64 c = 0; c < K; c++) {
			double prob = exp((double)(zp[c * HW] - mx)) / se;
			double d = (double)coef[2 * K + c] + (c == t ? (double)coef[K + c] : 0.0);
			double v = a * prob + prob * (d - dot);
			if (c == t) v -= a;
			gp[c * HW] = (float)v;
		}
	}
}

// ---- metrics ----

// argmax_at: the first largest of K values at stride (NaN is never larger).
__device__ __forceinline__ int argmax_at(gptr<const void> z, int dt, i64 base, i64 K, i64 stride) {
	float best = load(z, dt, base);
	int arg = 0;
	for (i64 k = 1; k < K; k++) {
		float v = load(z, dt, base + k * stride);
		if (v > best) { best = v; arg = (int)k; }
	}
	return arg;
}

KERNEL(confusion)(u64 counts, u64 logits, i64 dt, u64 target, i64 N, i64 K, i64 HW) {
	gptr<const uint8_t> tg = GCAST(const uint8_t, target);
	GRID_STRIDE(i, N * HW) {
		int t = tg[i];
		if (t == IGNORE_INDEX || t >= K) continue;
		i64 n = i / HW, p = i % HW;
		int pred = argmax_at(GCAST(const void, logits), (int)dt, n * K * HW + p, K, HW);
		atomicAdd(GCAST(u64, counts) + (i64)t * K + pred, 1ull);
	}
}

KERNEL(argmax)(u64 classes, u64 logits, i64 dt, i64 N, i64 K, i64 HW) {
	gptr<uint8_t> out = GCAST(uint8_t, classes);
	GRID_STRIDE(i, N * HW) {
		i64 n = i / HW, p = i % HW;
		out[i] = (uint8_t)argmax_at(GCAST(const void, logits), (int)dt, n * K * HW + p, K, HW);
	}
}

// ---- optimizer ----

// adam: backend.AdamStep's update, in its order of float32 operations.
KERNEL(adam)(u64 w, u64 g, u64 m, u64 v, i64 n, double stepSize, double sqrtBC2,
		double beta1, double beta2, double omb1, double omb2, double eps, double wd, double decoupled) {
	gptr<float> ws = GCAST(float, w), ms = GCAST(float, m), vs = GCAST(float, v);
	gptr<const float> gs = GCAST(const float, g);
	float a = (float)stepSize, sb = (float)sqrtBC2, b1 = (float)beta1, b2 = (float)beta2;
	float o1 = (float)omb1, o2 = (float)omb2, ep = (float)eps, d = (float)wd, dc = (float)decoupled;
	GRID_STRIDE(j, n) {
		if (dc != 0.0f) ws[j] = ws[j] * dc;
		float gj = gs[j];
		if (d != 0.0f) gj = gj + d * ws[j];
		ms[j] = b1 * ms[j] + o1 * gj;
		vs[j] = b2 * vs[j] + o2 * gj * gj;
		float denom = (float)sqrt((double)vs[j]) / sb + ep;
		ws[j] = ws[j] - a * ms[j] / denom;
	}
}

// sgd: backend.SGDStep's update, in its order of float32 operations.
KERNEL(sgd)(u64 w, u64 g, u64 buf, i64 n, double lr, double momentum, double dampening, double wd, i64 nesterov, i64 first) {
	gptr<float> ws = GCAST(float, w), bs = GCAST(float, buf);
	gptr<const float> gs = GCAST(const float, g);
	float a = (float)lr, mo = (float)momentum, da = (float)dampening, d = (float)wd;
	GRID_STRIDE(j, n) {
		float x = gs[j];
		if (d != 0.0f) x = x + d * ws[j];
		if (mo != 0.0f) {
			bs[j] = first ? x : mo * bs[j] + (1.0f - da) * x;
			x = nesterov ? x + mo * bs[j] : bs[j];
		}
		ws[j] = ws[j] - a * x;
	}
}

// rmsprop: backend.RMSpropStep's update, in its order of float32 operations.
KERNEL(rmsprop)(u64 w, u64 g, u64 sq, u64 buf, i64 n, double lr, double alpha, double oma, double eps, double wd, double momentum) {
	gptr<float> ws = GCAST(float, w), ss = GCAST(float, sq), bs = GCAST(float, buf);
	gptr<const float> gs = GCAST(const float, g);
	float a = (float)lr, al = (float)alpha, om = (float)oma, ep = (float)eps, d = (float)wd, mo = (float)momentum;
	GRID_STRIDE(j, n) {
		float x = gs[j];
		if (d != 0.0f) x = x + d * ws[j];
		ss[j] = al * ss[j] + om * x * x;
		float avg = (float)sqrt((double)ss[j]) + ep;
		if (mo != 0.0f) {
			bs[j] = mo * bs[j] + x / avg;
			ws[j] = ws[j] - a * bs[j];
		} else {
			ws[j] = ws[j] - a * x / avg;
		}
	}
}

// unscale_check: g *= inv; *flag = 1 if any result is not finite.
KERNEL(unscale_check)(u64 g, i64 n, double inv, u64 flag) {
	gptr<float> x = GCAST(float, g);
	float s = (float)inv;
	GRID_STRIDE(i, n) {
		float v = x[i] * s;
		x[i] = v;
		if (!isfinite(v)) atomicExch(GCAST(int, flag), 1); // blocks may both find one
	}
}

// bias_grad: dbias[c] += the sum of dout (of dtype dt) over (n, p) for
// channel c of (N, C, P): one block per channel, float64 sums.
KERNEL(bias_grad)(u64 dbias, u64 dout, i64 dt, i64 N, i64 C, i64 P) {
	gptr<const void> dy = GCAST(const void, dout);
	i64 c = blockIdx.x;
	double s = 0, unused = 0;
	for (i64 e = threadIdx.x; e < N * P; e += blockDim.x) s += load(dy, (int)dt, ((e / P) * C + c) * P + e % P);
	block_sum2(s, unused);
	if (threadIdx.x == 0) GCAST(float, dbias)[c] += (float)s;
}
