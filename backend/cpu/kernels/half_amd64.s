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
