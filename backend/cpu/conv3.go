package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// A 3D convolution (backend.ConvShape.Is3D) runs the 2D kernels one output
// slice at a time: output slice z reads input slices z+kd-PadD for kd in
// 0..KD-1, which, gathered as C*KD channels (c, kd) into the workspace
// (the "stack", zero planes where a slice lies in the depth padding), make
// a 2D convolution (ConvShape.Slices) whose weights (OC, C*KD, K, K) are
// the 3D weights (OC, C, KD, K, K) as they lie: an im2col with a depth
// index, the depth folded into the channels, over the packed GEMM and
// gather kernels of 2D. The slice's output (OC, OH*OW) is then copied to
// its place in the volume. Backward, the same stack and the output
// gradient's slice give dw and dbias (accumulated by the 2D kernels, in
// slice order) and the stack's input gradient, added slice by slice into
// din. 16-bit volumes are widened as they are gathered (and the input
// gradient summed in float32, narrowed once), so the kernels see float32
// only. A 1x1x1 convolution without padding is the 2D one over the
// volume's slices stacked in height.

// flat is a Direct 3D convolution as the 2D convolution over the slices
// stacked in height (the same products, in the same order).
func flat(s backend.ConvShape) backend.ConvShape {
	s.H *= s.Depth()
	s.D, s.KD, s.PadD = 0, 0, 0
	return s
}

// conv3Workspace is what Conv and ConvBack take for a 3D convolution: the
// 2D kernels' workspace for one slice, the stack, one output slice (or
// output-gradient slice) and the stack's input gradient, with 16-bit
// tensors also the float32 weights and one image's float32 input
// gradient.
func conv3Workspace(s backend.ConvShape) int {
	if s.Direct() {
		return CPU{}.ConvWorkspace(flat(s))
	}
	sl := s.Slices()
	n := kernels.ConvWorkspace(sl) + 2*sl.InSize() + sl.OutSize()
	if s.DT.Half() {
		n += s.WeightSize() + s.C*s.Depth()*s.H*s.W
	}
	return n
}

// conv3Buffers is a 3D convolution's workspace, carved.
type conv3Buffers struct {
	stack, y, dx, wf, acc []float32 // acc: a 16-bit image's float32 input gradient
	ws                    []float32
}

func (c CPU) conv3Buffers(s backend.ConvShape, w, ws backend.View) conv3Buffers {
	sl := s.Slices()
	cut := carver{ws}
	var b conv3Buffers
	b.stack, b.y, b.dx = f32(cut.take(sl.InSize())), f32(cut.take(sl.OutSize())), f32(cut.take(sl.InSize()))
	if s.DT.Half() {
		wf := cut.take(s.WeightSize())
		c.Convert(wf, w)
		b.wf = f32(wf)
		b.acc = f32(cut.take(s.C * s.Depth() * s.H * s.W))
	} else {
		b.wf = f32(w)
	}
	b.ws = f32(cut.rest)
	return b
}

// gatherStack writes output slice z's stack of image n of x (C*KD planes:
// input slices z-PadD .. z-PadD+KD-1 of each channel, zero outside the
// volume) into stack, widening 16-bit values.
func (c CPU) gatherStack(s backend.ConvShape, stack []float32, x values, n, z int) {
	D, KD, HW := s.Depth(), s.KDepth(), s.H*s.W
	d0 := z - s.PadD
	lo, hi := max(d0, 0), min(d0+KD, D) // the slices that lie in the volume
	c.team.For(s.C, 1, func(c0, c1 int) {
		for ch := c0; ch < c1; ch++ {
			planes := stack[ch*KD*HW : (ch+1)*KD*HW]
			if hi <= lo {
				clear(planes)
				continue
			}
			clear(planes[:(lo-d0)*HW])
			clear(planes[(hi-d0)*HW:])
			x.copyTo(planes[(lo-d0)*HW:(hi-d0)*HW], ((n*s.C+ch)*D+lo)*HW)
		}
	})
}

// conv3 is Conv of a 3D shape.
func (c CPU) conv3(s backend.ConvShape, out, in, w, bias, ws backend.View) {
	if s.Direct() {
		c.Conv(flat(s), out, in, w, bias, ws)
		return
	}
	sl, b := s.Slices(), c.conv3Buffers(s, w, ws)
	x, y := valuesOf(in), valuesOf(out)
	OD, P := s.OD(), s.OH()*s.OW()
	for n := range s.N {
		for z := range OD {
			c.gatherStack(s, b.stack, x, n, z)
			c.team.Conv2d(sl, b.y, b.stack, b.wf, f32(bias), b.ws)
			c.team.For(s.OC, 1, func(o0, o1 int) {
				for o := o0; o < o1; o++ {
					y.storeFrom(b.y[o*P:(o+1)*P], ((n*s.OC+o)*OD+z)*P)
				}
			})
		}
	}
}

