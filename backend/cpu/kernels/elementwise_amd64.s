//go:build amd64 && !noasm

#include "textflag.h"

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
