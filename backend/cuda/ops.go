package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda/cudnn"
)

// ConvWorkspace is the split-K partial sums of the weight gradient
// (splitK), 0 when it is not split: the convolutions are implicit GEMMs.
func (b *Backend) ConvWorkspace(s backend.ConvShape) int {
	if c := b.libConvOf(s); c != nil {
		return c.floats()
	}
	m, n := s.OC, s.C*s.KDepth()*s.K*s.K
	return splitWorkspace(m, n, splitK(m, n, s.N*s.OD()*s.OH()*s.OW()))
}

// UpConvWorkspace is ConvWorkspace's for the transposed convolution.
func (b *Backend) UpConvWorkspace(s backend.UpConvShape) int {
	if c := b.libUpConvOf(s); c != nil {
		return c.floats()
	}
	m, n := s.C, 4*s.KDepth()*s.OC
	return splitWorkspace(m, n, splitK(m, n, s.N*s.Depth()*s.H*s.W))
}

// splitK is how many parts a product of rows x cols outputs over depth is
// split into: enough blocks to fill a large GPU (256 or more) where the
// output has few 64x64 tiles and the depth is long (a weight gradient over
// every pixel of the batch), each part at least 1024 deep; at most 64.
func splitK(rows, cols, depth int) int {
	tiles := ((rows + 63) / 64) * ((cols + 63) / 64)
	return max(1, min((256+tiles-1)/tiles, depth/1024, 64))
}

func splitWorkspace(rows, cols, splits int) int {
	if splits <= 1 {
		return 0
	}
	return splits * rows * cols
}

// Stages is false: every family's kernels take 16-bit tensors as they are
// (the convolutions on fp16/bf16 tensor-core operands, the others widening
// each value to fp32 and rounding each result), as the CPU's do, so no
// layer stages anything through fp32.
func (*Backend) Stages(op backend.Op, dt backend.DType) bool { return false }

// ---- transfer ----

// Upload copies host bytes into dst, staged through pinned memory on the
// copy stream (upload.go): src may be reused at once, and the host does
// not wait for the device.
func (b *Backend) Upload(dst backend.View, src []byte) {
	if len(src) != dst.Bytes() {
		panic(fmt.Sprintf("backend/cuda: upload of %d bytes into %v", len(src), dst))
	}
	b.upload("Upload", anyPtr(dst), src)
}

// Download copies src into host bytes (cuMemcpyDtoH, after the work before
// it). Where the device has reported an error, or the copy fails, dst is
// zeroed and Sync returns the error: whoever keeps downloaded values
// (a checkpoint, a prediction) syncs before keeping them.
func (b *Backend) Download(dst []byte, src backend.View) {
	if len(dst) != src.Bytes() {
		panic(fmt.Sprintf("backend/cuda: download of %v into %d bytes", src, len(dst)))
	}
	p := anyPtr(src)
	if len(dst) == 0 {
		return
	}
	if b.failed() == nil {
		b.order(p)
		b.copiesToHost.Add(1)
		b.finish("Download", b.drv.CopyDtoH(dst, p.addr))
	}
	if b.failed() != nil {
		clear(dst)
	}
}

// Convert widens or rounds between fp32 and fp16/bf16 as backend/half.go
// does, bit for bit; the same type copies.
func (b *Backend) Convert(dst, src backend.View) {
	if dst.Len != src.Len {
		panic(fmt.Sprintf("backend/cuda: convert %v into %v", src, dst))
	}
	if dst.DT == src.DT {
		d, s := anyPtr(dst), anyPtr(src)
		if dst.Len > 0 && b.failed() == nil {
			b.order(d, s)
			b.fail("Convert", b.drv.CopyDtoD(d.addr, s.addr, int64(dst.Bytes())))
		}
		return
	}
	if dst.DT != backend.Float32 && src.DT != backend.Float32 {
		panic(fmt.Sprintf("backend/cuda: no conversion from %s to %s", src.DT, dst.DT))
	}
	b.launch(KConvert, dst.Len, floatPtr(dst), dst.DT, floatPtr(src), src.DT, dst.Len)
}

// Fill sets every value of dst to v rounded to its type (cuMemsetD32/D16
// with the value's bits, so -0 stays -0).
func (b *Backend) Fill(dst backend.View, v float32) {
	p := floatPtr(dst).addr
	if dst.Len == 0 || b.failed() != nil {
		return
	}
	n := int64(dst.Len)
	b.order(floatPtr(dst))
	switch dst.DT {
	case backend.Float32:
		b.fail("Fill", b.drv.MemsetD32(p, math.Float32bits(v), n))
	case backend.Float16:
		b.fail("Fill", b.drv.MemsetD16(p, backend.F32ToF16(v), n))
	case backend.BFloat16:
		b.fail("Fill", b.drv.MemsetD16(p, backend.F32ToBF16(v), n))
	}
}