// conv3Back is ConvBack of a 3D shape.
func (c CPU) conv3Back(s backend.ConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	if s.Direct() {
		c.ConvBack(flat(s), din, dw, dbias, dout, in, w, ws)
		return
	}
	sl, b := s.Slices(), c.conv3Buffers(s, w, ws)
	x, dy := valuesOf(in), valuesOf(dout)
	D, KD, OD, HW, P := s.Depth(), s.KDepth(), s.OD(), s.H*s.W, s.OH()*s.OW()
	image := s.C * D * HW
	for n := range s.N {
		// The image's input gradient, summed in float32: din's own where
		// fp32, else the workspace's, narrowed at the end.
		var acc []float32
		if !din.None() {
			acc = b.acc
			if din.DT == backend.Float32 {
				acc = f32(din)[n*image : (n+1)*image]
			}
			clear(acc)
		}
		for z := range OD {
			c.gatherStack(s, b.stack, x, n, z)
			c.team.For(s.OC, 1, func(o0, o1 int) {
				for o := o0; o < o1; o++ {
					dy.copyTo(b.y[o*P:(o+1)*P], ((n*s.OC+o)*OD+z)*P)
				}
			})
			var dx []float32
			if acc != nil {
				dx = b.dx
			}
			c.team.Conv2dBackward(sl, dx, f32(dw), f32(dbias), b.y, b.stack, b.wf, b.ws)
			if dx == nil {
				continue
			}
			d0 := z - s.PadD
			lo, hi := max(d0, 0), min(d0+KD, D)
			c.team.For(s.C, 1, func(c0, c1 int) {
				for ch := c0; ch < c1; ch++ {
					for d := lo; d < hi; d++ {
						dst := acc[(ch*D+d)*HW : (ch*D+d+1)*HW]
						src := dx[(ch*KD+d-d0)*HW : (ch*KD+d-d0+1)*HW]
						for i, v := range src {
							dst[i] += v
						}
					}
				}
			})
		}
		if acc != nil && din.DT != backend.Float32 {
			valuesOf(din).storeFrom(acc, n*image)
		}
	}
}

// upConv3Workspace is what UpConv and UpConvBack take for a 3D shape: the
// 2D kernels' workspace for one input slice (UpConvShape.Slice), that
// slice, its output (or output gradient) and input gradient, the bias
// repeated for the OC*KD channels and their bias gradient, with 16-bit
// tensors also the float32 weights.
func upConv3Workspace(s backend.UpConvShape) int {
	sl := s.Slice()
	n := kernels.UpConvWorkspace(sl) + 2*s.C*s.H*s.W + sl.OC*4*s.H*s.W + 2*sl.OC
	if s.DT.Half() {
		n += s.WeightSize()
	}
	return n
}

// upConv3Buffers is a 3D transposed convolution's workspace, carved.
type upConv3Buffers struct {
	x, y, dx, bias, dbias, wf, ws []float32
}

func (c CPU) upConv3Buffers(s backend.UpConvShape, w, ws backend.View) upConv3Buffers {
	sl := s.Slice()
	cut := carver{ws}
	var b upConv3Buffers
	b.x, b.y, b.dx = f32(cut.take(s.C*s.H*s.W)), f32(cut.take(sl.OC*4*s.H*s.W)), f32(cut.take(s.C*s.H*s.W))
	b.bias, b.dbias = f32(cut.take(sl.OC)), f32(cut.take(sl.OC))
	if s.DT.Half() {
		wf := cut.take(s.WeightSize())
		c.Convert(wf, w)
		b.wf = f32(wf)
	} else {
		b.wf = f32(w)
	}
	b.ws = f32(cut.rest)
	return b
}

// The 3D transposed convolution runs the 2D kernels one input slice at a
// time (UpConvShape.Slice): input slice z (its C planes gathered) gives
// output slices KD*z .. KD*z+KD-1 of every channel as the 2D one's OC*KD
// channels, copied to their place (KD consecutive planes per channel).

