package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// The convolutions run the fast kernels (packed GEMM over an implicit
// im2col, AVX2/AVX-512 where the CPU has them) one image at a time, with
// one image's workspace; or, where s.Algo asks for it and
// kernels.PlanConv takes it, Winograd's F(2x2,3x3) or F(4x4,3x3) kernels
// (the batch at once, in the same workspace). With 16-bit tensors (s.DT) the workspace also
// holds the float32 weights and one image's float32 output (or output
// gradient and input gradient): the input is widened as the kernels pad
// it, so it needs no float32 copy (a 1x1 convolution, which reads it
// unpadded, widens it into the workspace too). Same bits as the float32
// operation on widened copies, outputs rounded once.

// ConvWorkspace is one image's workspace (Conv and ConvBack run the images
// of a batch one at a time), plus halfConvScratch for 16-bit tensors.
func (CPU) ConvWorkspace(s backend.ConvShape) int {
	if s.Is3D() {
		return conv3Workspace(s)
	}
	return kernels.ConvWorkspace(s.Images(1)) + halfConvScratch(s)
}

// halfConvScratch is the float32 copies a 16-bit convolution keeps in its
// workspace (0 for fp32): the weights, one image's output or output
// gradient and one image's input gradient, and one image's input where the
// convolution is Direct.
func halfConvScratch(s backend.ConvShape) int {
	if !s.DT.Half() {
		return 0
	}
	one := s.Images(1)
	n := s.WeightSize() + one.OutSize() + one.InSize()
	if s.Direct() {
		n += one.InSize()
	}
	return n
}

// UpConvWorkspace is one image's workspace, plus, for 16-bit tensors, the
// float32 weights and one image's input, output (or output gradient) and
// input gradient.
func (CPU) UpConvWorkspace(s backend.UpConvShape) int {
	if s.Is3D() {
		return upConv3Workspace(s)
	}
	one := s.Images(1)
	n := kernels.UpConvWorkspace(one)
	if s.DT.Half() {
		n += s.WeightSize() + 2*one.InSize() + one.OutSize()
	}
	return n
}

// carver cuts consecutive float32 views off a workspace.
type carver struct{ rest backend.View }

func (c *carver) take(n int) backend.View {
	v := c.rest.Slice(0, n)
	c.rest = c.rest.Slice(n, c.rest.Len)
	return v
}

// checkConvTypes panics unless the activations and weights are s.DT.
func checkConvTypes(op string, dt backend.DType, vs ...backend.View) {
	for _, v := range vs {
		if !v.None() && v.DT != dt {
			panic(fmt.Sprintf("backend/cpu: %s of %s tensors given %v", op, dt, v))
		}
	}
}

// Conv is kernels.Conv2d per image, or the Winograd kernels over the
// batch where kernels.PlanConv takes them (the filter transformed once).
func (c CPU) Conv(s backend.ConvShape, out, in, w, bias, ws backend.View) {
	checkConvTypes("conv", s.DT, out, in, w)
	if s.Is3D() {
		checkConv3(s, out, in, w, bias, ws, c.ConvWorkspace(s))
		c.conv3(s, out, in, w, bias, ws)
		return
	}
	one := s.Images(1)
	I, O := one.InSize(), one.OutSize()
	if !s.DT.Half() {
		o, x := f32(out), f32(in)
		if plan := kernels.PlanConv(s, ws.Len); plan.Forward {
			u, rest := c.team.WinogradFilter(s, plan.Tile, f32(w), f32(ws), false)
			c.team.ConvWinograd(s, plan.Tile, o, kernels.Float32Image(x), u, f32(bias), rest)
			return
		}
		for k := range s.N {
			c.team.Conv2d(one, image(o, O, k), image(x, I, k), f32(w), f32(bias), f32(ws))
		}
		return
	}
	cut := carver{ws}
	wf, y := cut.take(s.WeightSize()), cut.take(O)
	cut.take(I) // the input gradient's, in backward
	var x backend.View
	if s.Direct() {
		x = cut.take(I)
	}
	c.Convert(wf, w)
	if plan := kernels.PlanConv(s, cut.rest.Len); plan.Forward {
		u, rest := c.team.WinogradFilter(one, plan.Tile, f32(wf), f32(cut.rest), false)
		for k := range s.N {
			c.team.ConvWinograd(one, plan.Tile, f32(y), c.imageOf(s.DT, in.Slice(k*I, (k+1)*I), x), u, f32(bias), rest)
			c.Convert(out.Slice(k*O, (k+1)*O), y)
		}
		return
	}
	for k := range s.N {
		c.team.Conv2dImage(one, f32(y), c.imageOf(s.DT, in.Slice(k*I, (k+1)*I), x), f32(wf), f32(bias), f32(cut.rest))
		c.Convert(out.Slice(k*O, (k+1)*O), y)
	}
}

