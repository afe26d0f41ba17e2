// memunet's CUDA convolutions: one tiled SGEMM (64x64 tiles, 16-deep
// slices in shared memory, 4x4 outputs per thread: the classic layout)
// whose operands are read through index maps, so each convolution and its
// two gradients is an implicit GEMM: no im2col buffer, no workspace.
//
//   C[m][n] (=, or += for weight gradients) sum over k of A(m,k) * B(k,n)
//
// Compiled with fused multiply-add on (the products are summed in a
// different order than on the CPU anyway). Parameters are 64 bits each, as
// in ops.cu.

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

#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4
// BM/TM * BN/TN = 256 threads per block

// gemm: the tiled product; A and B are functors (float operator()(i64, i64),
// 0 outside), S stores (void operator()(i64 m, i64 n, float acc)).
// gemm_tile computes the tile (rowTile, blockIdx.x) over depths [kb, ke).
template <class A, class B, class S>
__device__ void gemm_tile(i64 M, i64 N, i64 kb, i64 ke, i64 rowTile, A a, B b, S store) {
	SHARED2(float, As, BK, BM);
	SHARED2(float, Bs, BK, BN);
	int tid = threadIdx.x;
	int tx = tid % (BN / TN), ty = tid / (BN / TN);
	i64 m0 = rowTile * BM, n0 = (i64)blockIdx.x * BN;
	i64 K = ke;
	float acc[TM][TN];
	for (int i = 0; i < TM; i++)
		for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
	for (i64 k0 = kb; k0 < K; k0 += BK) {
		// 256 threads load 16x64 values of each operand: 4 each.
		for (int l = tid; l < BK * BM; l += 256) {
			int kk = l / BM, mm = l % BM;
			i64 m = m0 + mm, k = k0 + kk;
			As[kk][mm] = (m < M && k < K) ? a(m, k) : 0.0f;
		}
		for (int l = tid; l < BK * BN; l += 256) {
			int kk = l / BN, nn = l % BN;
			i64 n = n0 + nn, k = k0 + kk;
			Bs[kk][nn] = (n < N && k < K) ? b(k, n) : 0.0f;
		}
		__syncthreads();
		for (int kk = 0; kk < BK; kk++) {
			float av[TM], bv[TN];
			for (int i = 0; i < TM; i++) av[i] = As[kk][ty * TM + i];
			for (int j = 0; j < TN; j++) bv[j] = Bs[kk][tx * TN + j];
			for (int i = 0; i < TM; i++)
				for (int j = 0; j < TN; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
		}
		__syncthreads();
	}
	// Unrolled, so that acc stays in registers whatever store does (a
	// 16-bit store's rounding is long).
#pragma unroll
	for (int i = 0; i < TM; i++) {
		i64 m = m0 + ty * TM + i;
		if (m >= M) continue;
#pragma unroll
		for (int j = 0; j < TN; j++) {
			i64 n = n0 + tx * TN + j;
			if (n < N) store(m, n, acc[i][j]);
		}
	}
}

// gemm: the whole depth, grid (column tiles, row tiles).
template <class A, class B, class S>
__device__ void gemm(i64 M, i64 N, i64 K, A a, B b, S store) {
	gemm_tile(M, N, 0, K, blockIdx.y, a, b, store);
}

// gemm_split: split-K for products with few tiles and a long depth (the
// weight gradients): grid (column tiles, row tiles * splits); split s sums
// depths [s*chunk, (s+1)*chunk) into partial[s][m][n] (M*N floats each),
// which split_sum adds up in order. Deterministic, unlike atomics.
template <class A, class B>
__device__ void gemm_split(i64 M, i64 N, i64 K, i64 splits, gptr<float> partial, A a, B b) {
	i64 rowTiles = (M + BM - 1) / BM;
	i64 s = blockIdx.y / rowTiles, rowTile = blockIdx.y % rowTiles;
	i64 chunk = ((K + splits - 1) / splits + BK - 1) / BK * BK;
	i64 kb = s * chunk, ke = min(K, kb + chunk);
	gptr<float> out = partial + s * M * N;
	gemm_tile(M, N, kb, ke, rowTile, a, b, [=] __device__(i64 m, i64 n, float acc) { out[m * N + n] = acc; });
}

// split_sum: dst[i] += the sum over s of partial[s][i], in order, for the
// M*N values of a split product.
KERNEL(split_sum)(u64 dst, u64 partial, i64 n, i64 splits) {
	gptr<float> d = GCAST(float, dst);
	gptr<const float> p = GCAST(const float, partial);
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x) {
		float sum = 0.0f;
		for (i64 s = 0; s < splits; s++) sum += p[s * n + i];
		d[i] += sum;
	}
}