// ---- convolutions ----
//
// 16-bit tensors, and fp32 tensors with TF32 on (SetTF32, the default),
// run on the tensor cores (tc.cu: tcConv, tcWgrad); fp32 with TF32 off
// runs gemm.cu's exact fp32 implicit GEMMs on 64x64 tiles.

// gemmGrid is the grid of a product with rows x cols outputs on gemm.cu's
// 64x64 tiles.
func gemmGrid(rows, cols int) (gx, gy int) { return (cols + 63) / 64, (rows + 63) / 64 }

// exactFP32 reports an fp32 convolution of gemm.cu: TF32 off, or tensors
// too large for tc.cu's 32-bit offsets within an image (fits32).
func (b *Backend) exactFP32(dt backend.DType, fits bool) bool {
	if dt != backend.Float32 {
		if !fits {
			panic(fmt.Sprintf("backend/cuda: a %s convolution with an image or a batch of 2^31 values or more", dt))
		}
		return false
	}
	return !b.tf32.Load() || !fits
}

// fits32 reports sizes tc.cu indexes in 32 bits: values per image of
// each tensor and pixels per batch, each below 2^31.
func fits32(sizes ...int) bool {
	for _, n := range sizes {
		if n > math.MaxInt32 {
			return false
		}
	}
	return true
}

// convFits reports a convolution tc.cu can index (fits32).
func convFits(s backend.ConvShape) bool {
	return fits32(s.C*s.H*s.W, s.OC*s.OH()*s.OW(), s.N*s.H*s.W, s.N*s.OH()*s.OW(), s.WeightSize())
}

// upConvFits is convFits for the transposed convolution.
func upConvFits(s backend.UpConvShape) bool {
	return fits32(s.C*s.H*s.W, 4*s.OC*s.H*s.W, 4*s.N*s.H*s.W, s.WeightSize())
}

// tcConv is a data GEMM of tc.cu (tc_conv_*: see its top): rows M, pixel
// columns NI images of Hn x Wn, depth R positions x Cd channels of the
// input (Cd, HT, WT) read at (Sp*y + F*(r/RW) + G, Sp*x + F*(r%RW) + G),
// weight (m, c, r) at m*Sm + c*Sc + r*Sr; Up scatters row (oc, i, j) to
// out pixel (2y+i, 2x+j).
type tcConv struct {
	NI, M, Cd, R, RW, Sp, F, G, HT, WT, Hn, Wn, Sm, Sc, Sr int
	Up                                                     bool
}

// tcWgrad is a weight GEMM of tc.cu (tc_wgrad_*): dw (M x N) over the
// pixels of NI images of the A tensor (M, Hk, Wk); column n of B is
// channel n/R of the B tensor (CB, HB, WB) at position n%R, read as
// tcConv's.
type tcWgrad struct {
	NI, M, N, Hk, Wk, CB, HB, WB, R, RW, Sp, F, G int
}

// tcRows is the tile height for a product of rows outputs: the smallest
// of 32, 64 and 128 that holds them.
func tcRows(rows int) int {
	switch {
	case rows <= 32:
		return 32
	case rows <= 64:
		return 64
	}
	return 128
}

// tcCols is tc.cu's tile width.
const tcCols = 128

// runConv launches a data GEMM on out, in, w (of dt) and bias (fp32 or
// none).
func (b *Backend) runConv(g tcConv, dt backend.DType, out, in, w, bias backend.View) {
	bm := tcRows(g.M)
	gx, gy := (g.NI*g.Hn*g.Wn+tcCols-1)/tcCols, (g.M+bm-1)/bm
	args := []any{ptr(out, dt), ptr(in, dt), ptr(w, dt), ptr(bias, backend.Float32)}
	k := KTcConvTf32
	if dt.Half() {
		k = KTcConv16
		args = append(args, dt)
	}
	args = append(args, g.NI, g.M, g.Cd, g.R, g.RW, g.Sp, g.F, g.G, g.HT, g.WT, g.Hn, g.Wn, g.Sm, g.Sc, g.Sr, g.Up, bm)
	b.launchGrid(k, gx, gy, args...)
}