// imageOf is one 16-bit image as the kernels read it: as it is, or, where
// wide is given (a Direct convolution's), widened into wide.
func (c CPU) imageOf(dt backend.DType, v, wide backend.View) kernels.Image {
	if wide.None() {
		return kernels.HalfImage(dt, u16(v))
	}
	c.Convert(wide, v)
	return kernels.Float32Image(f32(wide))
}

// ConvBack is kernels.Conv2dBackward per image, or where
// kernels.PlanConv takes them the Winograd kernels for the input gradient
// (over the batch, the flipped filter transformed once) and the weight
// gradient (its transformed sums over the batch, then dw +=). The weight
// gradient goes the Winograd way only with the input gradient's (or none):
// the direct kernels compute both at once.
func (c CPU) ConvBack(s backend.ConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	checkConvTypes("conv backward", s.DT, din, dout, in, w)
	if s.Is3D() {
		checkConv3(s, dout, in, w, dbias, ws, c.ConvWorkspace(s))
		if !din.None() && din.Len != s.InSize() || dw.Len != s.WeightSize() {
			panic(fmt.Sprintf("backend/cpu: conv backward %+v given din %v, dw %v", s, din, dw))
		}
		c.conv3Back(s, din, dw, dbias, dout, in, w, ws)
		return
	}
	one := s.Images(1)
	I, O := one.InSize(), one.OutSize()
	if !s.DT.Half() {
		plan := kernels.PlanConv(s, ws.Len)
		winoDin := !din.None() && plan.InputGrad
		if winoDin {
			u, rest := c.team.WinogradFilter(s, plan.Tile, f32(w), f32(ws), true)
			c.team.ConvWinograd(kernels.WinogradSwapped(s), plan.Tile, f32(din), kernels.Float32Image(f32(dout)), u, nil, rest)
			din = backend.View{}
		}
		if plan.WeightGrad && din.None() {
			c.winogradWeightGrad(s, plan.GradTile, dw, dbias, ws, func(do func(dy []float32, x kernels.Image)) {
				do(f32(dout), kernels.Float32Image(f32(in)))
			})
			return
		}
		imagesBackF32(s.N, I, O, din, dout, in, func(dx, dy, x []float32) {
			c.team.Conv2dBackward(one, dx, f32(dw), f32(dbias), dy, x, f32(w), f32(ws))
		})
		return
	}
	cut := carver{ws}
	wf, g, dx := cut.take(s.WeightSize()), cut.take(O), cut.take(I)
	var x backend.View
	if s.Direct() {
		x = cut.take(I)
	}
	c.Convert(wf, w)
	plan := kernels.PlanConv(s, cut.rest.Len)
	if !din.None() && plan.InputGrad {
		u, rest := c.team.WinogradFilter(one, plan.Tile, f32(wf), f32(cut.rest), true)
		for k := range s.N {
			c.Convert(g, dout.Slice(k*O, (k+1)*O))
			c.team.ConvWinograd(kernels.WinogradSwapped(one), plan.Tile, f32(dx), kernels.Float32Image(f32(g)), u, nil, rest)
			c.Convert(din.Slice(k*I, (k+1)*I), dx)
		}
		din = backend.View{}
	}
	if plan.WeightGrad && din.None() {
		c.winogradWeightGrad(one, plan.GradTile, dw, dbias, cut.rest, func(do func(dy []float32, x kernels.Image)) {
			for k := range s.N {
				c.Convert(g, dout.Slice(k*O, (k+1)*O))
				do(f32(g), c.imageOf(s.DT, in.Slice(k*I, (k+1)*I), x))
			}
		})
		return
	}
	c.imagesBack(s.N, I, O, din, dout, g, dx, func(k int, dxk []float32) {
		c.team.Conv2dBackwardImage(one, dxk, f32(dw), f32(dbias), f32(g),
			c.imageOf(s.DT, in.Slice(k*I, (k+1)*I), x), f32(wf), f32(cut.rest))
	})
}

