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

// upsample2_value is the bilinear value, align_corners=False, scale 2
// (backend/cpu's separable weights: rows blended first, then along the
// row), at output row oy and column ox of the H x W plane at src of x.
__device__ __forceinline__ float upsample2_value(In x, i64 src, i64 H, i64 W, i64 oy, i64 ox) {
	i64 OW = 2 * W, i = oy / 2, r0, r1;
	float a, b;
	if (oy % 2 == 0) {
		r0 = src + (i > 0 ? i - 1 : 0) * W; r1 = src + i * W; a = 0.25f; b = 0.75f;
	} else {
		r0 = src + i * W; r1 = src + (i + 1 < H ? i + 1 : H - 1) * W; a = 0.75f; b = 0.25f;
	}
	if (ox == 0) return a * x[r0] + b * x[r1];
	if (ox == OW - 1) return a * x[r0 + W - 1] + b * x[r1 + W - 1];
	i64 j = (ox - 1) / 2; // ox is 2j+1 (0.75, 0.25) or 2j+2 (0.25, 0.75)
	float cur = a * x[r0 + j] + b * x[r1 + j];
	float next = a * x[r0 + j + 1] + b * x[r1 + j + 1];
	return (ox % 2 == 1) ? 0.75f * cur + 0.25f * next : 0.25f * cur + 0.75f * next;
}

// upsample2: every plane upsampled (upsample2_value).
KERNEL(upsample2)(u64 out, u64 in, i64 dt, i64 planes, i64 H, i64 W) {
	In x = input(in, dt);
	Out y = output(out, dt);
	i64 OW = 2 * W;
	GRID_STRIDE(o, planes * 4 * H * W) {
		i64 p = o / (4 * H * W), r = o % (4 * H * W);
		y.set(o, upsample2_value(x, p * H * W, H, W, r / OW, r % OW));
	}
}

// upsample2_back_value is the adjoint of upsample2 at input row i, column j
// of an H x W plane whose output gradient starts at g in dy: gathered from
// the output rows 2i-1 .. 2i+2 and columns 2j-1 .. 2j+2 (clamped), as
// backend/cpu sums.
__device__ __forceinline__ float upsample2_back_value(In dy, i64 g, i64 H, i64 W, i64 i, i64 j) {
	i64 OW = 2 * W;
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
	return 0.25f * (prevO + next) + 0.75f * (e + o);
}

// upsample2_back: the adjoint, every plane (upsample2_back_value).
KERNEL(upsample2_back)(u64 din, u64 dout, i64 dt, i64 planes, i64 H, i64 W) {
	In dy = input(dout, dt);
	Out dx = output(din, dt);
	GRID_STRIDE(idx, planes * H * W) {
		i64 p = idx / (H * W), r = idx % (H * W);
		dx.set(idx, upsample2_back_value(dy, p * 4 * H * W, H, W, r / W, r % W));
	}
}

// ---- volumes (N,C,D,H,W) ----

// max_pool3: the maximum of each KD x KH x KW window (kernel = stride),
// scanned in order (kd, kh, kw), the first on ties, a NaN winning; its
// position (kd*KH+kh)*KW+kw into argmax (when argmax is not 0).
KERNEL(max_pool3)(u64 out, u64 argmax, u64 in, i64 dt, i64 planes, i64 D, i64 H, i64 W, i64 KD, i64 KH, i64 KW) {
	In x = input(in, dt);
	Out y = output(out, dt);
	gptr<uint8_t> idx = GCAST(uint8_t, argmax);
	i64 OD = D / KD, OH = H / KH, OW = W / KW;
	GRID_STRIDE(o, planes * OD * OH * OW) {
		i64 p = o / (OD * OH * OW), od = o / (OH * OW) % OD, oh = o / OW % OH, ow = o % OW;
		float best = 0.0f;
		i64 at = 0;
		for (i64 kd = 0; kd < KD; kd++)
			for (i64 kh = 0; kh < KH; kh++)
				for (i64 kw = 0; kw < KW; kw++) {
					i64 q = (kd * KH + kh) * KW + kw;
					float v = x[((p * D + od * KD + kd) * H + oh * KH + kh) * W + ow * KW + kw];
					if (q == 0 || v > best || v != v) {
						best = v;
						at = q;
					}
				}
		y.set(o, best);
		if (idx) idx[o] = (uint8_t)at;
	}
}

// max_pool3_back: each input gets its window's dout value where the
// window's maximum was, +0 elsewhere (inputs no window covers included).
KERNEL(max_pool3_back)(u64 din, u64 dout, u64 argmax, i64 dt, i64 planes, i64 D, i64 H, i64 W, i64 KD, i64 KH, i64 KW) {
	In dy = input(dout, dt);
	gptr<const uint8_t> idx = GCAST(const uint8_t, argmax);
	Out dx = output(din, dt);
	i64 OD = D / KD, OH = H / KH, OW = W / KW;
	GRID_STRIDE(i, planes * D * H * W) {
		i64 p = i / (D * H * W), d = i / (H * W) % D, y = i / W % H, xx = i % W;
		float g = 0.0f;
		if (d < OD * KD && y < OH * KH && xx < OW * KW) {
			i64 o = ((p * OD + d / KD) * OH + y / KH) * OW + xx / KW;
			if (idx[o] == (uint8_t)(((d % KD) * KH + y % KH) * KW + xx % KW)) g = dy[o];
		}
		dx.set(i, g);
	}
}

// linear_tap is an up-sampling axis's source for output o of an axis of n
// inputs at scale f (1 or 2), align_corners=False: inputs i0 and i1 with
// weights l0 and l1 (src = (o+0.5)/f - 0.5 clamped at 0, exact in float).
struct Tap {
	i64 i0, i1;
	float l0, l1;
};
__device__ __forceinline__ Tap linear_tap(i64 n, i64 f, i64 o) {
	float src = fmaxf(((float)o + 0.5f) / (float)f - 0.5f, 0.0f);
	Tap t;
	t.i0 = (i64)src;
	t.i1 = t.i0 + 1 < n ? t.i0 + 1 : n - 1;
	t.l1 = src - (float)t.i0;
	t.l0 = 1.0f - t.l1;
	return t;
}

// tap_weight is input i's weight in output o's interpolation along an axis.
__device__ __forceinline__ float tap_weight(i64 n, i64 f, i64 o, i64 i) {
	Tap t = linear_tap(n, f, o);
	return (t.i0 == i ? t.l0 : 0.0f) + (t.i1 == i ? t.l1 : 0.0f);
}