// runWgrad launches a weight GEMM into dw (fp32, accumulated) from a and
// bt (of dt), split over the depth into ws where splitK says.
func (b *Backend) runWgrad(g tcWgrad, dt backend.DType, dw, a, bt, ws backend.View) {
	splits := splitK(g.M, g.N, g.NI*g.Hk*g.Wk)
	bm := tcRows(g.M)
	gx, gy := (g.N+tcCols-1)/tcCols, (g.M+bm-1)/bm
	args := []any{ptr(dw, backend.Float32), ptr(a, dt), ptr(bt, dt)}
	k := KTcWgradTf32
	if dt.Half() {
		k = KTcWgrad16
		args = append(args, dt)
	}
	args = append(args, g.NI, g.M, g.N, g.Hk, g.Wk, g.CB, g.HB, g.WB, g.R, g.RW, g.Sp, g.F, g.G, splits,
		b.splitSpace(ws, g.M, g.N, splits), bm)
	b.launchGrid(k, gx, gy*splits, args...)
	b.splitSum(dw, ws, g.M*g.N, splits)
}

func (b *Backend) Conv(s backend.ConvShape, out, in, w, bias, ws backend.View) {
	checkLen(out, s.OutSize(), in, s.InSize(), w, s.WeightSize())
	if c := b.libConvOf(s); c != nil {
		b.libRun(c, cudnn.Forward, ptr(in, s.DT), ptr(w, s.DT), ptr(out, s.DT), ws, false)
		b.addBias(out, bias, s.DT, s.N, s.OC, s.OutSize()/(s.N*s.OC))
		return
	}
	if s.Is3D() {
		b.conv3(s, out, in, w, bias)
		return
	}
	if b.exactFP32(s.DT, convFits(s)) {
		gx, gy := gemmGrid(s.OC, s.N*s.OH()*s.OW())
		b.launchGrid(KConv, gx, gy, ptr(out, backend.Float32), ptr(in, backend.Float32), ptr(w, backend.Float32),
			ptr(bias, backend.Float32), s.N, s.C, s.H, s.W, s.OC, s.K, s.Pad)
		return
	}
	kk := s.K * s.K
	b.runConv(tcConv{NI: s.N, M: s.OC, Cd: s.C, R: kk, RW: s.K, Sp: 1, F: 1, G: -s.Pad, HT: s.H, WT: s.W,
		Hn: s.OH(), Wn: s.OW(), Sm: s.C * kk, Sc: kk, Sr: 1}, s.DT, out, in, w, bias)
}

func (b *Backend) ConvBack(s backend.ConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	checkLen(dout, s.OutSize(), in, s.InSize(), w, s.WeightSize())
	if c := b.libConvOf(s); c != nil {
		if !din.None() {
			checkLen(din, s.InSize())
			b.libRun(c, cudnn.BackwardData, ptr(din, s.DT), ptr(w, s.DT), ptr(dout, s.DT), ws, false)
		}
		if !dw.None() {
			checkLen(dw, s.WeightSize())
			b.libWeightGrad(c, s.DT, ptr(dw, backend.Float32), ptr(in, s.DT), ptr(dout, s.DT), ws, s.WeightSize())
		}
		if !dbias.None() {
			b.biasGrad(dbias, dout, s.N, s.OC, s.OutSize()/(s.N*s.OC))
		}
		return
	}
	if s.Is3D() {
		b.conv3Back(s, din, dw, dbias, dout, in, w, ws)
		return
	}
	exact, kk := b.exactFP32(s.DT, convFits(s)), s.K*s.K
	if !din.None() {
		checkLen(din, s.InSize())
		if exact {
			gx, gy := gemmGrid(s.C, s.N*s.H*s.W)
			b.launchGrid(KConvBackData, gx, gy, ptr(din, backend.Float32), ptr(dout, backend.Float32),
				ptr(w, backend.Float32), s.N, s.C, s.H, s.W, s.OC, s.K, s.Pad)
		} else {
			// din = the flipped filter over dout: position (ky, kx) reads dout at (y-ky+pad, x-kx+pad).
			b.runConv(tcConv{NI: s.N, M: s.C, Cd: s.OC, R: kk, RW: s.K, Sp: 1, F: -1, G: s.Pad, HT: s.OH(), WT: s.OW(),
				Hn: s.H, Wn: s.W, Sm: kk, Sc: s.C * kk, Sr: 1}, s.DT, din, dout, w, backend.View{})
		}
	}
	if !dw.None() {
		checkLen(dw, s.WeightSize())
		m, n := s.OC, s.C*kk
		if exact {
			splits := splitK(m, n, s.N*s.OH()*s.OW())
			gx, gy := gemmGrid(m, n)
			b.launchGrid(KConvBackWeight, gx, gy*splits, ptr(dw, backend.Float32), ptr(dout, backend.Float32),
				ptr(in, backend.Float32), s.N, s.C, s.H, s.W, s.OC, s.K, s.Pad, splits, b.splitSpace(ws, m, n, splits))
			b.splitSum(dw, ws, m*n, splits)
		} else {
			b.runWgrad(tcWgrad{NI: s.N, M: m, N: n, Hk: s.OH(), Wk: s.OW(), CB: s.C, HB: s.H, WB: s.W, R: kk, RW: s.K,
				Sp: 1, F: 1, G: -s.Pad}, s.DT, dw, dout, in, ws)
		}
	}
	if !dbias.None() {
		b.biasGrad(dbias, dout, s.N, s.OC, s.OH()*s.OW())
	}
}

func (b *Backend) UpConv(s backend.UpConvShape, out, in, w, bias, ws backend.View) {
	checkLen(out, s.OutSize(), in, s.InSize(), w, s.WeightSize())
	if c := b.libUpConvOf(s); c != nil {
		// The convolution's backward data pass: dy is in, dx out.
		b.libRun(c, cudnn.BackwardData, ptr(out, s.DT), ptr(w, s.DT), ptr(in, s.DT), ws, false)
		b.addBias(out, bias, s.DT, s.N, s.OC, s.OutSize()/(s.N*s.OC))
		return
	}
	if s.Is3D() {
		b.upConv3(s, out, in, w, bias)
		return
	}
	if b.exactFP32(s.DT, upConvFits(s)) {
		gx, gy := gemmGrid(4*s.OC, s.N*s.H*s.W)
		b.launchGrid(KUpConv, gx, gy, ptr(out, backend.Float32), ptr(in, backend.Float32), ptr(w, backend.Float32),
			ptr(bias, backend.Float32), s.N, s.C, s.H, s.W, s.OC)
		return
	}
	// Rows (oc, i, j), one position: weight (c, oc*4+ij).
	b.runConv(tcConv{NI: s.N, M: 4 * s.OC, Cd: s.C, R: 1, RW: 1, Sp: 1, HT: s.H, WT: s.W, Hn: s.H, Wn: s.W,
		Sm: 1, Sc: 4 * s.OC, Up: true}, s.DT, out, in, w, bias)
}

func (b *Backend) UpConvBack(s backend.UpConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	checkLen(dout, s.OutSize(), in, s.InSize(), w, s.WeightSize())
	if c := b.libUpConvOf(s); c != nil {
		// The convolution's forward from dout gives din, its weight gradient of in over dout dw.
		if !din.None() {
			checkLen(din, s.InSize())
			b.libRun(c, cudnn.Forward, ptr(dout, s.DT), ptr(w, s.DT), ptr(din, s.DT), ws, false)
		}
		if !dw.None() {
			checkLen(dw, s.WeightSize())
			b.libWeightGrad(c, s.DT, ptr(dw, backend.Float32), ptr(dout, s.DT), ptr(in, s.DT), ws, s.WeightSize())
		}
		if !dbias.None() {
			b.biasGrad(dbias, dout, s.N, s.OC, s.OutSize()/(s.N*s.OC))
		}
		return
	}
	if s.Is3D() {
		b.upConv3Back(s, din, dw, dbias, dout, in, w, ws)
		return
	}
	exact := b.exactFP32(s.DT, upConvFits(s))
	if !din.None() {
		checkLen(din, s.InSize())
		if exact {
			gx, gy := gemmGrid(s.C, s.N*s.H*s.W)
			b.launchGrid(KUpConvBackData, gx, gy, ptr(din, backend.Float32), ptr(dout, backend.Float32),
				ptr(w, backend.Float32), s.N, s.C, s.H, s.W, s.OC)
		} else {
			// Positions (i, j) read dout at (2y+i, 2x+j); weight (c, oc*4+ij).
			b.runConv(tcConv{NI: s.N, M: s.C, Cd: s.OC, R: 4, RW: 2, Sp: 2, F: 1, HT: 2 * s.H, WT: 2 * s.W, Hn: s.H, Wn: s.W,
				Sm: 4 * s.OC, Sc: 4, Sr: 1}, s.DT, din, dout, w, backend.View{})
		}
	}
	if !dw.None() {
		checkLen(dw, s.WeightSize())
		m, n := s.C, 4*s.OC
		if exact {
			splits := splitK(m, n, s.N*s.H*s.W)
			gx, gy := gemmGrid(m, n)
			b.launchGrid(KUpConvBackWeight, gx, gy*splits, ptr(dw, backend.Float32), ptr(dout, backend.Float32),
				ptr(in, backend.Float32), s.N, s.C, s.H, s.W, s.OC, splits, b.splitSpace(ws, m, n, splits))
			b.splitSum(dw, ws, m*n, splits)
		} else {
			b.runWgrad(tcWgrad{NI: s.N, M: m, N: n, Hk: s.H, Wk: s.W, CB: s.OC, HB: 2 * s.H, WB: 2 * s.W, R: 4, RW: 2,
				Sp: 2, F: 1}, s.DT, dw, in, dout, ws)
		}
	}
	if !dbias.None() {
		b.biasGrad(dbias, dout, s.N, s.OC, 4*s.H*s.W)
	}
}

// splitSpace is the workspace's address for splits partial products of
// rows x cols (0 when not split); it panics if ws is too small.
func (b *Backend) splitSpace(ws backend.View, rows, cols, splits int) devicePtr {
	if splits <= 1 {
		return devicePtr{}
	}
	if ws.Len < splits*rows*cols {
		panic(fmt.Sprintf("backend/cuda: workspace %v for %d partial products of %dx%d", ws, splits, rows, cols))
	}
	return ptr(ws, backend.Float32)
}

// splitSum adds the split partial products in ws into dw, in order.
func (b *Backend) splitSum(dw, ws backend.View, n, splits int) {
	if splits > 1 {
		b.launch(KSplitSum, n, ptr(dw, backend.Float32), ptr(ws, backend.Float32), n, splits)
	}
}

// checkLen panics unless each view (given with the length it needs) has it.
func checkLen(pairs ...any) {
	for i := 0; i+1 < len(pairs); i += 2 {
		v, n := pairs[i].(backend.View), pairs[i+1].(int)
		if v.Len != n {
			panic(fmt.Sprintf("backend/cuda: %v where %d values are needed", v, n))
		}
	}
}

// ---- pooling, upsampling, concat (ReLU, its mask and Add are ops_gen.go's) ----

// The pooling and upsampling kernels take every float type; dt is in's
// (or dout's), and every other float view has it too.

func (b *Backend) MaxPool2(s backend.Shape4, out, argmax, in backend.View) {
	n := s.N * s.C * (s.H / 2) * (s.W / 2)
	checkLen(in, s.Len(), out, n)
	if !argmax.None() {
		checkLen(argmax, n)
	}
	b.launch(KMaxPool2, n, ptr(out, in.DT), ptr(argmax, backend.Uint8), floatPtr(in), in.DT, s.N*s.C, s.H, s.W)
}

func (b *Backend) MaxPool2Back(s backend.Shape4, din, dout, argmax backend.View) {
	checkLen(din, s.Len(), dout, s.N*s.C*(s.H/2)*(s.W/2), argmax, s.N*s.C*(s.H/2)*(s.W/2))
	b.launch(KMaxPool2Back, s.Len(), ptr(din, dout.DT), floatPtr(dout), ptr(argmax, backend.Uint8), dout.DT, s.N*s.C, s.H, s.W)
}

func (b *Backend) Upsample2(s backend.Shape4, out, in backend.View) {
	checkLen(in, s.Len(), out, 4*s.Len())
	b.launch(KUpsample2, 4*s.Len(), ptr(out, in.DT), floatPtr(in), in.DT, s.N*s.C, s.H, s.W)
}

func (b *Backend) Upsample2Back(s backend.Shape4, din, dout backend.View) {
	checkLen(din, s.Len(), dout, 4*s.Len())
	b.launch(KUpsample2Back, s.Len(), ptr(din, dout.DT), floatPtr(dout), dout.DT, s.N*s.C, s.H, s.W)
}

// checkScale3 panics unless f's factors are at least 1 and at most max
// (0: any), and their product at most 256 (a pooling's argmax byte).
func checkScale3(op string, s backend.Shape5, f backend.Scale3, max int) {
	bad := func(k int) bool { return k < 1 || max > 0 && k > max }
	if s.N <= 0 || s.C <= 0 || s.D <= 0 || s.H <= 0 || s.W <= 0 || bad(f.D) || bad(f.H) || bad(f.W) || f.Volume() > 256 {
		panic(fmt.Sprintf("backend/cuda: %s of %+v by %+v", op, s, f))
	}
}

func (b *Backend) MaxPool3(s backend.Shape5, k backend.Scale3, out, argmax, in backend.View) {
	checkScale3("3D max pooling", s, k, 0)
	n := s.Pooled(k).Len()
	checkLen(in, s.Len(), out, n)
	if !argmax.None() {
		checkLen(argmax, n)
	}
	b.launch(KMaxPool3, n, ptr(out, in.DT), ptr(argmax, backend.Uint8), floatPtr(in), in.DT, s.N*s.C, s.D, s.H, s.W, k.D, k.H, k.W)
}

