package cuda

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// The 3D convolutions (backend.ConvShape.Is3D, UpConvShape.Is3D) run
// gemm.cu's implicit GEMMs with a depth index (conv3, up_conv3 and their
// gradients) on every storage type: fp32 exactly (no TF32), 16-bit tensors
// widened as they are read and rounded once as written. The tensor-core
// kernels (tc.cu) index 2D images only; with cuDNN (cuda.conv) the 3D
// convolutions are its (library.go), on tensor cores where it chooses.
// Each tensor must fit int64 indices; split-K weight gradients and the
// bias gradient are the 2D ones'.

// checkConv3 panics unless s is a valid 3D convolution.
func checkConv3(s backend.ConvShape) {
	if s.N <= 0 || s.C <= 0 || s.H <= 0 || s.W <= 0 || s.OC <= 0 || s.K <= 0 || s.Pad < 0 || s.PadD < 0 ||
		s.OD() <= 0 || s.OH() <= 0 || s.OW() <= 0 {
		panic(fmt.Sprintf("backend/cuda: bad 3D conv shape %+v", s))
	}
}

func (b *Backend) conv3(s backend.ConvShape, out, in, w, bias backend.View) {
	checkConv3(s)
	gx, gy := gemmGrid(s.OC, s.N*s.OD()*s.OH()*s.OW())
	b.launchGrid(KConv3, gx, gy, ptr(out, s.DT), ptr(in, s.DT), ptr(w, s.DT), ptr(bias, backend.Float32), s.DT,
		s.N, s.C, s.Depth(), s.H, s.W, s.OC, s.KDepth(), s.K, s.PadD, s.Pad)
}

func (b *Backend) conv3Back(s backend.ConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	checkConv3(s)
	R := s.KDepth() * s.K * s.K
	if !din.None() {
		checkLen(din, s.InSize())
		gx, gy := gemmGrid(s.C, s.N*s.Depth()*s.H*s.W)
		b.launchGrid(KConv3BackData, gx, gy, ptr(din, s.DT), ptr(dout, s.DT), ptr(w, s.DT), s.DT,
			s.N, s.C, s.Depth(), s.H, s.W, s.OC, s.KDepth(), s.K, s.PadD, s.Pad)
	}
	P := s.OD() * s.OH() * s.OW()
	if !dw.None() {
		checkLen(dw, s.WeightSize())
		m, n := s.OC, s.C*R
		splits := splitK(m, n, s.N*P)
		gx, gy := gemmGrid(m, n)
		b.launchGrid(KConv3BackWeight, gx, gy*splits, ptr(dw, backend.Float32), ptr(dout, s.DT), ptr(in, s.DT), s.DT,
			s.N, s.C, s.Depth(), s.H, s.W, s.OC, s.KDepth(), s.K, s.PadD, s.Pad, splits, b.splitSpace(ws, m, n, splits))
		b.splitSum(dw, ws, m*n, splits)
	}
	if !dbias.None() {
		b.biasGrad(dbias, dout, s.N, s.OC, P)
	}
}

// checkUpConv3 panics unless s is a valid 3D transposed convolution.
func checkUpConv3(s backend.UpConvShape) {
	if s.N <= 0 || s.C <= 0 || s.H <= 0 || s.W <= 0 || s.OC <= 0 || s.KDepth() > 2 {
		panic(fmt.Sprintf("backend/cuda: bad 3D transposed conv shape %+v", s))
	}
}

func (b *Backend) upConv3(s backend.UpConvShape, out, in, w, bias backend.View) {
	checkUpConv3(s)
	gx, gy := gemmGrid(4*s.KDepth()*s.OC, s.N*s.Depth()*s.H*s.W)
	b.launchGrid(KUpConv3, gx, gy, ptr(out, s.DT), ptr(in, s.DT), ptr(w, s.DT), ptr(bias, backend.Float32), s.DT,
		s.N, s.C, s.Depth(), s.H, s.W, s.OC, s.KDepth())
}

func (b *Backend) upConv3Back(s backend.UpConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	checkUpConv3(s)
	V := s.Depth() * s.H * s.W
	if !din.None() {
		checkLen(din, s.InSize())
		gx, gy := gemmGrid(s.C, s.N*V)
		b.launchGrid(KUpConv3BackData, gx, gy, ptr(din, s.DT), ptr(dout, s.DT), ptr(w, s.DT), s.DT,
			s.N, s.C, s.Depth(), s.H, s.W, s.OC, s.KDepth())
	}
	if !dw.None() {
		checkLen(dw, s.WeightSize())
		m, n := s.C, 4*s.KDepth()*s.OC
		splits := splitK(m, n, s.N*V)
		gx, gy := gemmGrid(m, n)
		b.launchGrid(KUpConv3BackWeight, gx, gy*splits, ptr(dw, backend.Float32), ptr(dout, s.DT), ptr(in, s.DT), s.DT,
			s.N, s.C, s.Depth(), s.H, s.W, s.OC, s.KDepth(), splits, b.splitSpace(ws, m, n, splits))
		b.splitSum(dw, ws, m*n, splits)
	}
	if !dbias.None() {
		b.biasGrad(dbias, dout, s.N, s.OC, 4*s.KDepth()*V)
	}
}
