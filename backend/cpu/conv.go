package cpu

import (
	"github.com/memunet/memunet/backend"
)

// The convolutions run the fast kernels (packed GEMM over an implicit
// im2col, AVX2/AVX-512 where the CPU has them) one image at a time, with
// one image's workspace.

// Conv is kernels.Conv2d per image.
func (c CPU) Conv(s backend.ConvShape, out, in, w, bias, ws backend.View) {
	one := s.Images(1)
	o, x := f32(out), f32(in)
	for k := range s.N {
		c.team.Conv2d(one, image(o, one.OutSize(), k), image(x, one.InSize(), k), f32(w), f32(bias), f32(ws))
	}
}

// ConvBack is kernels.Conv2dBackward per image.
func (c CPU) ConvBack(s backend.ConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	one := s.Images(1)
	dx, dy, x := f32(din), f32(dout), f32(in)
	for k := range s.N {
		c.team.Conv2dBackward(one, image(dx, one.InSize(), k), f32(dw), f32(dbias),
			image(dy, one.OutSize(), k), image(x, one.InSize(), k), f32(w), f32(ws))
	}
}

// UpConv is kernels.UpConv per image.
func (c CPU) UpConv(s backend.UpConvShape, out, in, w, bias, ws backend.View) {
	one := s.Images(1)
	o, x := f32(out), f32(in)
	for k := range s.N {
		c.team.UpConv(one, image(o, one.OutSize(), k), image(x, one.InSize(), k), f32(w), f32(bias), f32(ws))
	}
}

// UpConvBack is kernels.UpConvBackward per image.
func (c CPU) UpConvBack(s backend.UpConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	one := s.Images(1)
	dx, dy, x := f32(din), f32(dout), f32(in)
	for k := range s.N {
		c.team.UpConvBackward(one, image(dx, one.InSize(), k), f32(dw), f32(dbias),
			image(dy, one.OutSize(), k), image(x, one.InSize(), k), f32(w), f32(ws))
	}
}

// image is image k of a batch of images of size values each (nil for nil).
func image(batch []float32, size, k int) []float32 {
	if batch == nil {
		return nil
	}
	return batch[k*size : (k+1)*size]
}