func (b *Backend) MaxPool3Back(s backend.Shape5, k backend.Scale3, din, dout, argmax backend.View) {
	checkScale3("3D max pooling backward", s, k, 0)
	n := s.Pooled(k).Len()
	checkLen(din, s.Len(), dout, n, argmax, n)
	b.launch(KMaxPool3Back, s.Len(), ptr(din, dout.DT), floatPtr(dout), ptr(argmax, backend.Uint8), dout.DT, s.N*s.C, s.D, s.H, s.W, k.D, k.H, k.W)
}

func (b *Backend) Upsample3(s backend.Shape5, f backend.Scale3, out, in backend.View) {
	checkScale3("3D up-sampling", s, f, 2)
	checkLen(in, s.Len(), out, s.Scaled(f).Len())
	b.launch(KUpsample3, out.Len, ptr(out, in.DT), floatPtr(in), in.DT, s.N*s.C, s.D, s.H, s.W, f.D, f.H, f.W)
}

func (b *Backend) Upsample3Back(s backend.Shape5, f backend.Scale3, din, dout backend.View) {
	checkScale3("3D up-sampling backward", s, f, 2)
	checkLen(din, s.Len(), dout, s.Scaled(f).Len())
	b.launch(KUpsample3Back, s.Len(), ptr(din, dout.DT), floatPtr(dout), dout.DT, s.N*s.C, s.D, s.H, s.W, f.D, f.H, f.W)
}

// UpsampleConcat writes out's samples, skip's part and in's upsampled, in
// one launch for the batch.
func (b *Backend) UpsampleConcat(s backend.Shape4, out, skip, in backend.View) {
	checkLen(in, s.Len(), out, skip.Len+4*s.Len())
	if skip.DT != in.DT || skip.Len%s.N != 0 {
		panic(fmt.Sprintf("backend/cuda: upsample-concat of %v and %v", skip, in))
	}
	b.launch(KUpsampleConcat, out.Len, ptr(out, in.DT), ptr(skip, in.DT), floatPtr(in), in.DT, s.N, skip.Len/s.N, s.C, s.H, s.W)
}

// UpsampleConcatBack writes dskip and din from dout in one launch.
func (b *Backend) UpsampleConcatBack(s backend.Shape4, dskip, din, dout backend.View) {
	checkLen(din, s.Len(), dout, dskip.Len+4*s.Len())
	if dskip.DT != dout.DT || dskip.Len%s.N != 0 {
		panic(fmt.Sprintf("backend/cuda: upsample-concat back of %v into %v", dout, dskip))
	}
	b.launch(KUpsampleConcatBack, dskip.Len+s.Len(), ptr(dskip, dout.DT), ptr(din, dout.DT), floatPtr(dout), dout.DT,
		s.N, dskip.Len/s.N, s.C, s.H, s.W)
}

// Concat copies each sample's skip values, then its up values, whatever
// the storage type.
func (b *Backend) Concat(n int, out, skip, up backend.View) {
	if skip.DT != up.DT || out.DT != up.DT || out.Len != skip.Len+up.Len || skip.Len%n != 0 || up.Len%n != 0 {
		panic(fmt.Sprintf("backend/cuda: concat of %v and %v into %v", skip, up, out))
	}
	b.launch(KConcat, out.Len, anyPtr(out), anyPtr(skip), anyPtr(up), n, skip.Len/n, up.Len/n, out.DT.Size())
}

// Split is Concat's adjoint.
func (b *Backend) Split(n int, dskip, dup, dout backend.View) {
	if dskip.DT != dup.DT || dout.DT != dup.DT || dout.Len != dskip.Len+dup.Len || dskip.Len%n != 0 || dup.Len%n != 0 {
		panic(fmt.Sprintf("backend/cuda: split of %v into %v and %v", dout, dskip, dup))
	}
	b.launch(KSplit, dout.Len, anyPtr(dskip), anyPtr(dup), anyPtr(dout), n, dskip.Len/n, dup.Len/n, dout.DT.Size())
}

// ---- loss ----

// lossSums runs loss_partials of kind over segs segments (1, or one per
// class) of the N*H*W pixels and returns each segment's four sums, its
// chunks added in order on the host; a bad target's *TargetError, or the
// device's error.
func (b *Backend) lossSums(kind, segs int, s backend.Shape4, logits, target backend.View, gamma float32) ([][4]float64, error) {
	_, _, chunks := b.lossPartials(kind, segs, s, logits, target, gamma)
	items := segs * chunks
	raw, err := b.fetch(b.scratchPtr(partialsOffset, 32*items+4*s.N), 32*items+4*s.N)
	if err != nil {
		return nil, err
	}
	if err := targetError(raw[32*items:], s.N, s.C); err != nil {
		return nil, err
	}
	out := make([][4]float64, segs)
	for i := range items {
		for j := range 4 {
			out[i/chunks][j] += math.Float64frombits(binary.LittleEndian.Uint64(raw[8*(4*i+j):]))
		}
	}
	return out, nil
}