// Shapes: in (N,C,H,W), w (OC,C,KS,KS), out (N,OC,OH,OW), stride 1, zero
// padding pad. Grids are (ceil(cols/BN), ceil(rows/BM)), 256 threads.

struct ConvShape {
	i64 N, C, H, W, OC, KS, pad, OH, OW;
};

__device__ ConvShape conv_shape(i64 N, i64 C, i64 H, i64 W, i64 OC, i64 KS, i64 pad) {
	ConvShape s = {N, C, H, W, OC, KS, pad, H + 2 * pad - KS + 1, W + 2 * pad - KS + 1};
	return s;
}

// conv: out[n,oc,p] = sum over (c,ky,kx) of w[oc,c,ky,kx] * in[n,c,oy+ky-pad,ox+kx-pad]
// (+ bias[oc] when bias is not 0): rows oc, columns (n, oy, ox).
KERNEL(conv)(u64 out, u64 in, u64 w, u64 bias, i64 N, i64 C, i64 H, i64 W, i64 OC, i64 KS, i64 pad) {
	ConvShape s = conv_shape(N, C, H, W, OC, KS, pad);
	gptr<const float> x = GCAST(const float, in), wt = GCAST(const float, w), bs = GCAST(const float, bias);
	gptr<float> y = GCAST(float, out);
	i64 KK = KS * KS, P = s.OH * s.OW;
	gemm(OC, N * P, C * KK,
		[=] __device__(i64 m, i64 k) { return wt[m * C * KK + k]; },
		[=] __device__(i64 k, i64 n) {
			i64 img = n / P, p = n % P, c = k / KK, r = k % KK;
			i64 iy = p / s.OW + r / KS - pad, ix = p % s.OW + r % KS - pad;
			return (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[((img * C + c) * H + iy) * W + ix] : 0.0f;
		},
		[=] __device__(i64 m, i64 n, float acc) {
			i64 img = n / P, p = n % P;
			y[(img * OC + m) * P + p] = bs ? acc + bs[m] : acc;
		});
}

// conv_back_data: din[n,c,y,x] = sum over (oc,ky,kx) of w[oc,c,ky,kx] *
// dout[n,oc,y-ky+pad,x-kx+pad]: rows c, columns (n, y, x); overwritten.
KERNEL(conv_back_data)(u64 din, u64 dout, u64 w, i64 N, i64 C, i64 H, i64 W, i64 OC, i64 KS, i64 pad) {
	ConvShape s = conv_shape(N, C, H, W, OC, KS, pad);
	gptr<const float> dy = GCAST(const float, dout), wt = GCAST(const float, w);
	gptr<float> dx = GCAST(float, din);
	i64 KK = KS * KS, HW = H * W;
	gemm(C, N * HW, OC * KK,
		[=] __device__(i64 m, i64 k) { return wt[((k / KK) * C + m) * KK + k % KK]; },
		[=] __device__(i64 k, i64 n) {
			i64 img = n / HW, q = n % HW, oc = k / KK, r = k % KK;
			i64 oy = q / W - r / KS + pad, ox = q % W - r % KS + pad;
			return (oy >= 0 && oy < s.OH && ox >= 0 && ox < s.OW) ? dy[((img * OC + oc) * s.OH + oy) * s.OW + ox] : 0.0f;
		},
		[=] __device__(i64 m, i64 n, float acc) { dx[((n / HW) * C + m) * HW + n % HW] = acc; });
}

// conv_back_weight: dw[oc,c,ky,kx] += sum over (n,oy,ox) of dout[n,oc,oy,ox] *
// in[n,c,oy+ky-pad,ox+kx-pad]: rows oc, columns (c, ky, kx). With splits > 1
// the grid is (column tiles, row tiles * splits) and the sums go to ws for
// split_sum.
KERNEL(conv_back_weight)(u64 dw, u64 dout, u64 in, i64 N, i64 C, i64 H, i64 W, i64 OC, i64 KS, i64 pad, i64 splits, u64 ws) {
	ConvShape s = conv_shape(N, C, H, W, OC, KS, pad);
	gptr<const float> dy = GCAST(const float, dout), x = GCAST(const float, in);
	gptr<float> g = GCAST(float, dw);
	i64 KK = KS * KS, P = s.OH * s.OW;
	auto a = [=] __device__(i64 m, i64 k) { return dy[((k / P) * OC + m) * P + k % P]; };
	auto b = [=] __device__(i64 k, i64 n) {
		i64 img = k / P, p = k % P, c = n / KK, r = n % KK;
		i64 iy = p / s.OW + r / KS - pad, ix = p % s.OW + r % KS - pad;
		return (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[((img * C + c) * H + iy) * W + ix] : 0.0f;
	};
	if (splits > 1) {
		gemm_split(OC, C * KK, N * P, splits, GCAST(float, ws), a, b);
		return;
	}
	gemm(OC, C * KK, N * P, a, b, [=] __device__(i64 m, i64 n, float acc) { g[m * C * KK + n] += acc; });
}

// Transposed 2x2 stride-2 convolution: in (N,C,H,W), w (C,OC,2,2),
// out (N,OC,2H,2W): out[n,oc,2h+i,2w+j] = sum over c of in[n,c,h,w]*w[c,oc,i,j].

// up_conv: rows (oc, i, j), columns (n, h, w), depth c.
KERNEL(up_conv)(u64 out, u64 in, u64 w, u64 bias, i64 N, i64 C, i64 H, i64 W, i64 OC) {
	gptr<const float> x = GCAST(const float, in), wt = GCAST(const float, w), bs = GCAST(const float, bias);
	gptr<float> y = GCAST(float, out);
	i64 HW = H * W;
	gemm(OC * 4, N * HW, C,
		[=] __device__(i64 m, i64 k) { return wt[k * OC * 4 + m]; },
		[=] __device__(i64 k, i64 n) { return x[((n / HW) * C + k) * HW + n % HW]; },
		[=] __device__(i64 m, i64 n, float acc) {
			i64 oc = m / 4, i = (m / 2) % 2, j = m % 2, img = n / HW, h = (n % HW) / W, ww = n % W;
			y[((img * OC + oc) * 2 * H + 2 * h + i) * 2 * W + 2 * ww + j] = bs ? acc + bs[oc] : acc;
		});
}

// up_conv_back_data: din[n,c,h,w] = sum over (oc,i,j) of w[c,oc,i,j] *
// dout[n,oc,2h+i,2w+j]: rows c, columns (n, h, w), depth (oc, i, j).
KERNEL(up_conv_back_data)(u64 din, u64 dout, u64 w, i64 N, i64 C, i64 H, i64 W, i64 OC) {
	gptr<const float> dy = GCAST(const float, dout), wt = GCAST(const float, w);
	gptr<float> dx = GCAST(float, din);
	i64 HW = H * W;
	gemm(C, N * HW, OC * 4,
		[=] __device__(i64 m, i64 k) { return wt[m * OC * 4 + k]; },
		[=] __device__(i64 k, i64 n) {
			i64 oc = k / 4, i = (k / 2) % 2, j = k % 2, img = n / HW, h = (n % HW) / W, ww = n % W;
			return dy[((img * OC + oc) * 2 * H + 2 * h + i) * 2 * W + 2 * ww + j];
		},
		[=] __device__(i64 m, i64 n, float acc) { dx[((n / HW) * C + m) * HW + n % HW] = acc; });
}

// up_conv_back_weight: dw[c,oc,i,j] += sum over (n,h,w) of in[n,c,h,w] *
// dout[n,oc,2h+i,2w+j]: rows c, columns (oc, i, j), depth (n, h, w); splits
// as conv_back_weight's.
KERNEL(up_conv_back_weight)(u64 dw, u64 dout, u64 in, i64 N, i64 C, i64 H, i64 W, i64 OC, i64 splits, u64 ws) {
	gptr<const float> dy = GCAST(const float, dout), x = GCAST(const float, in);
	gptr<float> g = GCAST(float, dw);
	i64 HW = H * W;
	auto a = [=] __device__(i64 m, i64 k) { return x[((k / HW) * C + m) * HW + k % HW]; };
	auto b = [=] __device__(i64 k, i64 n) {
		i64 oc = n / 4, i = (n / 2) % 2, j = n % 2, img = k / HW, h = (k % HW) / W, ww = k % W;
		return dy[((img * OC + oc) * 2 * H + 2 * h + i) * 2 * W + 2 * ww + j];
	};
	if (splits > 1) {
		gemm_split(C, OC * 4, N * HW, splits, GCAST(float, ws), a, b);
		return;
	}
	gemm(C, OC * 4, N * HW, a, b, [=] __device__(i64 m, i64 n, float acc) { g[m * OC * 4 + n] += acc; });
}

// ---- 3D convolutions (volumes N,C,D,H,W) ----
//
// The same implicit GEMM with a depth index, on tensors of dtype dt (fp32,
// or fp16/bf16 bits widened as they are read and the results rounded once
// as they are written; weights in dt too, bias and weight gradients fp32).

#include "half.h"

// vload is value i of a float tensor of dtype dt as float32; vstore
// writes one, rounded to dt.
__device__ __forceinline__ float vload(u64 p, i64 dt, i64 i) {
	if (dt == 0) return GCAST(const float, p)[i];
	uint16_t h = GCAST(const uint16_t, p)[i];
	return dt == 1 ? f16_to_f32(h) : bf16_to_f32(h);
}
__device__ __forceinline__ void vstore(u64 p, i64 dt, i64 i, float v) {
	if (dt == 0) GCAST(float, p)[i] = v;
	else GCAST(uint16_t, p)[i] = dt == 1 ? f32_to_f16(v) : f32_to_bf16(v);
}

// A 3D convolution's shape: in (N,C,D,H,W), w (OC,C,KD,KS,KS), stride 1,
// padding (padD,pad,pad), out (N,OC,OD,OH,OW).
struct Conv3Shape {
	i64 N, C, D, H, W, OC, KD, KS, padD, pad, OD, OH, OW;
};

__device__ Conv3Shape conv3_shape(i64 N, i64 C, i64 D, i64 H, i64 W, i64 OC, i64 KD, i64 KS, i64 padD, i64 pad) {
	Conv3Shape s = {N, C, D, H, W, OC, KD, KS, padD, pad, D + 2 * padD - KD + 1, H + 2 * pad - KS + 1, W + 2 * pad - KS + 1};
	return s;
}

// conv3: out[n,oc,z,y,x] = sum over (c,kd,ky,kx) of w[oc,c,kd,ky,kx] *
// in[n,c,z+kd-padD,y+ky-pad,x+kx-pad] (+ bias[oc] when bias is not 0):
// rows oc, columns (n, z, y, x).
KERNEL(conv3)(u64 out, u64 in, u64 w, u64 bias, i64 dt, i64 N, i64 C, i64 D, i64 H, i64 W, i64 OC, i64 KD, i64 KS, i64 padD,
	      i64 pad) {
	Conv3Shape s = conv3_shape(N, C, D, H, W, OC, KD, KS, padD, pad);
	gptr<const float> bs = GCAST(const float, bias);
	i64 KK = KS * KS, R = KD * KK, P = s.OD * s.OH * s.OW;
	gemm(OC, N * P, C * R,
		[=] __device__(i64 m, i64 k) { return vload(w, dt, m * C * R + k); },
		[=] __device__(i64 k, i64 n) {
			i64 img = n / P, p = n % P, c = k / R, r = k % R;
			i64 iz = p / (s.OH * s.OW) + r / KK - padD, iy = p / s.OW % s.OH + r % KK / KS - pad, ix = p % s.OW + r % KS - pad;
			bool inside = iz >= 0 && iz < D && iy >= 0 && iy < H && ix >= 0 && ix < W;
			return inside ? vload(in, dt, (((img * C + c) * D + iz) * H + iy) * W + ix) : 0.0f;
		},
		[=] __device__(i64 m, i64 n, float acc) {
			i64 img = n / P, p = n % P;
			vstore(out, dt, (img * OC + m) * P + p, bs ? acc + bs[m] : acc);
		});
}

// conv3_back_data: din[n,c,z,y,x] = sum over (oc,kd,ky,kx) of
// w[oc,c,kd,ky,kx] * dout[n,oc,z-kd+padD,y-ky+pad,x-kx+pad]: rows c, columns
// (n, z, y, x); overwritten.
KERNEL(conv3_back_data)(u64 din, u64 dout, u64 w, i64 dt, i64 N, i64 C, i64 D, i64 H, i64 W, i64 OC, i64 KD, i64 KS, i64 padD,
			i64 pad) {
	Conv3Shape s = conv3_shape(N, C, D, H, W, OC, KD, KS, padD, pad);
	i64 KK = KS * KS, R = KD * KK, V = D * H * W;
	gemm(C, N * V, OC * R,
		[=] __device__(i64 m, i64 k) { return vload(w, dt, ((k / R) * C + m) * R + k % R); },
		[=] __device__(i64 k, i64 n) {
			i64 img = n / V, q = n % V, oc = k / R, r = k % R;
			i64 oz = q / (H * W) - r / KK + padD, oy = q / W % H - r % KK / KS + pad, ox = q % W - r % KS + pad;
			bool inside = oz >= 0 && oz < s.OD && oy >= 0 && oy < s.OH && ox >= 0 && ox < s.OW;
			return inside ? vload(dout, dt, (((img * OC + oc) * s.OD + oz) * s.OH + oy) * s.OW + ox) : 0.0f;
		},
		[=] __device__(i64 m, i64 n, float acc) { vstore(din, dt, ((n / V) * C + m) * V + n % V, acc); });
}

// conv3_back_weight: dw[oc,c,kd,ky,kx] += sum over (n,z,y,x) of
// dout[n,oc,z,y,x] * in[n,c,z+kd-padD,y+ky-pad,x+kx-pad]: rows oc, columns
// (c, kd, ky, kx); splits as conv_back_weight's.
KERNEL(conv3_back_weight)(u64 dw, u64 dout, u64 in, i64 dt, i64 N, i64 C, i64 D, i64 H, i64 W, i64 OC, i64 KD, i64 KS, i64 padD,
			  i64 pad, i64 splits, u64 ws) {
	Conv3Shape s = conv3_shape(N, C, D, H, W, OC, KD, KS, padD, pad);
	gptr<float> g = GCAST(float, dw);
	i64 KK = KS * KS, R = KD * KK, P = s.OD * s.OH * s.OW;
	auto a = [=] __device__(i64 m, i64 k) { return vload(dout, dt, ((k / P) * OC + m) * P + k % P); };
	auto b = [=] __device__(i64 k, i64 n) {
		i64 img = k / P, p = k % P, c = n / R, r = n % R;
		i64 iz = p / (s.OH * s.OW) + r / KK - padD, iy = p / s.OW % s.OH + r % KK / KS - pad, ix = p % s.OW + r % KS - pad;
		bool inside = iz >= 0 && iz < D && iy >= 0 && iy < H && ix >= 0 && ix < W;
		return inside ? vload(in, dt, (((img * C + c) * D + iz) * H + iy) * W + ix) : 0.0f;
	};
	if (splits > 1) {
		gemm_split(OC, C * R, N * P, splits, GCAST(float, ws), a, b);
		return;
	}
	gemm(OC, C * R, N * P, a, b, [=] __device__(i64 m, i64 n, float acc) { g[m * C * R + n] += acc; });
}

// Transposed (KD,2,2) stride-(KD,2,2) 3D convolution: in (N,C,D,H,W), w
// (C,OC,KD,2,2), out (N,OC,KD*D,2H,2W): out[n,oc,KD*d+a,2h+i,2w+j] = sum
// over c of in[n,c,d,h,w]*w[c,oc,a,i,j]. Rows (oc, a, i, j) are T = 4*KD
// per channel.

// up_conv3_out is the output index of row m (oc, a, i, j) at column
// (img, d, h, w).
__device__ __forceinline__ i64 up_conv3_out(i64 m, i64 img, i64 q, i64 D, i64 H, i64 W, i64 OC, i64 KD) {
	i64 T = 4 * KD, oc = m / T, a = m % T / 4, i = m % 4 / 2, j = m % 2;
	i64 d = q / (H * W), h = q / W % H, w = q % W;
	return (((img * OC + oc) * KD * D + KD * d + a) * 2 * H + 2 * h + i) * 2 * W + 2 * w + j;
}

// up_conv3: rows (oc, a, i, j), columns (n, d, h, w), depth c.
KERNEL(up_conv3)(u64 out, u64 in, u64 w, u64 bias, i64 dt, i64 N, i64 C, i64 D, i64 H, i64 W, i64 OC, i64 KD) {
	gptr<const float> bs = GCAST(const float, bias);
	i64 V = D * H * W, T = 4 * KD;
	gemm(OC * T, N * V, C,
		[=] __device__(i64 m, i64 k) { return vload(w, dt, k * OC * T + m); },
		[=] __device__(i64 k, i64 n) { return vload(in, dt, ((n / V) * C + k) * V + n % V); },
		[=] __device__(i64 m, i64 n, float acc) {
			vstore(out, dt, up_conv3_out(m, n / V, n % V, D, H, W, OC, KD), bs ? acc + bs[m / T] : acc);
		});
}

// up_conv3_back_data: din[n,c,d,h,w] = sum over (oc,a,i,j) of w[c,oc,a,i,j]
// * dout[n,oc,KD*d+a,2h+i,2w+j]: rows c, columns (n, d, h, w).
KERNEL(up_conv3_back_data)(u64 din, u64 dout, u64 w, i64 dt, i64 N, i64 C, i64 D, i64 H, i64 W, i64 OC, i64 KD) {
	i64 V = D * H * W, T = 4 * KD;
	gemm(C, N * V, OC * T,
		[=] __device__(i64 m, i64 k) { return vload(w, dt, m * OC * T + k); },
		[=] __device__(i64 k, i64 n) { return vload(dout, dt, up_conv3_out(k, n / V, n % V, D, H, W, OC, KD)); },
		[=] __device__(i64 m, i64 n, float acc) { vstore(din, dt, ((n / V) * C + m) * V + n % V, acc); });
}

// up_conv3_back_weight: dw[c,oc,a,i,j] += sum over (n,d,h,w) of in[n,c,d,h,w]
// * dout[n,oc,KD*d+a,2h+i,2w+j]: rows c, columns (oc, a, i, j); splits as
// conv_back_weight's.
KERNEL(up_conv3_back_weight)(u64 dw, u64 dout, u64 in, i64 dt, i64 N, i64 C, i64 D, i64 H, i64 W, i64 OC, i64 KD, i64 splits,
			     u64 ws) {
	gptr<float> g = GCAST(float, dw);
	i64 V = D * H * W, T = 4 * KD;
	auto a = [=] __device__(i64 m, i64 k) { return vload(in, dt, ((k / V) * C + m) * V + k % V); };
	auto b = [=] __device__(i64 k, i64 n) { return vload(dout, dt, up_conv3_out(n, k / V, k % V, D, H, W, OC, KD)); };
	if (splits > 1) {
		gemm_split(C, OC * T, N * V, splits, GCAST(float, ws), a, b);
		return;
	}
	gemm(C, OC * T, N * V, a, b, [=] __device__(i64 m, i64 n, float acc) { g[m * OC * T + n] += acc; });
}
