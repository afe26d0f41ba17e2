//go:build amd64 && !noasm

#include "textflag.h"

// func f32ToF16F16C(dst *uint16, src *float32, n int)
//
// n (a multiple of 8, >= 8) float32s to float16 with VCVTPS2PH, rounding to
// nearest even (immediate 0). Overflow gives ±Inf, subnormals are exact,
// and a NaN keeps its sign and top 10 payload bits with the quiet bit set,
// as F32ToF16 does.
TEXT ·f32ToF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX

loop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// func f16ToF32F16C(dst *float32, src *uint16, n int)
//
// n (a multiple of 8, >= 8) float16s to float32 with VCVTPH2PS (exact; a
// NaN comes back quiet with its payload), as F16ToF32 does.
TEXT ·f16ToF32F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX

loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// BCAST(imm, Y) sets every dword of Y to imm (via AX and the low X of Y).
#define BCAST(imm, Xr, Yr) \
	MOVQ         $imm, AX; \
	MOVQ         AX, Xr;   \
	VPBROADCASTD Xr, Yr

// func f32ToBF16AVX2(dst *uint16, src *float32, n int)
//
// n (a multiple of 16, >= 16) float32s to bfloat16 exactly as F32ToBF16:
// h = (x + 0x7fff + (x>>16)&1) >> 16 (round to nearest even; overflow to
// Inf), and for a NaN (|x| > 0x7f800000) h = x>>16 | 0x40.
TEXT ·f32ToBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	BCAST(1, X10, Y10)
	BCAST(0x7fff, X11, Y11)
	BCAST(0x7fffffff, X12, Y12)
	BCAST(0x7f800000, X13, Y13)
	BCAST(0x40, X14, Y14)

loop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y5

	// First 8: rounded in Y2, NaN form in Y4, NaN mask in Y3.
	VPSRLD    $16, Y0, Y4
	VPAND     Y10, Y4, Y1
	VPADDD    Y11, Y0, Y2
	VPADDD    Y1, Y2, Y2
	VPSRLD    $16, Y2, Y2
	VPAND     Y12, Y0, Y3
	VPCMPGTD  Y13, Y3, Y3
	VPOR      Y14, Y4, Y4
	VPBLENDVB Y3, Y4, Y2, Y2

	// Second 8 into Y7.
	VPSRLD    $16, Y5, Y9
	VPAND     Y10, Y9, Y6
	VPADDD    Y11, Y5, Y7
	VPADDD    Y6, Y7, Y7
	VPSRLD    $16, Y7, Y7
	VPAND     Y12, Y5, Y8
	VPCMPGTD  Y13, Y8, Y8
	VPOR      Y14, Y9, Y9
	VPBLENDVB Y8, Y9, Y7, Y7

	// 16 dwords (all <= 0xffff) to 16 words, in order.
	VPACKUSDW Y7, Y2, Y2
	VPERMQ    $0xD8, Y2, Y2
	VMOVDQU   Y2, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// func bf16ToF32AVX2(dst *float32, src *uint16, n int)
//
// n (a multiple of 8, >= 8) bfloat16s to float32 exactly as BF16ToF32:
// x = h<<16, with the quiet bit set for a NaN.
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	BCAST(0x7fffffff, X12, Y12)
	BCAST(0x7f800000, X13, Y13)
	BCAST(0x00400000, X14, Y14)

loop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VPAND     Y12, Y0, Y1
	VPCMPGTD  Y13, Y1, Y1
	VPAND     Y14, Y1, Y1
	VPOR      Y1, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// func f32ToF16AVX512(dst *uint16, src *float32, n int)
//
// f32ToF16F16C 16 values at a time (n a multiple of 16, >= 16): the
// AVX-512 VCVTPS2PH rounds as the F16C one does (immediate 0).
TEXT ·f32ToF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX

loop:
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, Y1
	VMOVDQU   Y1, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// func f16ToF32AVX512(dst *float32, src *uint16, n int)
//
// f16ToF32F16C 16 values at a time (n a multiple of 16, >= 16).
TEXT ·f16ToF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX

loop:
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// func f32ToBF16AVX512(dst *uint16, src *float32, n int)
//
// f32ToBF16AVX2 16 values at a time (n a multiple of 16, >= 16): the NaN
// lanes (|x| > 0x7f800000) take x>>16 | 0x40 under a mask, and the 16
// dwords (all <= 0xffff) narrow to words with VPMOVDW.
TEXT ·f32ToBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVL $1, AX
	VPBROADCASTD AX, Z10
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z11
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z12
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z13
	MOVL $0x40, AX
	VPBROADCASTD AX, Z14

loop:
	VMOVDQU32 (SI), Z0
	VPSRLD    $16, Z0, Z4
	VPANDD    Z10, Z4, Z1
	VPADDD    Z11, Z0, Z2
	VPADDD    Z1, Z2, Z2
	VPSRLD    $16, Z2, Z2
	VPANDD    Z12, Z0, Z3
	VPCMPUD   $6, Z13, Z3, K1
	VPORD     Z14, Z4, K1, Z2
	VPMOVDW   Z2, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// func bf16ToF32AVX512(dst *float32, src *uint16, n int)
//
// bf16ToF32AVX2 16 values at a time (n a multiple of 16, >= 16).
TEXT ·bf16ToF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z12
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z13
	MOVL $0x00400000, AX
	VPBROADCASTD AX, Z14

loop:
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VPANDD    Z12, Z0, Z1
	VPCMPUD   $6, Z13, Z1, K1
	VPORD     Z14, Z0, K1, Z0
	VMOVDQU32 Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET
