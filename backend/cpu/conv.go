package cpu

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// The convolutions run the fast kernels (packed GEMM over an implicit
// im2col, AVX2/AVX-512 where the CPU has them) one image at a time, with
// one image's workspace.

// Conv is kernels.Conv2d per image.
func (CPU) Conv(s backend.ConvShape, out, in, w, bias, ws backend.View) {
	one := s.Images(1)
	o, x, wv, b, scratch := f32(out), f32(in), f32(w), f32(bias), f32(ws)
	inImage, outImage := one.InSize(), one.OutSize()
	for n := 0; n < s.N; n++ {
		kernels.Conv2d(one, o[n*outImage:(n+1)*outImage], x[n*inImage:(n+1)*inImage], wv, b, scratch)
	}
}

// ConvBack is kernels.Conv2dBackward per image.
func (CPU) ConvBack(s backend.ConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	one := s.Images(1)
	dx, dwv, db, dy, x, wv, scratch := f32(din), f32(dw), f32(dbias), f32(dout), f32(in), f32(w), f32(ws)
	inImage, outImage := one.InSize(), one.OutSize()
	for n := 0; n < s.N; n++ {
		var dxn []float32
		if dx != nil {
			dxn = dx[n*inImage : (n+1)*inImage]
		}
		kernels.Conv2dBackward(one, dxn, dwv, db, dy[n*outImage:(n+1)*outImage], x[n*inImage:(n+1)*inImage], wv, scratch)
	}
}

// UpConv is kernels.UpConv per image.
func (CPU) UpConv(s backend.UpConvShape, out, in, w, bias, ws backend.View) {
	one := s.Images(1)
	o, x, wv, b, scratch := f32(out), f32(in), f32(w), f32(bias), f32(ws)
	inImage, outImage := one.InSize(), one.OutSize()
	for n := 0; n < s.N; n++ {
		kernels.UpConv(one, o[n*outImage:(n+1)*outImage], x[n*inImage:(n+1)*inImage], wv, b, scratch)
	}
}

// UpConvBack is kernels.UpConvBackward per image.
func (CPU) UpConvBack(s backend.UpConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	one := s.Images(1)
	dx, dwv, db, dy, x, wv, scratch := f32(din), f32(dw), f32(dbias), f32(dout), f32(in), f32(w), f32(ws)
	inImage, outImage := one.InSize(), one.OutSize()
	for n := 0; n < s.N; n++ {
		var dxn []float32
		if dx != nil {
			dxn = dx[n*inImage : (n+1)*inImage]
		}
		kernels.UpConvBackward(one, dxn, dwv, db, dy[n*outImage:(n+1)*outImage], x[n*inImage:(n+1)*inImage], wv, scratch)
	}
}
