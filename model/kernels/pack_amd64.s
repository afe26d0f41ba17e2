//go:build amd64 && !noasm

#include "textflag.h"

// func copyChunks16AVX(dst, src *float32, n, dstStride int)
//
// Copies n chunks of 16 floats: chunk t from src+16t to dst+t*dstStride
// (dstStride in floats). n >= 1.
TEXT ·copyChunks16AVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ dstStride+24(FP), R8
	SHLQ $2, R8

loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    $64, SI
	ADDQ    R8, DI
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// TRANSPOSE8 transposes the 8x8 block whose rows are in Y0..Y7 into its
// columns in Y8..Y15 (column t in Y(8+t)); Y0..Y7 are clobbered.
#define TRANSPOSE8 \
	VUNPCKLPS  Y1, Y0, Y8;          \
	VUNPCKHPS  Y1, Y0, Y9;          \
	VUNPCKLPS  Y3, Y2, Y10;         \
	VUNPCKHPS  Y3, Y2, Y11;         \
	VUNPCKLPS  Y5, Y4, Y12;         \
	VUNPCKHPS  Y5, Y4, Y13;         \
	VUNPCKLPS  Y7, Y6, Y14;         \
	VUNPCKHPS  Y7, Y6, Y15;         \
	VSHUFPS    $0x44, Y10, Y8, Y0;  \
	VSHUFPS    $0xEE, Y10, Y8, Y1;  \
	VSHUFPS    $0x44, Y11, Y9, Y2;  \
	VSHUFPS    $0xEE, Y11, Y9, Y3;  \
	VSHUFPS    $0x44, Y14, Y12, Y4; \
	VSHUFPS    $0xEE, Y14, Y12, Y5; \
	VSHUFPS    $0x44, Y15, Y13, Y6; \
	VSHUFPS    $0xEE, Y15, Y13, Y7; \
	VPERM2F128 $0x20, Y4, Y0, Y8;   \
	VPERM2F128 $0x20, Y5, Y1, Y9;   \
	VPERM2F128 $0x20, Y6, Y2, Y10;  \
	VPERM2F128 $0x20, Y7, Y3, Y11;  \
	VPERM2F128 $0x31, Y4, Y0, Y12;  \
	VPERM2F128 $0x31, Y5, Y1, Y13;  \
	VPERM2F128 $0x31, Y6, Y2, Y14;  \
	VPERM2F128 $0x31, Y7, Y3, Y15

// LOAD8 loads 8 floats at offset 0 of the rows at A, A+s, A+2s, A+3s, B,
// B+s, B+2s, B+3s (s in R8, 3s in R9) into Y0..Y7.
#define LOAD8(A, B) \
	VMOVUPS (A), Y0;        \
	VMOVUPS (A)(R8*1), Y1;  \
	VMOVUPS (A)(R8*2), Y2;  \
	VMOVUPS (A)(R9*1), Y3;  \
	VMOVUPS (B), Y4;        \
	VMOVUPS (B)(R8*1), Y5;  \
	VMOVUPS (B)(R8*2), Y6;  \
	VMOVUPS (B)(R9*1), Y7

// STORE8(OFF) stores column t (Y(8+t)) at DI + t*64 + OFF.
#define STORE8(OFF) \
	VMOVUPS Y8, (OFF)(DI);      \
	VMOVUPS Y9, (64+OFF)(DI);   \
	VMOVUPS Y10, (128+OFF)(DI); \
	VMOVUPS Y11, (192+OFF)(DI); \
	VMOVUPS Y12, (256+OFF)(DI); \
	VMOVUPS Y13, (320+OFF)(DI); \
	VMOVUPS Y14, (384+OFF)(DI); \
	VMOVUPS Y15, (448+OFF)(DI)

// func transpose16AVX(dst, src *float32, srcStride, blocks int)
//
// dst[p*16+l] = src[l*srcStride+p] for l < 16 and p < 8*blocks
// (srcStride in floats): 16 rows of src become the 16 lanes of dst.
// blocks >= 1.
TEXT ·transpose16AVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ srcStride+16(FP), R8
	MOVQ blocks+24(FP), CX
	SHLQ $2, R8           // row stride in bytes
	LEAQ (R8)(R8*2), R9   // 3 rows
	LEAQ (SI)(R8*4), R10  // row 4
	LEAQ (R10)(R8*4), R11 // row 8
	LEAQ (R11)(R8*4), R12 // row 12

loop:
	LOAD8(SI, R10)
	TRANSPOSE8
	STORE8(0)
	LOAD8(R11, R12)
	TRANSPOSE8
	STORE8(32)
	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $32, R11
	ADDQ $32, R12
	ADDQ $512, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET
