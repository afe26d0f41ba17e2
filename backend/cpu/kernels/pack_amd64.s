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

// func gatherRows16AVX(dst, src *float32, offs *int, kc, panels int)
//
// For t < panels, p < kc, l < 16: dst[t*kc*16 + p*16 + l] =
// src[16*t + offs[p] + l]: panel t's row p is the 16 values at
// src+16t+offs[p]. kc, panels >= 1.
TEXT ·gatherRows16AVX(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ panels+32(FP), DX

gpanel:
	MOVQ offs+16(FP), BX
	MOVQ kc+24(FP), CX

gloop:
	MOVQ    (BX), AX
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    $8, BX
	ADDQ    $64, DI
	DECQ    CX
	JNZ     gloop
	ADDQ    $64, SI
	DECQ    DX
	JNZ     gpanel
	VZEROUPPER
	RET

// LOAD8X loads 8 floats at byte offset BX of the rows at R8..R13, SI, AX
// into Y0..Y7.
#define LOAD8X \
	VMOVUPS (R8)(BX*1), Y0;  \
	VMOVUPS (R9)(BX*1), Y1;  \
	VMOVUPS (R10)(BX*1), Y2; \
	VMOVUPS (R11)(BX*1), Y3; \
	VMOVUPS (R12)(BX*1), Y4; \
	VMOVUPS (R13)(BX*1), Y5; \
	VMOVUPS (SI)(BX*1), Y6;  \
	VMOVUPS (AX)(BX*1), Y7

// STORE8X stores column t (Y(8+t)) at DX + t*64.
#define STORE8X \
	VMOVUPS Y8, (DX);     \
	VMOVUPS Y9, 64(DX);   \
	VMOVUPS Y10, 128(DX); \
	VMOVUPS Y11, 192(DX); \
	VMOVUPS Y12, 256(DX); \
	VMOVUPS Y13, 320(DX); \
	VMOVUPS Y14, 384(DX); \
	VMOVUPS Y15, 448(DX)

// ROWS8(o0, ..., o7) points R8..R13, SI, AX at src + 4*offs[l], with offs[l]
// at byte offset oN of offs (src in DI); it clobbers BX.
#define ROWS8(o0, o1, o2, o3, o4, o5, o6, o7) \
	MOVQ offs+16(FP), BX; \
	MOVQ o0(BX), R8;       \
	LEAQ (DI)(R8*4), R8;   \
	MOVQ o1(BX), R9;       \
	LEAQ (DI)(R9*4), R9;   \
	MOVQ o2(BX), R10;       \
	LEAQ (DI)(R10*4), R10;   \
	MOVQ o3(BX), R11;       \
	LEAQ (DI)(R11*4), R11;   \
	MOVQ o4(BX), R12;       \
	LEAQ (DI)(R12*4), R12;   \
	MOVQ o5(BX), R13;       \
	LEAQ (DI)(R13*4), R13;   \
	MOVQ o6(BX), SI;       \
	LEAQ (DI)(SI*4), SI;   \
	MOVQ o7(BX), AX;       \
	LEAQ (DI)(AX*4), AX

// func transpose16GatherAVX(dst, src *float32, offs *[16]int, blocks int)
//
// dst[t*16+l] = src[offs[l]+t] for l < 16 and t < 8*blocks: the 16 rows at
// src+offs[l] become the 16 lanes of dst. blocks >= 1.
TEXT ·transpose16GatherAVX(SB), NOSPLIT, $0-32
	MOVQ src+8(FP), DI

	// Lanes 0-7.
	ROWS8(0, 8, 16, 24, 32, 40, 48, 56)
	MOVQ dst+0(FP), DX
	MOVQ blocks+24(FP), CX
	XORQ BX, BX

tloop0:
	LOAD8X
	TRANSPOSE8
	STORE8X
	ADDQ $32, BX
	ADDQ $512, DX
	DECQ CX
	JNZ  tloop0

	// Lanes 8-15.
	ROWS8(64, 72, 80, 88, 96, 104, 112, 120)
	MOVQ dst+0(FP), DX
	ADDQ $32, DX
	MOVQ blocks+24(FP), CX
	XORQ BX, BX

tloop1:
	LOAD8X
	TRANSPOSE8
	STORE8X
	ADDQ $32, BX
	ADDQ $512, DX
	DECQ CX
	JNZ  tloop1
	VZEROUPPER
	RET