// upsample3: trilinear, align_corners=False, scale FD x FH x FW (each 1 or
// 2): out (planes, FD*D, FH*H, FW*W).
KERNEL(upsample3)(u64 out, u64 in, i64 dt, i64 planes, i64 D, i64 H, i64 W, i64 FD, i64 FH, i64 FW) {
	In x = input(in, dt);
	Out y = output(out, dt);
	i64 OD = FD * D, OH = FH * H, OW = FW * W;
	GRID_STRIDE(o, planes * OD * OH * OW) {
		i64 p = o / (OD * OH * OW), od = o / (OH * OW) % OD, oh = o / OW % OH, ow = o % OW;
		Tap td = linear_tap(D, FD, od), th = linear_tap(H, FH, oh), tw = linear_tap(W, FW, ow);
		i64 b0 = (p * D + td.i0) * H, b1 = (p * D + td.i1) * H;
		float v0 = th.l0 * (tw.l0 * x[(b0 + th.i0) * W + tw.i0] + tw.l1 * x[(b0 + th.i0) * W + tw.i1]) +
			   th.l1 * (tw.l0 * x[(b0 + th.i1) * W + tw.i0] + tw.l1 * x[(b0 + th.i1) * W + tw.i1]);
		float v1 = th.l0 * (tw.l0 * x[(b1 + th.i0) * W + tw.i0] + tw.l1 * x[(b1 + th.i0) * W + tw.i1]) +
			   th.l1 * (tw.l0 * x[(b1 + th.i1) * W + tw.i0] + tw.l1 * x[(b1 + th.i1) * W + tw.i1]);
		y.set(o, td.l0 * v0 + td.l1 * v1);
	}
}

// upsample3_back: upsample3's adjoint, gathered: each input sums the output
// gradients whose taps include it (within f of f*i on each axis), weighted.
KERNEL(upsample3_back)(u64 din, u64 dout, i64 dt, i64 planes, i64 D, i64 H, i64 W, i64 FD, i64 FH, i64 FW) {
	In dy = input(dout, dt);
	Out dx = output(din, dt);
	i64 OD = FD * D, OH = FH * H, OW = FW * W;
	GRID_STRIDE(i, planes * D * H * W) {
		i64 p = i / (D * H * W), d = i / (H * W) % D, h = i / W % H, w = i % W;
		float acc = 0.0f;
		for (i64 od = d * FD - 1 < 0 ? 0 : d * FD - 1; od < OD && od <= d * FD + FD; od++) {
			float wd = tap_weight(D, FD, od, d);
			if (wd == 0.0f) continue;
			float plane = 0.0f;
			for (i64 oh = h * FH - 1 < 0 ? 0 : h * FH - 1; oh < OH && oh <= h * FH + FH; oh++) {
				float wh = tap_weight(H, FH, oh, h);
				if (wh == 0.0f) continue;
				float row = 0.0f;
				for (i64 ow = w * FW - 1 < 0 ? 0 : w * FW - 1; ow < OW && ow <= w * FW + FW; ow++) {
					float ww = tap_weight(W, FW, ow, w);
					if (ww != 0.0f) row += ww * dy[((p * OD + od) * OH + oh) * OW + ow];
				}
				plane += wh * row;
			}
			acc += wd * plane;
		}
		dx.set(i, acc);
	}
}

// upsample_concat: out's sample n is skip's n-th (sw values, stored again
// as convert stores them) then in's n-th (C planes of H x W) upsampled
// (upsample2_value): the copy and the upsampling of the whole batch in
// one pass, with no tensor between.
KERNEL(upsample_concat)(u64 out, u64 skip, u64 in, i64 dt, i64 N, i64 sw, i64 C, i64 H, i64 W) {
	In x = input(in, dt), s = input(skip, dt);
	Out y = output(out, dt);
	i64 HW4 = 4 * H * W, uw = C * HW4, OW = 2 * W;
	GRID_STRIDE(o, N * (sw + uw)) {
		i64 n = o / (sw + uw), r = o % (sw + uw);
		if (r < sw) {
			y.set(o, s[n * sw + r]);
			continue;
		}
		r -= sw;
		i64 p = n * C + r / HW4, q = r % HW4;
		y.set(o, upsample2_value(x, p * H * W, H, W, q / OW, q % OW));
	}
}

