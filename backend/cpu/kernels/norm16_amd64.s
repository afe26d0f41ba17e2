//go:build amd64 && !noasm

#include "textflag.h"
#include "chains_amd64.h"

// The norms' passes on 16-bit tensors: the float32 passes above with each
// value widened in a register as it is loaded and a result narrowed as it
// is stored, so they give the bits of widening, the float32 pass and
// narrowing, without the float32 copy. WIDEN(m, Y) loads 8 values at m as
// float32; NARROW(Y, X, m) stores Y's 8 floats (X is Y's low half) at m,
// rounding to nearest even. The bf16 ones leave a NaN signaling where
// BF16ToF32 quiets it: every use here is arithmetic, which quiets it the
// same way. NARROW_BF16 takes Y7-Y9 as temporaries and the constants
// bf16Consts puts in Y10-Y14.
#define WIDEN_F16(m, Yr) VCVTPH2PS m, Yr
#define WIDEN_BF16(m, Yr) VPMOVZXWD m, Yr; VPSLLD $16, Yr, Yr
#define NARROW_F16(Yr, Xr, m) VCVTPS2PH $0, Yr, Xr; VMOVDQU Xr, m

#define BCAST(imm, Xr, Yr) \
	MOVQ         $imm, AX; \
	MOVQ         AX, Xr;   \
	VPBROADCASTD Xr, Yr

#define bf16Consts \
	BCAST(1, X10, Y10); \
	BCAST(0x7fff, X11, Y11); \
	BCAST(0x7fffffff, X12, Y12); \
	BCAST(0x7f800000, X13, Y13); \
	BCAST(0x40, X14, Y14)

// As F32ToBF16: h = (x + 0x7fff + (x>>16)&1) >> 16, and x>>16 | 0x40 for a
// NaN (|x| > 0x7f800000).
#define NARROW_BF16(Yr, Xr, m) \
	VPSRLD     $16, Yr, Y9; \
	VPAND      Y10, Y9, Y8; \
	VPADDD     Yr, Y8, Y8; \
	VPADDD     Y11, Y8, Y8; \
	VPSRLD     $16, Y8, Y8; \
	VPAND      Y12, Yr, Y7; \
	VPCMPGTD   Y13, Y7, Y7; \
	VPOR       Y14, Y9, Y9; \
	VPBLENDVB  Y7, Y9, Y8, Y8; \
	VEXTRACTI128 $1, Y8, X9; \
	VPACKUSDW  X9, X8, X8; \
	VMOVDQU    X8, m

#define noConsts

// y = x*scale + shift, 8 values a step (n a multiple of 8).
#define AFFINE16(WIDEN, NARROW, CONSTS) \
	MOVQ         y+0(FP), DI; \
	MOVQ         x+8(FP), SI; \
	MOVQ         n+16(FP), CX; \
	VBROADCASTSS scale+24(FP), Y3; \
	VBROADCASTSS shift+28(FP), Y4; \
	CONSTS; \
	SHRQ         $3, CX; \
loop: \
	WIDEN(0(SI), Y0); \
	VMULPS       Y3, Y0, Y0; \
	VADDPS       Y4, Y0, Y0; \
	NARROW(Y0, X0, 0(DI)); \
	ADDQ         $16, SI; \
	ADDQ         $16, DI; \
	DECQ         CX; \
	JNZ          loop; \
	VZEROUPPER; \
	RET

// dx = ((a*dy) + (b*(x-mu))) + c, 8 values a step (n a multiple of 8).
#define NORMGRAD16(WIDEN, NARROW, CONSTS) \
	MOVQ         dx+0(FP), DI; \
	MOVQ         dy+8(FP), DX; \
	MOVQ         x+16(FP), SI; \
	MOVQ         n+24(FP), CX; \
	VBROADCASTSS mu+32(FP), Y2; \
	VBROADCASTSS a+36(FP), Y3; \
	VBROADCASTSS b+40(FP), Y4; \
	VBROADCASTSS c+44(FP), Y5; \
	CONSTS; \
	SHRQ         $3, CX; \
loop: \
	WIDEN(0(SI), Y0); \
	VSUBPS       Y2, Y0, Y0; \
	VMULPS       Y4, Y0, Y0; \
	WIDEN(0(DX), Y1); \
	VMULPS       Y1, Y3, Y1; \
	VADDPS       Y0, Y1, Y1; \
	VADDPS       Y5, Y1, Y1; \
	NARROW(Y1, X1, 0(DI)); \
	ADDQ         $16, SI; \
	ADDQ         $16, DX; \
	ADDQ         $16, DI; \
	DECQ         CX; \
	JNZ          loop; \
	VZEROUPPER; \
	RET

// Chains as shiftedSumsAVX2, 16 values a step (n a multiple of 16).
#define SHIFTEDSUMS16(WIDEN) \
	MOVQ         xs+0(FP), SI; \
	MOVQ         n+8(FP), CX; \
	VBROADCASTSD k+16(FP), Y15; \
	MOVQ         s+24(FP), DI; \
	MOVQ         q+32(FP), DX; \
	loadChains; \
	SHRQ         $4, CX; \