// lossPartials launches loss_partials of kind over segs segments of the
// N*H*W pixels, each in chunks: the partials (4 float64 a segment's chunk)
// in the scratch area, the bad-target flags (int32 a sample) right after
// them, so that one copy reads both; and the chunks a segment.
func (b *Backend) lossPartials(kind, segs int, s backend.Shape4, logits, target backend.View, gamma float32) (partials, bad devicePtr, chunks int) {
	P := s.N * s.H * s.W
	checkLen(logits, s.Len(), target, P)
	if s.N > maxSamples {
		panic(fmt.Sprintf("backend/cuda: a loss over %d samples; at most %d", s.N, maxSamples))
	}
	chunk, chunks := reduceChunks(segs, P, lossItems) // 32 bytes a work item
	items := segs * chunks
	partials, bad = b.scratchPtr(partialsOffset, 32*items), b.scratchPtr(partialsOffset+32*items, 4*s.N)
	b.memsetD32(bad, 0, s.N)
	b.launchGrid(KLossPartials, min(items, b.reduceBlocks()), 1, partials, bad, floatPtr(logits), ptr(target, backend.Uint8), logits.DT,
		s.N, s.C, s.H*s.W, gamma, kind, chunk, chunks)
	return partials, bad, chunks
}

// The kinds of loss_partials (ops.cu's LOSS_*).
const (
	lossCE = iota
	lossSums
)

// CrossEntropy sums the per-pixel losses over chunks of the pixels and
// the chunks in order, on the device (float64), into a record slot of its
// own, and reads the slot.
func (b *Backend) CrossEntropy(s backend.Shape4, logits, target backend.View) (float64, int, error) {
	slot := maxRecordSlots - 1
	b.crossEntropyInto(s, logits, target, slot)
	raw, err := b.fetch(b.recordSlot(slot), recordSlotBytes)
	if err != nil {
		return 0, 0, err
	}
	return decodeSlot(raw, s.C)
}

func (b *Backend) CrossEntropyBack(s backend.Shape4, dlogits, logits, target backend.View, k float32) {
	b.crossEntropyBack(s, dlogits, logits, target, k, devicePtr{}, 0, devicePtr{})
}

// crossEntropyBack launches cross_entropy_back with k, or with k from
// slot's count and scale (the float at scaleAt where that is not none)
// where slot is not none.
func (b *Backend) crossEntropyBack(s backend.Shape4, dlogits, logits, target backend.View, k float32, slot devicePtr, scale float32,
	scaleAt devicePtr) {
	checkLen(dlogits, s.Len(), logits, s.Len(), target, s.N*s.H*s.W)
	b.launch(KCrossEntropyBack, s.N*s.H*s.W, ptr(dlogits, logits.DT), floatPtr(logits), ptr(target, backend.Uint8), logits.DT,
		s.N, s.C, s.H*s.W, k, slot, scale, scaleAt)
}

// targetError reads the kernels' bad-target flags of n samples, badv (the
// largest bad value + 1 per sample, 0 for none): the *backend.TargetError
// of the first flagged sample, nil if none.
func targetError(badv []byte, n, classes int) error {
	for i := range n {
		if v := int32(binary.LittleEndian.Uint32(badv[4*i:])); v != 0 {
			return &backend.TargetError{Value: int(v) - 1, Sample: i, Classes: classes}
		}
	}
	return nil
}

// LossSums sums each class's four values over chunks of the pixels on the
// device (no atomics: deterministic) and adds them to the host's.
func (b *Backend) LossSums(s backend.Shape4, logits, target backend.View, gamma float32, sums []float64) error {
	K := s.C
	if len(sums) != 4*K {
		panic("backend/cuda: loss sums need 4 values per class")
	}
	got, err := b.lossSums(lossSums, K, s, logits, target, gamma)
	if err != nil {
		return err
	}
	for c := range K {
		for j := range 4 {
			sums[j*K+c] += got[c][j]
		}
	}
	return nil
}