// upsample_concat_back: its adjoint, in one pass: dskip gets each sample's
// first sw values of dout, din the adjoint upsampling of the rest
// (upsample2_back_value); the first N*sw threads' work is dskip's.
KERNEL(upsample_concat_back)(u64 dskip, u64 din, u64 dout, i64 dt, i64 N, i64 sw, i64 C, i64 H, i64 W) {
	In dy = input(dout, dt);
	Out ds = output(dskip, dt), dx = output(din, dt);
	i64 HW = H * W, per = sw + 4 * C * HW;
	GRID_STRIDE(k, N * sw + N * C * HW) {
		if (k < N * sw) {
			ds.set(k, dy[k / sw * per + k % sw]);
			continue;
		}
		i64 idx = k - N * sw, p = idx / HW, r = idx % HW;
		i64 g = p / C * per + sw + p % C * 4 * HW;
		dx.set(idx, upsample2_back_value(dy, g, H, W, r / W, r % W));
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

// ---- segmented sums: many blocks per channel or group, in a fixed order ----
//
// A norm's statistics and gradient sums (and a bias gradient) are two
// float64 sums over each segment (a channel's values over the batch, or
// a (sample, group)'s): each segment is cut into chunks of chunk values
// (a function of the shape alone, backend/cuda's reduceChunks), each
// chunk summed by one block in a fixed order (thread t takes values t,
// t+256, ... then block_sum2's tree) into partial[2*(seg*chunks + i)], and
// a finish kernel adds a segment's chunks in order. Blocks take work items
// (segment, chunk) grid-stride, so the result is the same bits at any
// grid size.

// The kinds of norm_sums: what is summed over a segment's values.
#define SUM_BN_STATS 0  // channel c: (x - k, (x - k)^2), k its first value
#define SUM_BN_BACK 1   // channel c: (dy, dy*(x - mean_c))
#define SUM_GN_STATS 2  // group ng: (x - k, (x - k)^2), k its first value
#define SUM_GN_PARAMS 3 // channel c: (dy, dy*(x - mean_ng)*invstd_ng)
#define SUM_GN_BACK 4   // group ng: (gamma_c*dy, gamma_c*dy*(x - mean_ng))
#define SUM_BIAS 5      // channel c: (dy, 0)

// Gate is a ReLU's backward: whether value i's gradient passes, by relu
// (not 0): the ReLU's mask (relu_mask's bits) where mask, else its output
// (of dtype dt: positive, non-zero and not NaN passes, as relu_back has
// it). A gate with no relu passes every value. A gradient that does not
// pass is +0, the value relu_back and relu_back_mask write.
struct Gate {
	u64 relu;
	bool mask;
	int dt;
	__device__ __forceinline__ bool pass(i64 i) const {
		if (!relu) return true;
		if (mask) return (GCAST(const uint8_t, relu)[i >> 3] >> (i & 7)) & 1u;
		return load(GCAST(const void, relu), dt, i) > 0.0f;
	}
	__device__ __forceinline__ float of(In dy, i64 i) const { return pass(i) ? dy[i] : 0.0f; }
};

// channel_at is value e of channel c of (N, C, HW) over the batch.
__device__ __forceinline__ i64 channel_at(i64 c, i64 e, i64 C, i64 HW) { return ((e / HW) * C + c) * HW + e % HW; }

// norm_sums: kind's two sums over chunks of the segments (C channels of
// (N, C, HW), or N*G groups of C/G*HW values) into partial; x and dy of
// dtype dt, stats (mean, then invstd) and gamma fp32. SUM_BN_BACK's dy
// passes a ReLU's gate (relu, a mask where relu_mask; relu 0: none), so a
// BatchNorm after a ReLU sums its gradient without a pass between.
KERNEL(norm_sums)(u64 partial, i64 kind, u64 x_, u64 dy_, u64 stats, u64 gamma, i64 dt, i64 N, i64 C, i64 HW, i64 G,
		  i64 chunk, i64 chunks, u64 relu, i64 relu_mask) {
	In x = input(x_, dt), dy = input(dy_, dt);
	Gate gate = {relu, relu_mask != 0, (int)dt};
	gptr<const float> st = GCAST(const float, stats), gm = GCAST(const float, gamma);
	bool group = kind == SUM_GN_STATS || kind == SUM_GN_BACK;
	i64 cg = group || kind == SUM_GN_PARAMS ? C / G : 1;
	i64 segs = group ? N * G : C, len = group ? cg * HW : N * HW;
	gptr<const float> mean = st, inv = st + (kind == SUM_BN_BACK ? C : N * G);
	for (i64 item = blockIdx.x; item < segs * chunks; item += gridDim.x) {
		i64 sg = item / chunks, lo = (item % chunks) * chunk, hi = min(len, lo + chunk);
		double k = 0;
		if (kind == SUM_BN_STATS) k = x[channel_at(sg, 0, C, HW)];
		if (kind == SUM_GN_STATS) k = x[sg * len];
		double mu = kind == SUM_BN_BACK ? (double)mean[sg] : kind == SUM_GN_BACK ? (double)mean[sg] : 0;
		double a = 0, b = 0;
		for (i64 e = lo + threadIdx.x; e < hi; e += blockDim.x) {
			i64 i = group ? sg * len + e : channel_at(sg, e, C, HW);
			switch (kind) {
			case SUM_BN_STATS:
			case SUM_GN_STATS: {
				double d = (double)x[i] - k;
				a += d;
				b += d * d;
				break;
			}
			case SUM_BN_BACK: {
				double g = gate.of(dy, i);
				a += g;
				b += g * ((double)x[i] - mu);
				break;
			}
			case SUM_GN_PARAMS: {
				i64 ng = (e / HW) * G + sg / cg;
				double g = dy[i];
				a += g;
				b += g * ((double)x[i] - (double)mean[ng]) * (double)inv[ng];
				break;
			}
			case SUM_GN_BACK: {
				double g = (double)gm[(sg % G) * cg + e / HW] * (double)dy[i];
				a += g;
				b += g * ((double)x[i] - mu);
				break;
			}
			default:
				a += dy[i];
			}
		}
		block_sum2(a, b);
		if (threadIdx.x == 0) {
			GCAST(double, partial)[2 * item] = a;
			GCAST(double, partial)[2 * item + 1] = b;
		}
	}
}

// segment_sums are segment sg's two sums: its chunks' partial sums, in
// order.
__device__ __forceinline__ void segment_sums(u64 partial, i64 sg, i64 chunks, double &a, double &b) {
	gptr<const double> p = GCAST(const double, partial) + 2 * sg * chunks;
	a = 0;
	b = 0;
	for (i64 i = 0; i < chunks; i++) {
		a += p[2 * i];
		b += p[2 * i + 1];
	}
}

// add_sums: first[s] += the first sum of segment s, second[s] += its second
// (each where not 0): a bias gradient, group norm's dbeta and dgamma.
KERNEL(add_sums)(u64 first, u64 second, u64 partial, i64 segs, i64 chunks) {
	GRID_STRIDE(sg, segs) {
		double a, b;
		segment_sums(partial, sg, chunks, a, b);
		if (first) GCAST(float, first)[sg] += (float)a;
		if (second) GCAST(float, second)[sg] += (float)b;
	}
}

// ---- batch norm ----

// batch_norm_finish: per channel, the statistics from the sums (unless
// reuse: then read) saved as float32 mean and invstd, the running
// statistics moved by momentum towards the batch's (with update; unbiased
// variance), and coef[2c], coef[2c+1] = the scale and shift out = x*scale +
// shift takes.
KERNEL(batch_norm_finish)(u64 stats, u64 coef, u64 partial, u64 in, u64 gamma, u64 beta, u64 rmean, u64 rvar, i64 dt,
			  i64 N, i64 C, i64 HW, double eps, double momentum, i64 reuse, i64 update, i64 chunks) {
	gptr<float> mean = GCAST(float, stats), inv = mean + C, cf = GCAST(float, coef);
	gptr<const float> g = GCAST(const float, gamma), b = GCAST(const float, beta);
	i64 M = N * HW;
	GRID_STRIDE(c, C) {
		double variance = 0, ss = 0;
		if (!reuse) {
			double s, q, k = input(in, dt)[channel_at(c, 0, C, HW)];
			segment_sums(partial, c, chunks, s, q);
			double d = s / (double)M;
			ss = fmax(q - s * d, 0.0);
			variance = ss / (double)M;
			mean[c] = (float)(k + d);
			inv[c] = (float)(1.0 / sqrt(variance + eps));
		}
		double mu = mean[c], invstd = inv[c];
		cf[2 * c] = (float)((double)g[c] * invstd);
		cf[2 * c + 1] = (float)((double)b[c] - mu * (double)g[c] * invstd);
		if (update) {
			gptr<float> rm = GCAST(float, rmean), rv = GCAST(float, rvar);
			double unbiased = M > 1 ? ss / (double)(M - 1) : variance;
			rm[c] = (float)((1 - momentum) * (double)rm[c] + momentum * (double)mean[c]);
			rv[c] = (float)((1 - momentum) * (double)rv[c] + momentum * unbiased);
		}
	}
}

// Channel walks the values of an (N, C, HW) tensor from value i on,
// knowing each one's channel with one division at the start, not one a
// value (a 64-bit division takes dozens of instructions).
struct Channel {
	i64 c, pos, C, HW;
	__device__ __forceinline__ Channel(i64 i, i64 C_, i64 HW_) : c((i / HW_) % C_), pos(i % HW_), C(C_), HW(HW_) {}
	__device__ __forceinline__ void next() {
		if (++pos == HW) {
			pos = 0;
			if (++c == C) c = 0;
		}
	}
};

// rounded is v as a tensor of dtype dt stores it.
__device__ __forceinline__ float rounded(int dt, float v) {
	if (dt == 0) return v;
	return dt == 1 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v));
}

