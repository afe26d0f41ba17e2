// half.h: fp32 <-> fp16/bf16 conversions, backend/half.go's functions bit
// for bit (rounding to nearest even, NaN quieted), for the kernels of
// ops.cu and tc.cu (and the emulator's tensor-core shim). Each float
// operation rounds on its own: __fadd_rn, __fsub_rn.
#pragma once
#include <stdint.h>

__device__ __forceinline__ uint16_t f32_to_f16(float f) {
	uint32_t x = __float_as_uint(f);
	uint32_t a = x & 0x7fffffffu;
	uint32_t h = min((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13, 0x7c00u);
	if (a < 0x38800000u) {
		h = __float_as_uint(__fadd_rn(__uint_as_float(a), 0.5f)) - 0x3f000000u;
	}
	if (a > 0x7f800000u) {
		h = 0x7e00u | ((a >> 13) & 0x3ffu);
	}
	return (uint16_t)(((x ^ a) >> 16) | h);
}

__device__ __forceinline__ float f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t a = h & 0x7fffu;
	uint32_t x = (a << 13) + 0x38000000u;
	if (a < 0x0400u) {
		x = __float_as_uint(__fsub_rn(__uint_as_float(0x38800000u | (a << 13)), 6.103515625e-05f));
	}
	if (a >= 0x7c00u) {
		x = 0x7f800000u | ((a & 0x3ffu) << 13);
		if (a > 0x7c00u) x |= 0x00400000u;
	}
	return __uint_as_float(sign | x);
}

__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
	uint32_t x = __float_as_uint(f);
	uint16_t h = (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
	if ((x & 0x7fffffffu) > 0x7f800000u) h = (uint16_t)(x >> 16) | 0x0040u;
	return h;
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) {
	uint32_t x = (uint32_t)h << 16;
	if ((h & 0x7fffu) > 0x7f80u) x |= 0x00400000u;
	return __uint_as_float(x);
}