// LossBack uploads the coefficients into the scratch, then runs one thread
// per pixel.
func (b *Backend) LossBack(s backend.Shape4, dlogits, logits, target backend.View, gamma float32, coef []float32) {
	K := s.C
	checkLen(dlogits, s.Len(), logits, s.Len(), target, s.N*s.H*s.W)
	if len(coef) != 3*K || 4*len(coef) > maxCountsBytes {
		panic(fmt.Sprintf("backend/cuda: loss gradient with %d coefficients for %d classes", len(coef), K))
	}
	raw := make([]byte, 4*len(coef))
	for i, v := range coef {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	p := b.scratchPtr(countsOffset, len(raw))
	b.upload("LossBack", p, raw)
	b.launch(KLossBack, s.N*s.H*s.W, ptr(dlogits, logits.DT), floatPtr(logits), ptr(target, backend.Uint8), p, logits.DT,
		s.N, K, s.H*s.W, gamma)
}

// ---- metrics ----

// Confusion counts on the device (integer atomics) and adds the counts to
// the host's.
func (b *Backend) Confusion(s backend.Shape4, counts []int64, logits, target backend.View) {
	K := s.C
	if len(counts) != K*K || target.Len != s.N*s.H*s.W || logits.Len != s.Len() {
		panic(fmt.Sprintf("backend/cuda: confusion of %d classes into %d counts, %v", K, len(counts), target))
	}
	if 8*K*K > maxCountsBytes {
		panic(fmt.Sprintf("backend/cuda: confusion of %d classes: at most 256", K))
	}
	p := b.scratchPtr(countsOffset, 8*K*K)
	b.memsetD32(p, 0, 2*K*K)
	b.launch(KConfusion, s.N*s.H*s.W, p, floatPtr(logits), logits.DT, ptr(target, backend.Uint8), s.N, K, s.H*s.W)
	got, err := b.fetch(p, 8*K*K)
	if err != nil {
		return // counts stay as they were; Sync returns the error
	}
	for i := range counts {
		counts[i] += int64(binary.LittleEndian.Uint64(got[8*i:]))
	}
}

func (b *Backend) Argmax(s backend.Shape4, classes, logits backend.View) {
	checkLen(classes, s.N*s.H*s.W, logits, s.Len())
	b.launch(KArgmax, s.N*s.H*s.W, ptr(classes, backend.Uint8), floatPtr(logits), logits.DT, s.N, s.C, s.H*s.W)
}

// ---- optimizer ----

func (b *Backend) Adam(a backend.AdamStep, w, g, m, v backend.View) {
	if g.Len != w.Len || m.Len != w.Len || v.Len != w.Len {
		panic(fmt.Sprintf("backend/cuda: adam on %v, %v, %v, %v", w, g, m, v))
	}
	b.launch(KAdam, w.Len, ptr(w, backend.Float32), ptr(g, backend.Float32), ptr(m, backend.Float32), ptr(v, backend.Float32), w.Len,
		a.StepSize, a.SqrtBC2, a.Beta1, a.Beta2, a.OneMinusBeta1, a.OneMinusBeta2, a.Eps, a.WeightDecay, a.DecoupledScale, b.entryPtr(a.Entry))
}

func (b *Backend) SGD(a backend.SGDStep, w, g, buf backend.View) {
	if g.Len != w.Len || (a.Momentum != 0 && buf.Len != w.Len) {
		panic(fmt.Sprintf("backend/cuda: sgd on %v, %v, %v", w, g, buf))
	}
	b.launch(KSGD, w.Len, ptr(w, backend.Float32), ptr(g, backend.Float32), ptr(buf, backend.Float32), w.Len,
		a.LR, a.Momentum, a.Dampening, a.WeightDecay, a.Nesterov, a.First, b.entryPtr(a.Entry))
}

func (b *Backend) RMSprop(a backend.RMSpropStep, w, g, sq, buf backend.View) {
	if g.Len != w.Len || sq.Len != w.Len || (a.Momentum != 0 && buf.Len != w.Len) {
		panic(fmt.Sprintf("backend/cuda: rmsprop on %v, %v, %v, %v", w, g, sq, buf))
	}
	b.launch(KRMSprop, w.Len, ptr(w, backend.Float32), ptr(g, backend.Float32), ptr(sq, backend.Float32), ptr(buf, backend.Float32), w.Len,
		a.LR, a.Alpha, a.OneMinusAlpha, a.Eps, a.WeightDecay, a.Momentum, b.entryPtr(a.Entry))
}

// UnscaleCheck reports false (not finite) where the device has failed;
// Sync returns its error. Every view's kernel raises one flag, which is
// read back once: a step's one blocking copy for its gradients.
func (b *Backend) UnscaleCheck(gs []backend.View, inv float32) bool {
	b.RecordUnscaleCheck(gs, inv)
	got, err := b.fetch(b.scratchPtr(0, 4), 4)
	return err == nil && binary.LittleEndian.Uint32(got) == 0
}