// relu_of is relu's value of a stored r: negative ones (-0 too) +0, NaN as
// it is (the bits relu keeps).
__device__ __forceinline__ float relu_of(float r) { return r > 0.0f || r != r ? r : 0.0f; }

// bias_add: out += bias (fp32, per channel), rounded to out's dtype dt; 8
// values a thread. A library's convolution (cuDNN's) adds no bias itself.
KERNEL(bias_add)(u64 out, u64 bias, i64 dt, i64 N, i64 C, i64 HW) {
	Out y = output(out, dt);
	gptr<const float> b = GCAST(const float, bias);
	i64 n = N * C * HW;
	GRID_STRIDE(j, (n + 7) / 8) {
		Channel ch(8 * j, C, HW);
		for (i64 i = 8 * j; i < 8 * j + 8 && i < n; i++, ch.next()) y.set(i, y[i] + b[ch.c]);
	}
}

// accumulate: dst (fp32) += src (dtype dt): a 16-bit weight gradient a
// library wrote, added to the fp32 one.
KERNEL(accumulate)(u64 dst, u64 src, i64 dt, i64 n) {
	In x = input(src, dt);
	gptr<float> d = GCAST(float, dst);
	GRID_STRIDE(i, n) d[i] += x[i];
}

// batch_norm_apply: out = x*scale + shift per channel (coef), of dtype dt;
// 8 values a thread.
KERNEL(batch_norm_apply)(u64 out, u64 in, u64 coef, i64 dt, i64 N, i64 C, i64 HW) {
	In x = input(in, dt);
	Out y = output(out, dt);
	gptr<const float> cf = GCAST(const float, coef);
	i64 n = N * C * HW;
	GRID_STRIDE(j, (n + 7) / 8) {
		Channel ch(8 * j, C, HW);
		for (i64 i = 8 * j; i < 8 * j + 8 && i < n; i++, ch.next()) y.set(i, x[i] * cf[2 * ch.c] + cf[2 * ch.c + 1]);
	}
}

// batch_norm_relu_apply: batch_norm_apply, then relu of the stored values
// and, where mask is not 0, relu_mask's bits of the result (the same bits
// as the three apart); a thread does 8 values, a byte of mask.
KERNEL(batch_norm_relu_apply)(u64 out, u64 mask, u64 in, u64 coef, i64 dt, i64 N, i64 C, i64 HW) {
	In x = input(in, dt);
	Out y = output(out, dt);
	gptr<const float> cf = GCAST(const float, coef);
	i64 n = N * C * HW;
	GRID_STRIDE(j, (n + 7) / 8) {
		Channel ch(8 * j, C, HW);
		uint32_t bits = 0;
		for (int k = 0; k < 8 && 8 * j + k < n; k++, ch.next()) {
			float v = relu_of(rounded((int)dt, x[8 * j + k] * cf[2 * ch.c] + cf[2 * ch.c + 1]));
			y.set(8 * j + k, v);
			if (v > 0.0f) bits |= 1u << k;
		}
		if (mask) GCAST(uint8_t, mask)[j] = (uint8_t)bits;
	}
}

// batch_norm_eval: normalize with the running statistics.
KERNEL(batch_norm_eval)(u64 out, u64 in, u64 gamma, u64 beta, u64 rmean, u64 rvar, i64 dt,
		i64 N, i64 C, i64 HW, double eps) {
	In x = input(in, dt);
	Out y = output(out, dt);
	gptr<const float> g = GCAST(const float, gamma), b = GCAST(const float, beta);
	gptr<const float> rm = GCAST(const float, rmean), rv = GCAST(const float, rvar);
	GRID_STRIDE(i, N * C * HW) {
		i64 c = (i / HW) % C;
		double invstd = 1.0 / sqrt((double)rv[c] + eps);
		float scale = (float)((double)g[c] * invstd);
		float shift = b[c] - rm[c] * scale;
		y.set(i, x[i] * scale + shift);
	}
}

// batch_norm_back_finish: per channel, dgamma, dbeta += the sums
// (SUM_BN_BACK's, the second times invstd) and coef[3c..3c+2] = the
// factors din = ka*dy + bx*(x - mean) + c0 takes.
KERNEL(batch_norm_back_finish)(u64 coef, u64 dgamma, u64 dbeta, u64 partial, u64 stats, u64 gamma, i64 N, i64 C, i64 HW,
			       i64 chunks) {
	gptr<const float> inv = GCAST(const float, stats) + C;
	gptr<float> cf = GCAST(float, coef);
	i64 M = N * HW;
	GRID_STRIDE(c, C) {
		double sdy, sdyx;
		segment_sums(partial, c, chunks, sdy, sdyx);
		float invstd = inv[c];
		sdyx *= (double)invstd;
		GCAST(float, dgamma)[c] += (float)sdyx;
		GCAST(float, dbeta)[c] += (float)sdy;
		float k = GCAST(const float, gamma)[c] * invstd;
		float mdy = (float)(sdy / (double)M), mdyx = (float)(sdyx / (double)M);
		cf[3 * c] = k;
		cf[3 * c + 1] = -k * invstd * mdyx;
		cf[3 * c + 2] = -k * mdy;
	}
}