loop: \
	WIDEN(0(SI), Y12); \
	WIDEN(16(SI), Y13); \
	VCVTPS2PD    X12, Y8; \
	VEXTRACTF128 $1, Y12, X12; \
	VCVTPS2PD    X12, Y9; \
	VCVTPS2PD    X13, Y10; \
	VEXTRACTF128 $1, Y13, X13; \
	VCVTPS2PD    X13, Y11; \
	VSUBPD       Y15, Y8, Y8; \
	VADDPD       Y8, Y0, Y0; \
	VMULPD       Y8, Y8, Y8; \
	VADDPD       Y8, Y4, Y4; \
	VSUBPD       Y15, Y9, Y9; \
	VADDPD       Y9, Y1, Y1; \
	VMULPD       Y9, Y9, Y9; \
	VADDPD       Y9, Y5, Y5; \
	VSUBPD       Y15, Y10, Y10; \
	VADDPD       Y10, Y2, Y2; \
	VMULPD       Y10, Y10, Y10; \
	VADDPD       Y10, Y6, Y6; \
	VSUBPD       Y15, Y11, Y11; \
	VADDPD       Y11, Y3, Y3; \
	VMULPD       Y11, Y11, Y11; \
	VADDPD       Y11, Y7, Y7; \
	ADDQ         $32, SI; \
	DECQ         CX; \
	JNZ          loop; \
	storeChains; \
	VZEROUPPER; \
	RET

// One group of 4: x's doubles in Yx (then less mu), dy's from Xg.
#define gradGroup(Xg, Yx, Ya, Yb) \
	VSUBPD    Y15, Yx, Yx; \
	VCVTPS2PD Xg, Y12; \
	VADDPD    Y12, Ya, Ya; \
	VMULPD    Yx, Y12, Y12; \
	VADDPD    Y12, Yb, Yb

// Chains as gradSumsAVX2, 16 values a step (n a multiple of 16).
#define GRADSUMS16(WIDEN) \
	MOVQ         dy+0(FP), BX; \
	MOVQ         x+8(FP), SI; \
	MOVQ         n+16(FP), CX; \
	VBROADCASTSD mu+24(FP), Y15; \
	MOVQ         a+32(FP), DI; \
	MOVQ         b+40(FP), DX; \
	loadChains; \
	SHRQ         $4, CX; \
loop: \
	WIDEN(0(SI), Y13); \
	WIDEN(0(BX), Y14); \
	VCVTPS2PD    X13, Y8; \
	VEXTRACTF128 $1, Y13, X13; \
	VCVTPS2PD    X13, Y9; \
	gradGroup(X14, Y8, Y0, Y4); \
	VEXTRACTF128 $1, Y14, X14; \
	gradGroup(X14, Y9, Y1, Y5); \
	WIDEN(16(SI), Y13); \
	WIDEN(16(BX), Y14); \
	VCVTPS2PD    X13, Y10; \
	VEXTRACTF128 $1, Y13, X13; \
	VCVTPS2PD    X13, Y11; \
	gradGroup(X14, Y10, Y2, Y6); \
	VEXTRACTF128 $1, Y14, X14; \
	gradGroup(X14, Y11, Y3, Y7); \
	ADDQ         $32, SI; \
	ADDQ         $32, BX; \
	DECQ         CX; \
	JNZ          loop; \
	storeChains; \
	VZEROUPPER; \
	RET

// func affineF16(y, x *uint16, n int, scale, shift float32)
TEXT ·affineF16(SB), NOSPLIT, $0-32
	AFFINE16(WIDEN_F16, NARROW_F16, noConsts)

// func affineBF16(y, x *uint16, n int, scale, shift float32)
TEXT ·affineBF16(SB), NOSPLIT, $0-32
	AFFINE16(WIDEN_BF16, NARROW_BF16, bf16Consts)

// func normGradF16(dx, dy, x *uint16, n int, mu, a, b, c float32)
TEXT ·normGradF16(SB), NOSPLIT, $0-48
	NORMGRAD16(WIDEN_F16, NARROW_F16, noConsts)

// func normGradBF16(dx, dy, x *uint16, n int, mu, a, b, c float32)
TEXT ·normGradBF16(SB), NOSPLIT, $0-48
	NORMGRAD16(WIDEN_BF16, NARROW_BF16, bf16Consts)

// func shiftedSumsF16(xs *uint16, n int, k float64, s, q *[16]float64)
TEXT ·shiftedSumsF16(SB), NOSPLIT, $0-40
	SHIFTEDSUMS16(WIDEN_F16)

// func shiftedSumsBF16(xs *uint16, n int, k float64, s, q *[16]float64)
TEXT ·shiftedSumsBF16(SB), NOSPLIT, $0-40
	SHIFTEDSUMS16(WIDEN_BF16)

// func gradSumsF16(dy, x *uint16, n int, mu float64, a, b *[16]float64)
TEXT ·gradSumsF16(SB), NOSPLIT, $0-48
	GRADSUMS16(WIDEN_F16)

// func gradSumsBF16(dy, x *uint16, n int, mu float64, a, b *[16]float64)
TEXT ·gradSumsBF16(SB), NOSPLIT, $0-48
	GRADSUMS16(WIDEN_BF16)