// winogradWeightGrad adds the weight (and bias) gradient of the images
// that each gives (float32 output gradients, inputs as the kernels read
// them, of s's shape each) to dw (and dbias): their transformed sums (m x
// m tiles) in ws, then dw += G^T sum G.
func (c CPU) winogradWeightGrad(s backend.ConvShape, m kernels.WinoTile, dw, dbias, ws backend.View, each func(do func(dy []float32, x kernels.Image))) {
	cut := carver{ws}
	du := f32(cut.take(kernels.WinogradFilterSize(s, m)))
	clear(du)
	each(func(dy []float32, x kernels.Image) {
		n := len(dy) / s.Images(1).OutSize()
		c.team.WinogradWeightGrad(s.Images(n), m, du, dy, x, f32(cut.rest))
		if !dbias.None() {
			c.team.ConvBiasGrad(s.Images(n), f32(dbias), dy)
		}
	})
	c.team.WinogradWeightGradAdd(s, m, f32(dw), du, f32(cut.rest))
}

// imagesBackF32 runs back on each of n fp32 images' slices of din (nil
// where din is none), dout and in (I input and O output values each).
func imagesBackF32(n, I, O int, din, dout, in backend.View, back func(dx, dy, x []float32)) {
	dx, dy, x := f32(din), f32(dout), f32(in)
	for k := range n {
		back(image(dx, I, k), image(dy, O, k), image(x, I, k))
	}
}

// imagesBack runs back for each of n images k (I input and O output
// values each) with image k of dout widened into g, and passes it where to
// write its input gradient: dx, narrowed into din's image k afterwards, or
// nil where din is none.
func (c CPU) imagesBack(n, I, O int, din, dout, g, dx backend.View, back func(k int, dxk []float32)) {
	for k := range n {
		c.Convert(g, dout.Slice(k*O, (k+1)*O))
		if din.None() {
			back(k, nil)
			continue
		}
		back(k, f32(dx))
		c.Convert(din.Slice(k*I, (k+1)*I), dx)
	}
}

// UpConv is kernels.UpConv per image (16-bit images widened into the
// workspace).
func (c CPU) UpConv(s backend.UpConvShape, out, in, w, bias, ws backend.View) {
	checkConvTypes("transposed conv", s.DT, out, in, w)
	if s.Is3D() {
		checkUpConv3(s, out, in, w, bias, ws, c.UpConvWorkspace(s))
		c.upConv3(s, out, in, w, bias, ws)
		return
	}
	one := s.Images(1)
	I, O := one.InSize(), one.OutSize()
	if !s.DT.Half() {
		o, x := f32(out), f32(in)
		for k := range s.N {
			c.team.UpConv(one, image(o, O, k), image(x, I, k), f32(w), f32(bias), f32(ws))
		}
		return
	}
	cut := carver{ws}
	wf, x, y := cut.take(s.WeightSize()), cut.take(I), cut.take(O)
	cut.take(I) // the input gradient's, in backward
	c.Convert(wf, w)
	for k := range s.N {
		c.Convert(x, in.Slice(k*I, (k+1)*I))
		c.team.UpConv(one, f32(y), f32(x), f32(wf), f32(bias), f32(cut.rest))
		c.Convert(out.Slice(k*O, (k+1)*O), y)
	}
}

// UpConvBack is kernels.UpConvBackward per image (16-bit images widened
// into the workspace).
func (c CPU) UpConvBack(s backend.UpConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	checkConvTypes("transposed conv backward", s.DT, din, dout, in, w)
	if s.Is3D() {
		checkUpConv3(s, dout, in, w, dbias, ws, c.UpConvWorkspace(s))
		if !din.None() && din.Len != s.InSize() || dw.Len != s.WeightSize() {
			panic(fmt.Sprintf("backend/cpu: transposed conv backward %+v given din %v, dw %v", s, din, dw))
		}
		c.upConv3Back(s, din, dw, dbias, dout, in, w, ws)
		return
	}
	one := s.Images(1)
	I, O := one.InSize(), one.OutSize()
	if !s.DT.Half() {
		imagesBackF32(s.N, I, O, din, dout, in, func(dx, dy, x []float32) {
			c.team.UpConvBackward(one, dx, f32(dw), f32(dbias), dy, x, f32(w), f32(ws))
		})
		return
	}
	cut := carver{ws}
	wf, x, g, dx := cut.take(s.WeightSize()), cut.take(I), cut.take(O), cut.take(I)
	c.Convert(wf, w)
	c.imagesBack(s.N, I, O, din, dout, g, dx, func(k int, dxk []float32) {
		c.Convert(x, in.Slice(k*I, (k+1)*I))
		c.team.UpConvBackward(one, dxk, f32(dw), f32(dbias), f32(g), f32(x), f32(wf), f32(cut.rest))
	})
}

// image is image k of a batch of images of size values each (nil for nil).
func image(batch []float32, size, k int) []float32 {
	if batch == nil {
		return nil
	}
	return batch[k*size : (k+1)*size]
}