// batch_norm_back_apply: din = ka*dy + bx*(x - mean) + c0 per channel
// (coef), dy through a ReLU's gate (relu, relu_mask: norm_sums'); din may
// be dout (each value is read before it is written).
KERNEL(batch_norm_back_apply)(u64 din, u64 dout, u64 in, u64 coef, u64 stats, i64 dt, i64 N, i64 C, i64 HW, u64 relu,
			      i64 relu_mask) {
	In x = input(in, dt), dy = input(dout, dt);
	Out dx = output(din, dt);
	gptr<const float> cf = GCAST(const float, coef), mean = GCAST(const float, stats);
	Gate gate = {relu, relu_mask != 0, (int)dt};
	i64 n = N * C * HW;
	GRID_STRIDE(j, (n + 7) / 8) {
		Channel ch(8 * j, C, HW);
		for (i64 i = 8 * j; i < 8 * j + 8 && i < n; i++, ch.next()) {
			i64 c = ch.c;
			dx.set(i, cf[3 * c] * gate.of(dy, i) + cf[3 * c + 1] * (x[i] - mean[c]) + cf[3 * c + 2]);
		}
	}
}

// ---- group norm ----

// group_norm_finish: per (sample, group), the statistics from the sums,
// saved as float32 mean and invstd.
KERNEL(group_norm_finish)(u64 stats, u64 partial, u64 in, i64 dt, i64 N, i64 C, i64 HW, i64 G, double eps, i64 chunks) {
	gptr<float> mean = GCAST(float, stats), inv = mean + N * G;
	i64 size = C / G * HW;
	GRID_STRIDE(ng, N * G) {
		double s, q, k = input(in, dt)[ng * size];
		segment_sums(partial, ng, chunks, s, q);
		double d = s / (double)size;
		double ss = fmax(q - s * d, 0.0);
		mean[ng] = (float)(k + d);
		inv[ng] = (float)(1.0 / sqrt(ss / (double)size + eps));
	}
}

// group_norm_apply: out = x*scale + shift with its (sample, group)'s
// statistics and its channel's gamma and beta.
KERNEL(group_norm_apply)(u64 out, u64 in, u64 stats, u64 gamma, u64 beta, i64 dt, i64 N, i64 C, i64 HW, i64 G) {
	In x = input(in, dt);
	Out y = output(out, dt);
	gptr<const float> mean = GCAST(const float, stats), inv = mean + N * G;
	gptr<const float> g = GCAST(const float, gamma), b = GCAST(const float, beta);
	i64 cg = C / G, size = cg * HW;
	GRID_STRIDE(i, N * C * HW) {
		i64 ng = i / size, c = (ng % G) * cg + (i % size) / HW;
		double mu = mean[ng], invstd = inv[ng];
		float scale = (float)((double)g[c] * invstd);
		float shift = (float)((double)b[c] - mu * (double)g[c] * invstd);
		y.set(i, x[i] * scale + shift);
	}
}

// group_norm_back_finish: per (sample, group), coef[2ng], coef[2ng+1] =
// bx and c0 of din = invstd*gamma_c*dy + bx*(x - mean) + c0, from
// SUM_GN_BACK's sums.
KERNEL(group_norm_back_finish)(u64 coef, u64 partial, u64 stats, i64 N, i64 C, i64 HW, i64 G, i64 chunks) {
	gptr<const float> inv = GCAST(const float, stats) + N * G;
	gptr<float> cf = GCAST(float, coef);
	i64 size = C / G * HW;
	GRID_STRIDE(ng, N * G) {
		double s, sx;
		segment_sums(partial, ng, chunks, s, sx);
		float invstd = inv[ng];
		sx *= (double)invstd;
		float ms = (float)(s / (double)size), msx = (float)(sx / (double)size);
		cf[2 * ng] = -invstd * invstd * msx;
		cf[2 * ng + 1] = -invstd * ms;
	}
}

// group_norm_back_apply: din from its group's coef; din may be dout.
KERNEL(group_norm_back_apply)(u64 din, u64 dout, u64 in, u64 coef, u64 stats, u64 gamma, i64 dt, i64 N, i64 C, i64 HW, i64 G) {
	In x = input(in, dt), dy = input(dout, dt);
	Out dx = output(din, dt);
	gptr<const float> cf = GCAST(const float, coef), mean = GCAST(const float, stats), inv = mean + N * G;
	gptr<const float> gm = GCAST(const float, gamma);
	i64 cg = C / G, size = cg * HW;
	GRID_STRIDE(i, N * C * HW) {
		i64 ng = i / size, c = (ng % G) * cg + (i % size) / HW;
		float a = inv[ng] * gm[c];
		dx.set(i, a * dy[i] + cf[2 * ng] * (x[i] - mean[ng]) + cf[2 * ng + 1]);
	}
}

// ---- loss ----

// softmax_terms: the maximum of the K logits at z + k*stride (NaN if any
// is) and the float64 sum of exp(z - max).
__device__ __forceinline__ void softmax_terms(In z, i64 at, i64 K, i64 stride, float &mx, double &se) {
	mx = -INFINITY;
	for (i64 k = 0; k < K; k++) {
		float v = z[at + k * stride];
		mx = (v != v || mx != mx) ? __int_as_float(0x7fc00000) : fmaxf(mx, v);
	}
	se = 0;
	for (i64 k = 0; k < K; k++) se += exp((double)(z[at + k * stride] - mx));
}

// focal_q: 1 - p_t summed from the other classes' terms (exact where p_t
// is near 1), for the K logits at z + k*stride with max mx and sum se.
__device__ __forceinline__ double focal_q(In z, i64 at, i64 K, i64 stride, i64 t, float mx, double se) {
	double q = 0;
	for (i64 c = 0; c < K; c++)
		if (c != t) q += exp((double)(z[at + c * stride] - mx));
	return q / se;
}

// The kinds of loss_partials.
#define LOSS_CE 0   // one segment: (-log p_t, 1) over the counted pixels
#define LOSS_SUMS 1 // class c: backend.LossSums's four sums