// upConv3 is UpConv of a 3D shape.
func (c CPU) upConv3(s backend.UpConvShape, out, in, w, bias, ws backend.View) {
	sl, b := s.Slice(), c.upConv3Buffers(s, w, ws)
	x, y := valuesOf(in), valuesOf(out)
	D, KD, HW := s.Depth(), s.KDepth(), s.H*s.W
	var bs []float32
	if !bias.None() {
		bs = b.bias
		for o, v := range f32(bias) {
			for kd := range KD {
				bs[o*KD+kd] = v
			}
		}
	}
	block := KD * 4 * HW // one channel's output slices from one input slice
	for n := range s.N {
		for z := range D {
			for ch := range s.C {
				x.copyTo(b.x[ch*HW:(ch+1)*HW], ((n*s.C+ch)*D+z)*HW)
			}
			c.team.UpConv(sl, b.y, b.x, b.wf, bs, b.ws)
			c.team.For(s.OC, 1, func(o0, o1 int) {
				for o := o0; o < o1; o++ {
					y.storeFrom(b.y[o*block:(o+1)*block], (n*s.OC+o)*D*block+z*block)
				}
			})
		}
	}
}

// upConv3Back is UpConvBack of a 3D shape: the bias gradient is summed
// per (oc, kd) channel over the volume, then over kd into dbias.
func (c CPU) upConv3Back(s backend.UpConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	sl, b := s.Slice(), c.upConv3Buffers(s, w, ws)
	x, dy, dx := valuesOf(in), valuesOf(dout), valuesOf(din)
	D, KD, HW := s.Depth(), s.KDepth(), s.H*s.W
	var db []float32
	if !dbias.None() {
		db = b.dbias
		clear(db)
	}
	var dxs []float32
	if !din.None() {
		dxs = b.dx
	}
	block := KD * 4 * HW
	for n := range s.N {
		for z := range D {
			for ch := range s.C {
				x.copyTo(b.x[ch*HW:(ch+1)*HW], ((n*s.C+ch)*D+z)*HW)
			}
			c.team.For(s.OC, 1, func(o0, o1 int) {
				for o := o0; o < o1; o++ {
					dy.copyTo(b.y[o*block:(o+1)*block], (n*s.OC+o)*D*block+z*block)
				}
			})
			c.team.UpConvBackward(sl, dxs, f32(dw), db, b.y, b.x, b.wf, b.ws)
			if dxs == nil {
				continue
			}
			for ch := range s.C {
				dx.storeFrom(dxs[ch*HW:(ch+1)*HW], ((n*s.C+ch)*D+z)*HW)
			}
		}
	}
	if db != nil {
		g := f32(dbias)
		for o := range s.OC {
			var sum float32
			for kd := range KD {
				sum += db[o*KD+kd]
			}
			g[o] += sum
		}
	}
}

// checkConv3 panics unless s is a valid 3D convolution and the views have
// its sizes (bias may be none; ws at least need values).
func checkConv3(s backend.ConvShape, out, in, w, bias, ws backend.View, need int) {
	if s.N <= 0 || s.C <= 0 || s.Depth() <= 0 || s.H <= 0 || s.W <= 0 || s.OC <= 0 || s.K <= 0 || s.KDepth() <= 0 ||
		s.Pad < 0 || s.PadD < 0 || s.OD() <= 0 || s.OH() <= 0 || s.OW() <= 0 {
		panic(fmt.Sprintf("backend/cpu: bad 3D conv shape %+v", s))
	}
	if out.Len != s.OutSize() || in.Len != s.InSize() || w.Len != s.WeightSize() || !bias.None() && bias.Len != s.OC || ws.Len < need {
		panic(fmt.Sprintf("backend/cpu: 3D conv %+v given out %v, in %v, w %v, bias %v, ws %v (%d needed)", s, out, in, w, bias, ws, need))
	}
}

// checkUpConv3 is checkConv3 for the 3D transposed convolution.
func checkUpConv3(s backend.UpConvShape, out, in, w, bias, ws backend.View, need int) {
	if s.N <= 0 || s.C <= 0 || s.Depth() <= 0 || s.H <= 0 || s.W <= 0 || s.OC <= 0 || s.KDepth() > 2 {
		panic(fmt.Sprintf("backend/cpu: bad 3D transposed conv shape %+v", s))
	}
	if out.Len != s.OutSize() || in.Len != s.InSize() || w.Len != s.WeightSize() || !bias.None() && bias.Len != s.OC || ws.Len < need {
		panic(fmt.Sprintf("backend/cpu: 3D transposed conv %+v given out %v, in %v, w %v, bias %v, ws %v (%d needed)", s, out, in, w, bias, ws, need))
	}
}
