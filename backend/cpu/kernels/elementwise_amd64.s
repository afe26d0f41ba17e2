//go:build amd64 && !noasm

#include "textflag.h"
#include "chains_amd64.h"

// func reluAVX2(y, x *float32, n int)
//
// y = x where !(x <= 0) (positive or NaN), else +0: VCMPPS predicate 6
// (NLE_US) is true for x > 0 and for NaN, false for -0, +0 and negatives.
TEXT ·reluAVX2(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	VXORPS Y1, Y1, Y1

loop:
	VMOVUPS (SI), Y0
	VCMPPS  $6, Y1, Y0, Y2
	VANDPS  Y0, Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// func reluBackwardAVX2(dx, dy, y *float32, n int)
//
// dx = dy where y > 0 (predicate 30, GT_OQ: false for NaN), else +0.
TEXT ·reluBackwardAVX2(SB), NOSPLIT, $0-32
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), DX
	MOVQ y+16(FP), SI
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	VXORPS Y1, Y1, Y1

loop:
	VMOVUPS (SI), Y0
	VCMPPS  $30, Y1, Y0, Y2
	VANDPS  (DX), Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// func affineAVX2(y, x *float32, n int, scale, shift float32)
//
// y = x*scale + shift: a multiply, then an add (not fused, as Go rounds).
TEXT ·affineAVX2(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS scale+24(FP), Y3
	VBROADCASTSS shift+28(FP), Y4
	SHRQ         $3, CX

loop:
	VMULPS  (SI), Y3, Y0
	VADDPS  Y4, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// func normGradAVX2(dx, dy, x *float32, n int, mu, a, b, c float32)
//
// dx = ((a*dy) + (b*(x-mu))) + c, each operation rounded, as Go evaluates it.
TEXT ·normGradAVX2(SB), NOSPLIT, $0-48
	MOVQ         dx+0(FP), DI
	MOVQ         dy+8(FP), DX
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	VBROADCASTSS mu+32(FP), Y4
	VBROADCASTSS a+36(FP), Y5
	VBROADCASTSS b+40(FP), Y6
	VBROADCASTSS c+44(FP), Y7
	SHRQ         $3, CX

loop:
	VMOVUPS (SI), Y0
	VSUBPS  Y4, Y0, Y0
	VMULPS  Y6, Y0, Y0
	VMULPS  (DX), Y5, Y1
	VADDPS  Y0, Y1, Y1
	VADDPS  Y7, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// func shiftedSumsAVX2(xs *float32, n int, k float64, s, q *[16]float64)
//
// Chain c of s and q (lane c%4 of accumulator c/4) gains d = x-k and d*d
// (a multiply, then an add) for every element i with i%16 == c.
TEXT ·shiftedSumsAVX2(SB), NOSPLIT, $0-40
	MOVQ         xs+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSD k+16(FP), Y15
	MOVQ         s+24(FP), DI
	MOVQ         q+32(FP), DX
	loadChains
	SHRQ         $4, CX

loop:
	VCVTPS2PD 0(SI), Y8
	VSUBPD    Y15, Y8, Y8
	VADDPD    Y8, Y0, Y0
	VMULPD    Y8, Y8, Y8
	VADDPD    Y8, Y4, Y4
	VCVTPS2PD 16(SI), Y9
	VSUBPD    Y15, Y9, Y9
	VADDPD    Y9, Y1, Y1
	VMULPD    Y9, Y9, Y9
	VADDPD    Y9, Y5, Y5
	VCVTPS2PD 32(SI), Y10
	VSUBPD    Y15, Y10, Y10
	VADDPD    Y10, Y2, Y2
	VMULPD    Y10, Y10, Y10
	VADDPD    Y10, Y6, Y6
	VCVTPS2PD 48(SI), Y11
	VSUBPD    Y15, Y11, Y11
	VADDPD    Y11, Y3, Y3
	VMULPD    Y11, Y11, Y11
	VADDPD    Y11, Y7, Y7
	ADDQ      $64, SI
	DECQ      CX
	JNZ       loop
	storeChains
	VZEROUPPER
	RET

// func gradSumsAVX2(dy, x *float32, n int, mu float64, a, b *[16]float64)
//
// Chain c of a and b gains dy and dy*(x-mu) for every element i with
// i%16 == c, as gradSumsGo.
TEXT ·gradSumsAVX2(SB), NOSPLIT, $0-48
	MOVQ         dy+0(FP), BX
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD mu+24(FP), Y15
	MOVQ         a+32(FP), DI
	MOVQ         b+40(FP), DX
	loadChains
	SHRQ         $4, CX

loop:
	VCVTPS2PD 0(SI), Y8
	VSUBPD    Y15, Y8, Y8
	VCVTPS2PD 0(BX), Y12
	VADDPD    Y12, Y0, Y0
	VMULPD    Y8, Y12, Y12
	VADDPD    Y12, Y4, Y4
	VCVTPS2PD 16(SI), Y9
	VSUBPD    Y15, Y9, Y9
	VCVTPS2PD 16(BX), Y12
	VADDPD    Y12, Y1, Y1
	VMULPD    Y9, Y12, Y12
	VADDPD    Y12, Y5, Y5
	VCVTPS2PD 32(SI), Y10
	VSUBPD    Y15, Y10, Y10
	VCVTPS2PD 32(BX), Y12
	VADDPD    Y12, Y2, Y2
	VMULPD    Y10, Y12, Y12
	VADDPD    Y12, Y6, Y6
	VCVTPS2PD 48(SI), Y11
	VSUBPD    Y15, Y11, Y11
	VCVTPS2PD 48(BX), Y12
	VADDPD    Y12, Y3, Y3
	VMULPD    Y11, Y12, Y12
	VADDPD    Y12, Y7, Y7
	ADDQ      $64, SI
	ADDQ      $64, BX
	DECQ      CX
	JNZ       loop
	storeChains
	VZEROUPPER
	RET

// func relu16AVX2(y, x *uint16, n int, inf uint16)
//
// y = x where x is non-negative (sign bit clear) or NaN (x & 0x7fff > inf,
// a signed 16-bit compare, both sides below 0x8000), else 0.
TEXT ·relu16AVX2(SB), NOSPLIT, $0-26
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVWLZX      inf+24(FP), AX
	VMOVD        AX, X3
	VPBROADCASTW X3, Y3            // inf
	MOVL         $0x7fff, AX
	VMOVD        AX, X4
	VPBROADCASTW X4, Y4            // magnitude mask
	SHRQ         $4, CX

loop:
	VMOVDQU  (SI), Y0
	VPSRAW   $15, Y0, Y1           // all ones where negative
	VPAND    Y4, Y0, Y2
	VPCMPGTW Y3, Y2, Y2            // all ones where NaN
	VPANDN   Y0, Y1, Y1            // x where non-negative
	VPAND    Y0, Y2, Y2            // x where NaN
	VPOR     Y2, Y1, Y1
	VMOVDQU  Y1, (DI)
	ADDQ     $32, SI
	ADDQ     $32, DI
	DECQ     CX
	JNZ      loop
	VZEROUPPER
	RET

// func reluBack16AVX2(dx, dy, y *uint16, n int, inf uint16)
//
// dx = dy where 0 < y <= inf as signed 16-bit values (a set sign bit makes
// y negative), else 0.
TEXT ·reluBack16AVX2(SB), NOSPLIT, $0-34
	MOVQ         dx+0(FP), DI
	MOVQ         dy+8(FP), DX
	MOVQ         y+16(FP), SI
	MOVQ         n+24(FP), CX
	MOVWLZX      inf+32(FP), AX
	VMOVD        AX, X3
	VPBROADCASTW X3, Y3            // inf
	VPXOR        Y4, Y4, Y4        // 0
	SHRQ         $4, CX

loop:
	VMOVDQU  (SI), Y0
	VPCMPGTW Y4, Y0, Y1            // y > 0
	VPCMPGTW Y3, Y0, Y2            // y > inf
	VPANDN   Y1, Y2, Y1            // y > 0 and not y > inf
	VPAND    (DX), Y1, Y1
	VMOVDQU  Y1, (DI)
	ADDQ     $32, SI
	ADDQ     $32, DX
	ADDQ     $32, DI
	DECQ     CX
	JNZ      loop
	VZEROUPPER
	RET

// func adamAVX2(w, grad, m, v *float32, n int, a *backend.AdamStep, wd int)
//
// Per value, as adamGo: g += WeightDecay*w (only if wd != 0); m = Beta1*m +
// OneMinusBeta1*g; v = Beta2*v + (OneMinusBeta2*g)*g; w -= (StepSize*m) /
// (sqrt(v)/SqrtBC2 + Eps); each operation rounded (no FMA), the square root
// correctly rounded (VSQRTPS), n a positive multiple of 8.
TEXT ·adamAVX2(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         m+16(FP), DX
	MOVQ         v+24(FP), BX
	MOVQ         n+32(FP), CX
	MOVQ         a+40(FP), AX
	MOVQ         wd+48(FP), R8
	VBROADCASTSS 0(AX), Y8         // StepSize
	VBROADCASTSS 4(AX), Y9         // SqrtBC2
	VBROADCASTSS 8(AX), Y10        // Beta1
	VBROADCASTSS 12(AX), Y11       // Beta2
	VBROADCASTSS 16(AX), Y12       // OneMinusBeta1
	VBROADCASTSS 20(AX), Y13       // OneMinusBeta2
	VBROADCASTSS 24(AX), Y14       // Eps
	VBROADCASTSS 28(AX), Y15       // WeightDecay
	SHRQ         $3, CX

loop:
	VMOVUPS (SI), Y0               // g
	VMOVUPS (DI), Y7               // w
	TESTQ   R8, R8
	JZ      nodecay
	VMULPS  Y7, Y15, Y1
	VADDPS  Y1, Y0, Y0             // g + WeightDecay*w

nodecay:
	VMULPS  (DX), Y10, Y1          // Beta1*m
	VMULPS  Y0, Y12, Y2            // OneMinusBeta1*g
	VADDPS  Y2, Y1, Y1             // m
	VMOVUPS Y1, (DX)
	VMULPS  (BX), Y11, Y3          // Beta2*v
	VMULPS  Y0, Y13, Y4            // OneMinusBeta2*g
	VMULPS  Y0, Y4, Y4             // (OneMinusBeta2*g)*g
	VADDPS  Y4, Y3, Y3             // v
	VMOVUPS Y3, (BX)
	VSQRTPS Y3, Y3
	VDIVPS  Y9, Y3, Y3             // sqrt(v)/SqrtBC2
	VADDPS  Y14, Y3, Y3            // + Eps
	VMULPS  Y1, Y8, Y1             // StepSize*m
	VDIVPS  Y3, Y1, Y1             // / denom
	VSUBPS  Y1, Y7, Y7             // w - that
	VMOVUPS Y7, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, BX
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// quarters sets Y12 to 0.75 and Y13 to 0.25 in every lane.
#define quarters \
	MOVL $0x3f400000, AX; VMOVD AX, X12; VBROADCASTSS X12, Y12; \
	MOVL $0x3e800000, AX; VMOVD AX, X13; VBROADCASTSS X13, Y13

// func upsampleRowAVX2(dst, r0, r1 *float32, blocks int, a, b float32)
//
// For j = 8q .. 8q+7, q < blocks: cur = a*r0[j] + b*r1[j] and next the same
// at j+1; dst[2j] = 0.75*cur + 0.25*next, dst[2j+1] = 0.25*cur + 0.75*next
// (dst points at output 1), each operation rounded, as upsampleRowGo.
TEXT ·upsampleRowAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         r0+8(FP), SI
	MOVQ         r1+16(FP), DX
	MOVQ         blocks+24(FP), CX
	VBROADCASTSS a+32(FP), Y14
	VBROADCASTSS b+36(FP), Y15
	quarters

loop:
	VMULPS      (SI), Y14, Y0
	VMULPS      (DX), Y15, Y1
	VADDPS      Y1, Y0, Y0         // cur
	VMULPS      4(SI), Y14, Y1
	VMULPS      4(DX), Y15, Y2
	VADDPS      Y2, Y1, Y1         // next
	VMULPS      Y0, Y12, Y2
	VMULPS      Y1, Y13, Y3
	VADDPS      Y3, Y2, Y2         // 0.75*cur + 0.25*next
	VMULPS      Y0, Y13, Y3
	VMULPS      Y1, Y12, Y4
	VADDPS      Y4, Y3, Y3         // 0.25*cur + 0.75*next
	VUNPCKLPS   Y3, Y2, Y4
	VUNPCKHPS   Y3, Y2, Y5
	VPERM2F128  $0x20, Y5, Y4, Y6
	VPERM2F128  $0x31, Y5, Y4, Y7
	VMOVUPS     Y6, (DI)
	VMOVUPS     Y7, 32(DI)
	ADDQ        $32, SI
	ADDQ        $32, DX
	ADDQ        $64, DI
	DECQ        CX
	JNZ         loop
	VZEROUPPER
	RET

// rowT sets Y(lo), Y(hi) to t[k] = 0.25*(gu[k]+gd[k]) + 0.75*(ge[k]+gO[k])
// for the 16 columns at byte offset off from the row pointers.
#define rowT(off, lo, hi) \
	VMOVUPS off(SI), lo; \
	VADDPS  off(R10), lo, lo; \
	VMOVUPS off(DX), Y10; \
	VADDPS  off(R9), Y10, Y10; \
	VMULPS  Y13, lo, lo; \
	VMULPS  Y12, Y10, Y10; \
	VADDPS  Y10, lo, lo; \
	VMOVUPS 32+off(SI), hi; \
	VADDPS  32+off(R10), hi, hi; \
	VMOVUPS 32+off(DX), Y10; \
	VADDPS  32+off(R9), Y10, Y10; \
	VMULPS  Y13, hi, hi; \
	VMULPS  Y12, Y10, Y10; \
	VADDPS  Y10, hi, hi

// func upsampleAdjointAVX2(dst, gu, ge, gO, gd *float32, blocks int)
//
// For the 8 outputs of each block (dst advancing 8, the rows 16 columns,
// both pointers at the block's first output j and column 2j-1):
// dst[j] = 0.25*(t[2j-1] + t[2j+2]) + 0.75*(t[2j] + t[2j+1]), as
// upsampleRowAdjointGo: t over 16 columns from 2j-1 gives t[2j-1] (even
// lanes) and t[2j] (odd), from 2j+1 t[2j+1] and t[2j+2].
TEXT ·upsampleAdjointAVX2(SB), NOSPLIT, $0-48
	MOVQ         dst+0(FP), DI
	MOVQ         gu+8(FP), SI
	MOVQ         ge+16(FP), DX
	MOVQ         gO+24(FP), R9
	MOVQ         gd+32(FP), R10
	MOVQ         blocks+40(FP), CX
	quarters

loop:
	rowT(0, Y0, Y1)                // t from 2j-1
	rowT(8, Y2, Y3)                // t from 2j+1
	VSHUFPS $0x88, Y1, Y0, Y4
	VPERMPD $0xD8, Y4, Y4          // t[2j-1]
	VSHUFPS $0xDD, Y1, Y0, Y5
	VPERMPD $0xD8, Y5, Y5          // t[2j]
	VSHUFPS $0x88, Y3, Y2, Y6
	VPERMPD $0xD8, Y6, Y6          // t[2j+1]
	VSHUFPS $0xDD, Y3, Y2, Y7
	VPERMPD $0xD8, Y7, Y7          // t[2j+2]
	VADDPS  Y7, Y4, Y4
	VMULPS  Y13, Y4, Y4            // 0.25*(t[2j-1] + t[2j+2])
	VADDPS  Y6, Y5, Y5
	VMULPS  Y12, Y5, Y5            // 0.75*(t[2j] + t[2j+1])
	VADDPS  Y5, Y4, Y4
	VMOVUPS Y4, (DI)
	ADDQ    $32, DI
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, R9
	ADDQ    $64, R10
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// deinterleave sets even to the even-indexed and odd to the odd-indexed
// values of the 16 floats in lo, hi (in order).
#define deinterleave(lo, hi, even, odd) \
	VSHUFPS $0x88, hi, lo, even; \
	VPERMPD $0xD8, even, even; \
	VSHUFPS $0xDD, hi, lo, odd; \
	VPERMPD $0xD8, odd, odd

// challenge lets v (position k in Yk) take the window from best (Y8, its
// position in Y9) where v > best or v is NaN, as maxPool2RowGo.
#define challenge(v, k) \
	VCMPPS    $30, Y8, v, Y10; \
	VCMPPS    $3, v, v, Y11; \
	VORPS     Y11, Y10, Y10; \
	VBLENDVPS Y10, v, Y8, Y8; \
	VBLENDVPS Y10, k, Y9, Y9

// positions sets Y13, Y14 and Y15 to the window positions 1, 2 and 3 in
// every int32 lane.
#define positions \
	MOVL $1, AX; VMOVD AX, X13; VPBROADCASTD X13, Y13; \
	MOVL $2, AX; VMOVD AX, X14; VPBROADCASTD X14, Y14; \
	MOVL $3, AX; VMOVD AX, X15; VPBROADCASTD X15, Y15

// func maxPool2RowAVX2(y *float32, idx *uint8, r0, r1 *float32, blocks int)
//
// Eight windows a block: y = the maximum, idx (unless nil) its position.
TEXT ·maxPool2RowAVX2(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ idx+8(FP), BX
	MOVQ r0+16(FP), SI
	MOVQ r1+24(FP), DX
	MOVQ blocks+32(FP), CX
	positions

loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	deinterleave(Y0, Y1, Y8, Y2)  // best = r0 even, Y2 = r0 odd
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	deinterleave(Y0, Y1, Y3, Y4)  // r1 even, odd
	VPXOR   Y9, Y9, Y9            // position 0
	challenge(Y2, Y13)
	challenge(Y3, Y14)
	challenge(Y4, Y15)
	VMOVUPS Y8, (DI)
	TESTQ   BX, BX
	JZ      next
	VEXTRACTI128 $1, Y9, X10
	VPACKUSDW    X10, X9, X9      // 8 words
	VPACKUSWB    X9, X9, X9       // 8 bytes
	VMOVQ        X9, (BX)
	ADDQ         $8, BX

next:
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET

// func maxPool2BackRowAVX2(r0, r1, grad *float32, idx *uint8, blocks int)
//
// Eight windows a block: g's bits at the window's position, +0 elsewhere.
TEXT ·maxPool2BackRowAVX2(SB), NOSPLIT, $0-40
	MOVQ r0+0(FP), DI
	MOVQ r1+8(FP), DX
	MOVQ grad+16(FP), SI
	MOVQ idx+24(FP), BX
	MOVQ blocks+32(FP), CX
	VPXOR Y12, Y12, Y12           // position 0
	positions

loop:
	VPMOVZXBD (BX), Y0            // positions
	VMOVUPS   (SI), Y1            // gradients
	VPCMPEQD  Y12, Y0, Y2
	VANDPS    Y1, Y2, Y2          // to position 0
	VPCMPEQD  Y13, Y0, Y3
	VANDPS    Y1, Y3, Y3          // 1
	VPCMPEQD  Y14, Y0, Y4
	VANDPS    Y1, Y4, Y4          // 2
	VPCMPEQD  Y15, Y0, Y5
	VANDPS    Y1, Y5, Y5          // 3
	VUNPCKLPS Y3, Y2, Y6
	VUNPCKHPS Y3, Y2, Y7
	VPERM2F128 $0x20, Y7, Y6, Y8
	VPERM2F128 $0x31, Y7, Y6, Y9
	VMOVUPS   Y8, (DI)
	VMOVUPS   Y9, 32(DI)
	VUNPCKLPS Y5, Y4, Y6
	VUNPCKHPS Y5, Y4, Y7
	VPERM2F128 $0x20, Y7, Y6, Y8
	VPERM2F128 $0x31, Y7, Y6, Y9
	VMOVUPS   Y8, (DX)
	VMOVUPS   Y9, 32(DX)
	ADDQ $8, BX
	ADDQ $32, SI
	ADDQ $64, DI
	ADDQ $64, DX
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET


// func addAVX2(z, x, y *float32, n int)
//
// z = x + y, 8 values a step (n a multiple of 8); z may be x or y.
TEXT ·addAVX2(SB), NOSPLIT, $0-32
	MOVQ z+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX

loop:
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// Lane i's bit, 1<<i, for expanding a mask byte over 8 dwords or a mask
// word over 16 words.
DATA laneBits32<>+0(SB)/4, $1
DATA laneBits32<>+4(SB)/4, $2
DATA laneBits32<>+8(SB)/4, $4
DATA laneBits32<>+12(SB)/4, $8
DATA laneBits32<>+16(SB)/4, $16
DATA laneBits32<>+20(SB)/4, $32
DATA laneBits32<>+24(SB)/4, $64
DATA laneBits32<>+28(SB)/4, $128
GLOBL laneBits32<>(SB), RODATA|NOPTR, $32

DATA laneBits16<>+0(SB)/2, $0x0001
DATA laneBits16<>+2(SB)/2, $0x0002
DATA laneBits16<>+4(SB)/2, $0x0004
DATA laneBits16<>+6(SB)/2, $0x0008
DATA laneBits16<>+8(SB)/2, $0x0010
DATA laneBits16<>+10(SB)/2, $0x0020
DATA laneBits16<>+12(SB)/2, $0x0040
DATA laneBits16<>+14(SB)/2, $0x0080
DATA laneBits16<>+16(SB)/2, $0x0100
DATA laneBits16<>+18(SB)/2, $0x0200
DATA laneBits16<>+20(SB)/2, $0x0400
DATA laneBits16<>+22(SB)/2, $0x0800
DATA laneBits16<>+24(SB)/2, $0x1000
DATA laneBits16<>+26(SB)/2, $0x2000
DATA laneBits16<>+28(SB)/2, $0x4000
DATA laneBits16<>+30(SB)/2, $0x8000
GLOBL laneBits16<>(SB), RODATA|NOPTR, $32

// func reluMaskAVX2(mask *uint8, y *float32, n int)
//
// A byte of mask per 8 values: bit k set where y > 0 (predicate 30, GT_OQ,
// reluBackwardAVX2's test), n a positive multiple of 8.
TEXT ·reluMaskAVX2(SB), NOSPLIT, $0-24
	MOVQ   mask+0(FP), DI
	MOVQ   y+8(FP), SI
	MOVQ   n+16(FP), CX
	SHRQ   $3, CX
	VXORPS Y1, Y1, Y1

loop:
	VMOVUPS   (SI), Y0
	VCMPPS    $30, Y1, Y0, Y0
	VMOVMSKPS Y0, AX
	MOVB      AX, (DI)
	ADDQ      $32, SI
	INCQ      DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// func reluBackMaskAVX2(dx, dy *float32, mask *uint8, n int)
//
// dx = dy where the value's bit of mask is set, else +0: the byte is
// broadcast to 8 dwords and compared with each lane's bit.
TEXT ·reluBackMaskAVX2(SB), NOSPLIT, $0-32
	MOVQ    dx+0(FP), DI
	MOVQ    dy+8(FP), DX
	MOVQ    mask+16(FP), SI
	MOVQ    n+24(FP), CX
	SHRQ    $3, CX
	VMOVDQU laneBits32<>(SB), Y3

loop:
	MOVBLZX      (SI), AX
	VMOVD        AX, X0
	VPBROADCASTD X0, Y0
	VPAND        Y3, Y0, Y0
	VPCMPEQD     Y3, Y0, Y0        // all ones where the lane's bit is set
	VPAND        (DX), Y0, Y0
	VMOVDQU      Y0, (DI)
	INCQ         SI
	ADDQ         $32, DX
	ADDQ         $32, DI
	DECQ         CX
	JNZ          loop
	VZEROUPPER
	RET

// func reluMask16AVX2(mask *uint8, y *uint16, n int, inf uint16)
//
// Two bytes of mask per 16 values: bit set where 0 < y <= inf as signed
// 16-bit values (reluBack16AVX2's test), n a positive multiple of 16. The
// word masks are packed to bytes in order (the upper 128 bits second).
TEXT ·reluMask16AVX2(SB), NOSPLIT, $0-26
	MOVQ         mask+0(FP), DI
	MOVQ         y+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVWLZX      inf+24(FP), AX
	VMOVD        AX, X3
	VPBROADCASTW X3, Y3            // inf
	VPXOR        Y4, Y4, Y4        // 0
	SHRQ         $4, CX

loop:
	VMOVDQU      (SI), Y0
	VPCMPGTW     Y4, Y0, Y1        // y > 0
	VPCMPGTW     Y3, Y0, Y2        // y > inf
	VPANDN       Y1, Y2, Y1        // y > 0 and not y > inf
	VEXTRACTI128 $1, Y1, X2
	VPACKSSWB    X2, X1, X1        // words 0-7 then 8-15, as bytes
	VPMOVMSKB    X1, AX
	MOVW         AX, (DI)
	ADDQ         $32, SI
	ADDQ         $2, DI
	DECQ         CX
	JNZ          loop
	VZEROUPPER
	RET

// func reluBackMask16AVX2(dx, dy *uint16, mask *uint8, n int)
//
// dx = dy where the value's bit of mask is set, else 0: two bytes are
// broadcast to 16 words and compared with each lane's bit.
TEXT ·reluBackMask16AVX2(SB), NOSPLIT, $0-32
	MOVQ    dx+0(FP), DI
	MOVQ    dy+8(FP), DX
	MOVQ    mask+16(FP), SI
	MOVQ    n+24(FP), CX
	SHRQ    $4, CX
	VMOVDQU laneBits16<>(SB), Y3

loop:
	MOVWLZX      (SI), AX
	VMOVD        AX, X0
	VPBROADCASTW X0, Y0
	VPAND        Y3, Y0, Y0
	VPCMPEQW     Y3, Y0, Y0        // all ones where the lane's bit is set
	VPAND        (DX), Y0, Y0
	VMOVDQU      Y0, (DI)
	ADDQ         $2, SI
	ADDQ         $32, DX
	ADDQ         $32, DI
	DECQ         CX
	JNZ          loop
	VZEROUPPER
	RET

// func affineReLUMaskAVX2(y, x *float32, mask *uint8, n int, scale, shift float32, withMask int)
//
// affineAVX2's y = x*scale + shift (a multiply, then an add), reluAVX2's
// y where !(y <= 0) else +0, and where withMask is 1 reluMaskAVX2's byte of
// the 8 values' y > 0 (predicate 30, GT_OQ), one pass.
TEXT ·affineReLUMaskAVX2(SB), NOSPLIT, $0-48
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         mask+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS scale+32(FP), Y3
	VBROADCASTSS shift+36(FP), Y4
	MOVQ         withMask+40(FP), BX
	SHRQ         $3, CX
	VXORPS       Y1, Y1, Y1

loop:
	VMULPS    (SI), Y3, Y0
	VADDPS    Y4, Y0, Y0
	VCMPPS    $6, Y1, Y0, Y2
	VANDPS    Y0, Y2, Y2
	VMOVUPS   Y2, (DI)
	TESTQ     BX, BX
	JZ        next
	VCMPPS    $30, Y1, Y2, Y5
	VMOVMSKPS Y5, AX
	MOVB      AX, (DX)
	INCQ      DX

next:
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET

// func reluBackMaskGradSumsAVX2(dx, dy, x *float32, mask *uint8, n int, mu float64, a, b *[16]float64)
//
// reluBackMaskAVX2's dx for 16 values (two mask bytes), then gradSumsAVX2's
// chains over them (read back from dx) and x, one pass.
TEXT ·reluBackMaskGradSumsAVX2(SB), NOSPLIT, $0-64
	MOVQ         dx+0(FP), R8
	MOVQ         dy+8(FP), R10
	MOVQ         x+16(FP), SI
	MOVQ         mask+24(FP), R9
	MOVQ         n+32(FP), CX
	VBROADCASTSD mu+40(FP), Y15
	MOVQ         a+48(FP), DI
	MOVQ         b+56(FP), DX
	loadChains
	SHRQ         $4, CX

loop:
	MOVBLZX      (R9), AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	VPAND        laneBits32<>(SB), Y13, Y13
	VPCMPEQD     laneBits32<>(SB), Y13, Y13
	VPAND        (R10), Y13, Y13
	VMOVDQU      Y13, (R8)
	MOVBLZX      1(R9), AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	VPAND        laneBits32<>(SB), Y14, Y14
	VPCMPEQD     laneBits32<>(SB), Y14, Y14
	VPAND        32(R10), Y14, Y14
	VMOVDQU      Y14, 32(R8)
	VCVTPS2PD    0(SI), Y8
	VSUBPD       Y15, Y8, Y8
	VCVTPS2PD    0(R8), Y12
	VADDPD       Y12, Y0, Y0
	VMULPD       Y8, Y12, Y12
	VADDPD       Y12, Y4, Y4
	VCVTPS2PD    16(SI), Y9
	VSUBPD       Y15, Y9, Y9
	VCVTPS2PD    16(R8), Y12
	VADDPD       Y12, Y1, Y1
	VMULPD       Y9, Y12, Y12
	VADDPD       Y12, Y5, Y5
	VCVTPS2PD    32(SI), Y10
	VSUBPD       Y15, Y10, Y10
	VCVTPS2PD    32(R8), Y12
	VADDPD       Y12, Y2, Y2
	VMULPD       Y10, Y12, Y12
	VADDPD       Y12, Y6, Y6
	VCVTPS2PD    48(SI), Y11
	VSUBPD       Y15, Y11, Y11
	VCVTPS2PD    48(R8), Y12
	VADDPD       Y12, Y3, Y3
	VMULPD       Y11, Y12, Y12
	VADDPD       Y12, Y7, Y7
	ADDQ         $64, SI
	ADDQ         $64, R8
	ADDQ         $64, R10
	ADDQ         $2, R9
	DECQ         CX
	JNZ          loop
	storeChains
	VZEROUPPER
	RET