// loss_partials sums kind's values over chunks of the pixels (logits
// N,K,HW of dtype dt; target u8 N,HW) into partial[4*(seg*chunks + i)]:
// one segment for LOSS_CE, one per class for LOSS_SUMS, cut into chunks
// as norm_sums's are (the same bits at any grid size; the host adds a
// segment's chunks in order). A target that is neither a class nor
// IGNORE_INDEX raises bad[n] to the largest such value + 1 of its sample
// (integer atomics: deterministic), from segment 0.
KERNEL(loss_partials)(u64 partial, u64 bad, u64 logits, u64 target, i64 dt, i64 N, i64 K, i64 HW, double gamma, i64 kind,
		      i64 chunk, i64 chunks) {
	In z = input(logits, dt);
	gptr<const uint8_t> tg = GCAST(const uint8_t, target);
	i64 segs = kind == LOSS_CE ? 1 : K;
	for (i64 item = blockIdx.x; item < segs * chunks; item += gridDim.x) {
		i64 c = item / chunks, lo = (item % chunks) * chunk, hi = min(N * HW, lo + chunk);
		double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
		for (i64 i = lo + threadIdx.x; i < hi; i += blockDim.x) {
			i64 n = i / HW, p = i % HW;
			int t = tg[i];
			if (t == IGNORE_INDEX) continue;
			if (t >= K) {
				if (c == 0) atomicMax(GCAST(int, bad) + n, t + 1);
				continue;
			}
			i64 at = n * K * HW + p;
			float mx;
			double se;
			softmax_terms(z, at, K, HW, mx, se);
			if (kind == LOSS_CE) {
				s0 += log(se) - (double)(z[at + t * HW] - mx);
				s1 += 1;
				continue;
			}
			double pc = exp((double)(z[at + c * HW] - mx)) / se;
			s3 += pc;
			if (t == c) {
				double nll = log(se) - (double)(z[at + c * HW] - mx);
				s0 += gamma == 0 ? nll : pow(focal_q(z, at, K, HW, c, mx, se), gamma) * nll;
				s1 += 1;
				s2 += pc;
			}
		}
		block_sum2(s0, s1);
		block_sum2(s2, s3);
		if (threadIdx.x == 0) {
			gptr<double> out = GCAST(double, partial) + 4 * item;
			out[0] = s0;
			out[1] = s1;
			out[2] = s2;
			out[3] = s3;
		}
	}
}

// write_slot fills a record slot: the loss's sum and count, then the first
// sample of N with a bad target (+1, 0 for none) and its value (+1), from
// loss_partials' flags.
__device__ void write_slot(u64 slot, double loss, double count, u64 bad, i64 N) {
	GCAST(double, slot)[0] = loss;
	GCAST(double, slot)[1] = count;
	gptr<const int> b = GCAST(const int, bad);
	int first = 0, value = 0;
	for (i64 n = 0; n < N && first == 0; n++) {
		if (b[n] != 0) first = (int)n + 1, value = b[n];
	}
	GCAST(int, slot)[4] = first;
	GCAST(int, slot)[5] = value;
}

// loss_record: one thread sums a cross-entropy's chunk partials (the loss
// and the count, loss_partials' first two of four) in order into a record
// slot of 32 bytes: the two sums (double), then the first sample of N with
// a bad target + 1 and its flag (bad's: the largest bad value + 1), 0 and 0
// for none. The same additions, in the same order, as the host made.
KERNEL(loss_record)(u64 slot, u64 partial, u64 bad, i64 N, i64 chunks) {
	if (blockIdx.x != 0 || threadIdx.x != 0) return;
	gptr<const double> p = GCAST(const double, partial);
	double loss = 0, count = 0;
	for (i64 i = 0; i < chunks; i++) {
		loss += p[4 * i];
		count += p[4 * i + 1];
	}
	write_slot(slot, loss, count, bad, N);
}

// A recorded loss's terms (backend.LossTerms), as bits of loss_finish's
// and loss_coefs' terms.
#define TERM_CE 1    // the (weighted or focal) cross-entropy term
#define TERM_FOCAL 2 // it is focal: divided by the count, not the weighted count
#define TERM_DICE 4  // the soft Dice term

// loss_weight is class k's weight (1 without weights).
__device__ __forceinline__ double loss_weight(u64 weights, i64 k) {
	return weights ? GCAST(const double, weights)[k] : 1.0;
}

// ce_denominator is model.LossConfig's ceDenominator of the 4K sums.
__device__ double ce_denominator(gptr<const double> sums, i64 K, i64 terms, u64 weights) {
	double den = 0;
	for (i64 k = 0; k < K; k++) den += (terms & TERM_FOCAL) ? sums[K + k] : loss_weight(weights, k) * sums[K + k];
	return den;
}

// present_classes counts the classes with a pixel in the targets.
__device__ i64 present_classes(gptr<const double> sums, i64 K) {
	i64 present = 0;
	for (i64 k = 0; k < K; k++) present += sums[K + k] > 0 ? 1 : 0;
	return present;
}

// loss_finish ends a recorded loss of terms on the device: loss_partials'
// LOSS_SUMS partials (K classes of chunks) added in order, as the host
// adds them, into sums (4K doubles, kept for loss_coefs); the loss's value
// from them (model.LossConfig's value: the same float64 expressions) into
// slot with a count of 1, and the first bad target, as loss_record's.
KERNEL(loss_finish)(u64 slot, u64 sums, u64 partial, u64 bad, u64 weights, i64 N, i64 K, i64 chunks, i64 terms, double smooth) {
	if (blockIdx.x != 0 || threadIdx.x != 0) return;
	gptr<const double> p = GCAST(const double, partial);
	gptr<double> s = GCAST(double, sums);
	for (i64 c = 0; c < K; c++) {
		double acc[4] = {0, 0, 0, 0};
		for (i64 i = c * chunks; i < (c + 1) * chunks; i++)
			for (int j = 0; j < 4; j++) acc[j] += p[4 * i + j];
		for (int j = 0; j < 4; j++) s[j * K + c] = acc[j];
	}
	double loss = 0;
	if (terms & TERM_CE) {
		double num = 0;
		for (i64 k = 0; k < K; k++) num += loss_weight(weights, k) * s[k];
		double den = ce_denominator(s, K, terms, weights);
		if (den > 0) loss += num / den;
	}
	i64 present = present_classes(s, K);
	if ((terms & TERM_DICE) && present > 0) {
		double sum = 0;
		for (i64 k = 0; k < K; k++) {
			double T = s[K + k];
			if (T > 0) sum += (2 * s[2 * K + k] + smooth) / (s[3 * K + k] + T + smooth);
		}
		loss += 1 - sum / (double)present;
	}
	write_slot(slot, loss, 1, bad, N);
}

// loss_coefs: loss_back's 3K coefficients for loss_finish's sums times
// scale (the float at scaleAt where that is not 0), as model.LossConfig's
// coefficients forms them.
KERNEL(loss_coefs)(u64 coefs, u64 sums, u64 weights, i64 K, i64 terms, double smooth, double scale, u64 scaleAt) {
	if (blockIdx.x != 0 || threadIdx.x != 0) return;
	gptr<const double> s = GCAST(const double, sums);
	gptr<float> coef = GCAST(float, coefs);
	double sc = scaleAt ? (double)GCAST(const float, scaleAt)[0] : scale;
	for (i64 i = 0; i < 3 * K; i++) coef[i] = 0.0f;
	double den = ce_denominator(s, K, terms, weights);
	if ((terms & TERM_CE) && den > 0) {
		for (i64 k = 0; k < K; k++) coef[k] = (float)(sc * loss_weight(weights, k) / den);
	}
	i64 present = present_classes(s, K);
	if ((terms & TERM_DICE) && present > 0) {
		double m = sc / (double)present;
		for (i64 k = 0; k < K; k++) {
			double T = s[K + k];
			if (T == 0) continue;
			double D = s[3 * K + k] + T + smooth;
			coef[K + k] = (float)(-2 * m / D);
			coef[2 * K + k] = (float)(m * (2 * s[2 * K + k] + smooth) / (D * D));
		}
	}
}

