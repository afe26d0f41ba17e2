//go:build amd64 && !noasm

package kernels

import (
	"fmt"

	"golang.org/x/sys/cpu"
)

// asmWino is the assembly Winograd transforms: AVX-512 with avx512, AVX2
// otherwise (the CPU has AVX2 wherever an assembly GEMM runs).
func asmWino(avx512 bool) winoKernels {
	// F(4x4,3x3)'s transforms are AVX2's on either: a chunk is two halves
	// of 8 tiles whichever GEMM multiplies it.
	k := winoKernels{
		f2:   winoTransforms{winoInputAsm(Wino2, winoInputAVX2), winoOutputAsm(Wino2, winoOutputAVX2), winoGradAsm(Wino2, winoGradAVX2)},
		f4:   winoTransforms{winoInputAsm(Wino4, winoInput4AVX2), winoOutputAsm(Wino4, winoOutput4AVX2), winoGradAsm(Wino4, winoGrad4AVX2)},
		wide: winoWidthAVX2(),
	}
	if avx512 && cpu.X86.HasAVX512F {
		k.f2 = winoTransforms{winoInputAsm(Wino2, winoInputAVX512), winoOutputAsm(Wino2, winoOutputAVX512), winoGradAsm(Wino2, winoGradAVX512)}
		k.wide = winoWidthAVX512()
	}
	return k
}

// winoCheck panics unless a transform's reads and writes lie in its
// operands: it reads up to readEnd and writes up to writeEnd (exclusive),
// strides are not negative.
func winoCheck(what string, readEnd, readLen, writeEnd, writeLen int, strides ...int) {
	for _, s := range strides {
		if s < 0 {
			panic(fmt.Sprintf("kernels: winograd %s: negative stride", what))
		}
	}
	if readEnd > readLen || writeEnd > writeLen {
		panic(fmt.Sprintf("kernels: winograd %s: reads %d of %d values, writes %d of %d", what, readEnd, readLen, writeEnd, writeLen))
	}
}

// winoInputAsm and winoOutputAsm wrap the transforms of m x m tiles:
// windows of m+2 rows, m floats a tile apart, (m+2)^2 positions.
func winoInputAsm(m WinoTile, kern func(src *float32, stride, half, step, rows, rowStep, n, chans, srcChan int, dst *float32, xiStride, panelStride, dstChan int)) winoInputKernel {
	return func(src []float32, stride int, wk winoWalk, dst []float32, xiStride, panelStride, dstChan int) {
		if wk.chunks() <= 0 || wk.chans <= 0 {
			return
		}
		winoCheck("input transform", wk.last()+int(m+1)*stride+8*int(m)+2, len(src),
			(wk.chans-1)*dstChan+(m.xi()-1)*xiStride+(wk.chunks()-1)*panelStride+16, len(dst),
			stride, wk.half, wk.step, wk.rowStep, wk.chanStep, xiStride, panelStride, dstChan)
		kern(&src[0], stride, wk.half, wk.step, wk.rows, wk.rowStep, wk.n, wk.chans, wk.chanStep, &dst[0], xiStride, panelStride, dstChan)
	}
}

func winoOutputAsm(t WinoTile, kern func(dst *float32, stride, half, step, rows, rowStep, n, chans, dstChan int, m *float32, xiStride, mChan int, bias *float32, addBias int)) winoOutputKernel {
	return func(m []float32, xiStride, mChan int, dst []float32, stride int, wk winoWalk, bias []float32) {
		if wk.chunks() <= 0 || wk.chans <= 0 {
			return
		}
		winoCheck("output transform", (wk.chans-1)*mChan+(t.xi()-1)*xiStride+16*wk.chunks(), len(m),
			wk.last()+int(t-1)*stride+8*int(t), len(dst), xiStride, mChan, stride, wk.half, wk.step, wk.rowStep, wk.chanStep)
		b, flag := &m[0], 0 // read only where the flag is 1
		if bias != nil {
			if len(bias) < wk.chans {
				panic("kernels: winograd output transform: fewer biases than channels")
			}
			b, flag = &bias[0], 1
		}
		kern(&dst[0], stride, wk.half, wk.step, wk.rows, wk.rowStep, wk.n, wk.chans, wk.chanStep, &m[0], xiStride, mChan, b, flag)
	}
}

func winoGradAsm(m WinoTile, kern func(src *float32, stride, half, step, rows, rowStep, n, chans, srcChan int, dst *float32, xiStride, dstChan int)) winoGradKernel {
	return func(src []float32, stride int, wk winoWalk, dst []float32, xiStride, dstChan int) {
		if wk.chunks() <= 0 || wk.chans <= 0 {
			return
		}
		winoCheck("gradient transform", wk.last()+int(m-1)*stride+8*int(m), len(src),
			(wk.chans-1)*dstChan+(m.xi()-1)*xiStride+16*wk.chunks(), len(dst),
			stride, wk.half, wk.step, wk.rowStep, wk.chanStep, xiStride, dstChan)
		kern(&src[0], stride, wk.half, wk.step, wk.rows, wk.rowStep, wk.n, wk.chans, wk.chanStep, &dst[0], xiStride, dstChan)
	}
}

// The transforms in winograd_amd64.s (asm_gen.go).
//
//go:noescape
func winoInputAVX512(src *float32, stride, half, step, rows, rowStep, n, chans, srcChan int, dst *float32, xiStride, panelStride, dstChan int)

//go:noescape
func winoOutputAVX512(dst *float32, stride, half, step, rows, rowStep, n, chans, dstChan int, m *float32, xiStride, mChan int, bias *float32, addBias int)

//go:noescape
func winoGradAVX512(src *float32, stride, half, step, rows, rowStep, n, chans, srcChan int, dst *float32, xiStride, dstChan int)

//go:noescape
func winoInputAVX2(src *float32, stride, half, step, rows, rowStep, n, chans, srcChan int, dst *float32, xiStride, panelStride, dstChan int)

//go:noescape
func winoOutputAVX2(dst *float32, stride, half, step, rows, rowStep, n, chans, dstChan int, m *float32, xiStride, mChan int, bias *float32, addBias int)

//go:noescape
func winoGradAVX2(src *float32, stride, half, step, rows, rowStep, n, chans, srcChan int, dst *float32, xiStride, dstChan int)

//go:noescape
func winoInput4AVX2(src *float32, stride, half, step, rows, rowStep, n, chans, srcChan int, dst *float32, xiStride, panelStride, dstChan int)

//go:noescape
func winoOutput4AVX2(dst *float32, stride, half, step, rows, rowStep, n, chans, dstChan int, m *float32, xiStride, mChan int, bias *float32, addBias int)

//go:noescape
func winoGrad4AVX2(src *float32, stride, half, step, rows, rowStep, n, chans, srcChan int, dst *float32, xiStride, dstChan int)