// cross_entropy_back: dlogits = k*(softmax - onehot) at counted pixels, 0 at
// ignored ones (everywhere when k is 0), of dtype dt; each pixel reads its
// K logits before writing, so dlogits may be logits. Where slot is not 0,
// k is scale over the count loss_record left there (0 for none), as the
// host computes it: (float)scale / (float)count, scale being the float at
// scaleAt where that is not 0 (a queued step's loss scale).
KERNEL(cross_entropy_back)(u64 dlogits, u64 logits, u64 target, i64 dt, i64 N, i64 K, i64 HW, double kd, u64 slot, double scale,
			   u64 scaleAt) {
	In z = input(logits, dt);
	Out g = output(dlogits, dt);
	gptr<const uint8_t> tg = GCAST(const uint8_t, target);
	float k = (float)kd;
	if (slot) {
		double count = GCAST(const double, slot)[1];
		float sc = scaleAt ? GCAST(const float, scaleAt)[0] : (float)scale;
		k = count > 0 ? sc / (float)count : 0.0f;
	}
	GRID_STRIDE(i, N * HW) {
		i64 n = i / HW, p = i % HW, at = n * K * HW + p;
		int t = tg[i];
		if (t == IGNORE_INDEX || k == 0.0f) {
			for (i64 c = 0; c < K; c++) g.set(at + c * HW, 0.0f);
			continue;
		}
		float mx;
		double se;
		softmax_terms(z, at, K, HW, mx, se);
		for (i64 c = 0; c < K; c++) {
			i64 idx = at + c * HW;
			float prob = (float)(exp((double)(z[idx] - mx)) / se);
			if (c == t) prob -= 1.0f;
			g.set(idx, k * prob);
		}
	}
}

// loss_back: backend.LossBack, coef (3K floats) on the device, logits and
// dlogits of dtype dt; each pixel reads its K logits before writing, so
// dlogits may be logits.
KERNEL(loss_back)(u64 dlogits, u64 logits, u64 target, u64 coefs, i64 dt, i64 N, i64 K, i64 HW, double gamma) {
	In z = input(logits, dt);
	Out g = output(dlogits, dt);
	gptr<const uint8_t> tg = GCAST(const uint8_t, target);
	gptr<const float> coef = GCAST(const float, coefs);
	GRID_STRIDE(i, N * HW) {
		i64 n = i / HW, p = i % HW, at = n * K * HW + p;
		int t = tg[i];
		if (t == IGNORE_INDEX) {
			for (i64 c = 0; c < K; c++) g.set(at + c * HW, 0.0f);
			continue;
		}
		float mx;
		double se;
		softmax_terms(z, at, K, HW, mx, se);
		double f = 1;
		if (gamma != 0) {
			double q = focal_q(z, at, K, HW, t, mx, se);
			double logp = (double)(z[at + t * HW] - mx) - log(se);
			f = q <= 0 ? 0 : pow(q, gamma) - gamma * (exp((double)(z[at + t * HW] - mx)) / se) * pow(q, gamma - 1) * logp;
		}
		double a = (double)coef[t] * f, dot = 0;
		for (i64 c = 0; c < K; c++) {
			double d = (double)coef[2 * K + c] + (c == t ? (double)coef[K + c] : 0.0);
			dot += exp((double)(z[at + c * HW] - mx)) / se * d;
		}
		for (i64 c = 0; c < K; c++) {
			double prob = exp((double)(z[at + c * HW] - mx)) / se;
			double d = (double)coef[2 * K + c] + (c == t ? (double)coef[K + c] : 0.0);
			double v = a * prob + prob * (d - dot);
			if (c == t) v -= a;
			g.set(at + c * HW, (float)v);
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

// Offsets in a queued step's entry and the queue's state (the step
// queue, below), in units of the type named.
#define ENTRY_NONFINITE 0  // int
#define ENTRY_LOSS_SCALE 2 // float
#define ENTRY_INV 3        // float
#define ENTRY_STEP_SIZE 4  // float
#define ENTRY_SQRT_BC2 5   // float
#define ENTRY_STEPS 3      // i64
#define ENTRY_NORM 4       // double
#define ENTRY_CLIP 10      // float
#define STATE_STEPS 0      // i64
#define STATE_SCALE 1      // double
#define STATE_TRACKER 4    // int

// adam: backend.AdamStep's update, in its order of float32 operations.
// Where entry is a queued step's (step_factors'), a step whose gradients
// were not finite leaves everything as it was, and the step size and
// sqrt(bias correction 2) are the entry's.
KERNEL(adam)(u64 w, u64 g, u64 m, u64 v, i64 n, double stepSize, double sqrtBC2,
		double beta1, double beta2, double omb1, double omb2, double eps, double wd, double decoupled, u64 entry) {
	gptr<float> ws = GCAST(float, w), ms = GCAST(float, m), vs = GCAST(float, v);
	gptr<const float> gs = GCAST(const float, g);
	float a = (float)stepSize, sb = (float)sqrtBC2, b1 = (float)beta1, b2 = (float)beta2;
	if (entry) {
		if (GCAST(const int, entry)[ENTRY_NONFINITE] != 0) return;
		a = GCAST(const float, entry)[ENTRY_STEP_SIZE];
		sb = GCAST(const float, entry)[ENTRY_SQRT_BC2];
	}
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

// sgd: backend.SGDStep's update, in its order of float32 operations; a
// queued step's entry skips it or says whether it is the first.
KERNEL(sgd)(u64 w, u64 g, u64 buf, i64 n, double lr, double momentum, double dampening, double wd, i64 nesterov, i64 first,
	    u64 entry) {
	gptr<float> ws = GCAST(float, w), bs = GCAST(float, buf);
	gptr<const float> gs = GCAST(const float, g);
	float a = (float)lr, mo = (float)momentum, da = (float)dampening, d = (float)wd;
	if (entry) {
		if (GCAST(const int, entry)[ENTRY_NONFINITE] != 0) return;
		first = GCAST(const i64, entry)[ENTRY_STEPS] == 1;
	}
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

// rmsprop: backend.RMSpropStep's update, in its order of float32
// operations; a queued step's entry may skip it.
KERNEL(rmsprop)(u64 w, u64 g, u64 sq, u64 buf, i64 n, double lr, double alpha, double oma, double eps, double wd, double momentum,
		u64 entry) {
	gptr<float> ws = GCAST(float, w), ss = GCAST(float, sq), bs = GCAST(float, buf);
	gptr<const float> gs = GCAST(const float, g);
	float a = (float)lr, al = (float)alpha, om = (float)oma, ep = (float)eps, d = (float)wd, mo = (float)momentum;
	if (entry && GCAST(const int, entry)[ENTRY_NONFINITE] != 0) return;
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

// unscale_check: g *= inv (the float at invAt where that is not 0); where
// flag is not 0, *flag = 1 if any result is not finite. Without a flag a
// factor of 1 leaves g as it is (x*1 is x).
KERNEL(unscale_check)(u64 g, i64 n, double inv, u64 flag, u64 invAt) {
	gptr<float> x = GCAST(float, g);
	float s = invAt ? GCAST(const float, invAt)[0] : (float)inv;
	if (!flag && s == 1.0f) return;
	GRID_STRIDE(i, n) {
		float v = x[i] * s;
		x[i] = v;
		if (flag && !isfinite(v)) atomicExch(GCAST(int, flag), 1); // blocks may both find one
	}
}

// sum_squares: out[b] is backend.SumSquaresOf of block b of g (blocks of
// `block` values): four float64 sums over the values in fours, the rest
// into the first, then (s0+s1)+(s2+s3); one thread a block.
KERNEL(sum_squares)(u64 out, u64 g, i64 n, i64 block) {
	gptr<const float> x = GCAST(const float, g);
	gptr<double> sums = GCAST(double, out);
	GRID_STRIDE(b, (n + block - 1) / block) {
		i64 lo = b * block, hi = min(n, lo + block), i = lo;
		double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
		for (; i + 4 <= hi; i += 4) {
			double a = x[i], c = x[i + 1], d = x[i + 2], e = x[i + 3];
			s0 += a * a;
			s1 += c * c;
			s2 += d * d;
			s3 += e * e;
		}
		for (; i < hi; i++) {
			double a = x[i];
			s0 += a * a;
		}
		sums[b] = (s0 + s1) + (s2 + s3);
	}
}

// sum_squares_finish adds the blocks' sums in order, as backend.Composed's
// SumSquares adds them, into total. Where entry is set (a queued step the
// trainer clips) it keeps there the norm sqrt(total) and the factor
// clip_grad_norm_ scales the gradients by for maxNorm, in optim.ClipCoef's
// float32 steps (eps its epsilon), 1 where it would not scale them.
KERNEL(sum_squares_finish)(u64 total, u64 partial, i64 blocks, u64 entry, double maxNorm, double eps) {
	if (blockIdx.x != 0 || threadIdx.x != 0) return;
	gptr<const double> p = GCAST(const double, partial);
	double t = 0;
	for (i64 b = 0; b < blocks; b++) t += p[b];
	GCAST(double, total)[0] = t;
	if (!entry) return;
	double norm = sqrt(t);
	float n32 = (float)norm, coef;
	if (isinf(n32) && !isinf(norm)) {
		coef = (float)(maxNorm / norm);
	} else {
		float den = n32 + (float)eps;
		float recip = 1.0f / den;
		coef = recip * (float)maxNorm;
	}
	if (coef > 1.0f) coef = 1.0f;
	GCAST(double, entry)[ENTRY_NORM] = norm;
	GCAST(float, entry)[ENTRY_CLIP] = coef;
}

// ---- the step queue (backend/cuda/queue.go) ----
//
// A queued step's entry is 48 bytes: the int flag unscale_check raises
// where a gradient is not finite; the floats of its loss scale, unscale
// factor, Adam's step size and sqrt(bias correction 2); the optimizer's
// step count after it (int64); where it clips, its gradients' norm
// (double) and clipping factor (float). The queue's state: the step count (int64),
// the grad scaler's scale (double) and growth tracker (int).

// step_begin opens a step's entry: its flag cleared, its loss gradient's
// scale (the scaler's scale over accum) and its gradients' unscale factor,
// each a double expression rounded once, as the host forms them.
KERNEL(step_begin)(u64 entry, u64 state, i64 accum) {
	if (blockIdx.x != 0 || threadIdx.x != 0) return;
	double scale = GCAST(const double, state)[STATE_SCALE];
	GCAST(int, entry)[ENTRY_NONFINITE] = 0;
	GCAST(float, entry)[ENTRY_LOSS_SCALE] = (float)(scale / (double)accum);
	GCAST(float, entry)[ENTRY_INV] = (float)(1.0 / scale);
}

// step_factors decides a step once its gradients are checked: where they
// were all finite the step count advances; the entry keeps the count and,
// from the bias corrections of the counts after base (rows pairs of
// 1-beta1^t, 1-beta2^t, as Adam's host code forms them), Adam's float32
// step size lr/bc1 and sqrt(bc2), each rounded once. Then the grad
// scaler's update (GradScaler.Update; growth 0: disabled): not finite
// multiplies the scale by backoff and clears the tracker; finite counts,
// and at interval multiplies it by growth.
KERNEL(step_factors)(u64 entry, u64 state, u64 table, i64 base, i64 rows, double lr, double growth, double backoff,
		     i64 interval) {
	if (blockIdx.x != 0 || threadIdx.x != 0) return;
	bool finite = GCAST(const int, entry)[ENTRY_NONFINITE] == 0;
	i64 t = GCAST(const i64, state)[STATE_STEPS] + (finite ? 1 : 0);
	GCAST(i64, state)[STATE_STEPS] = t;
	GCAST(i64, entry)[ENTRY_STEPS] = t;
	i64 row = t - base - 1;
	if (row >= 0 && row < rows) {
		gptr<const double> bc = GCAST(const double, table);
		GCAST(float, entry)[ENTRY_STEP_SIZE] = (float)(lr / bc[2 * row]);
		GCAST(float, entry)[ENTRY_SQRT_BC2] = (float)sqrt(bc[2 * row + 1]);
	}
	if (growth == 0) return;
	double scale = GCAST(const double, state)[STATE_SCALE];
	int tracker = GCAST(const int, state)[STATE_TRACKER];
	if (!finite) {
		scale = scale * backoff;
		tracker = 0;
	} else if (++tracker == interval) {
		scale = scale * growth;
		tracker = 0;
	}
	GCAST(double, state)[STATE_SCALE] = scale;
	GCAST(int, state)[STATE_TRACKER] = tracker;
}
