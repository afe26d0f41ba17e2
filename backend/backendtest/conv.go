package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
)

// convShapes cover K=3 with and without padding, 1x1 (a plain product per
// image), K=5 pad 2 over an image smaller than the kernel, a single pixel,
// and one shape large enough (N*OH*OW > 1024, C and OC not multiples of a
// vector width) for the tiled paths of a fast implementation.
var convShapes = []backend.ConvShape{
	{N: 2, C: 3, H: 5, W: 7, OC: 5, K: 3, Pad: 1},
	{N: 1, C: 5, H: 7, W: 5, OC: 3, K: 3, Pad: 0},
	{N: 3, C: 3, H: 3, W: 5, OC: 1, K: 1, Pad: 0},
	{N: 1, C: 1, H: 1, W: 1, OC: 3, K: 1, Pad: 0},
	{N: 2, C: 1, H: 2, W: 3, OC: 3, K: 5, Pad: 2},
	{N: 1, C: 1, H: 1, W: 1, OC: 1, K: 3, Pad: 1},
	{N: 2, C: 9, H: 24, W: 23, OC: 17, K: 3, Pad: 1},
	// 3D (N,C,D,H,W): 3x3x3 with and without padding, 1x3x3 (anisotropic),
	// 1x1x1 (a plain product per volume), a single voxel, depth padding
	// over a 1x1 kernel, and two large enough for the 2D kernels' tiled
	// and gather paths under each output slice (32-pixel rows; OC a
	// multiple of 8; 64-pixel rows for the transposed weight gradient).
	{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 5, K: 3, Pad: 1, KD: 3, PadD: 1},
	{N: 1, C: 3, D: 5, H: 4, W: 3, OC: 2, K: 3, Pad: 0, KD: 3, PadD: 0},
	{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 4, K: 3, Pad: 1, KD: 1, PadD: 0},
	{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 5, K: 1, Pad: 0, KD: 1, PadD: 0},
	{N: 1, C: 1, D: 1, H: 1, W: 1, OC: 3, K: 3, Pad: 1, KD: 3, PadD: 1},
	{N: 1, C: 2, D: 2, H: 3, W: 3, OC: 3, K: 1, Pad: 0, KD: 3, PadD: 1},
	{N: 2, C: 3, D: 3, H: 8, W: 32, OC: 16, K: 3, Pad: 1, KD: 3, PadD: 1},
	{N: 1, C: 3, D: 3, H: 3, W: 64, OC: 16, K: 3, Pad: 1, KD: 3, PadD: 1},
}

var upConvShapes = []backend.UpConvShape{
	{N: 1, C: 1, H: 1, W: 1, OC: 1},
	{N: 2, C: 3, H: 3, W: 5, OC: 5},
	{N: 3, C: 5, H: 2, W: 1, OC: 3},
	{N: 2, C: 9, H: 12, W: 11, OC: 17},
	// 3D: 2x2x2 and 1x2x2 (anisotropic), odd sizes, and a larger one.
	{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 4, KD: 2},
	{N: 1, C: 3, D: 3, H: 5, W: 7, OC: 2, KD: 1},
	{N: 1, C: 1, D: 1, H: 1, W: 1, OC: 1, KD: 2},
	{N: 2, C: 9, D: 3, H: 6, W: 11, OC: 17, KD: 2},
}

func convName(dt backend.DType, s backend.ConvShape) string {
	if s.Is3D() {
		return fmt.Sprintf("%s/N%dC%dD%dH%dW%d_OC%dK%dx%dP%dx%d", dt, s.N, s.C, s.D, s.H, s.W, s.OC, s.KDepth(), s.K, s.PadD, s.Pad)
	}
	return fmt.Sprintf("%s/N%dC%dH%dW%d_OC%dK%dP%d", dt, s.N, s.C, s.H, s.W, s.OC, s.K, s.Pad)
}

func upConvName(dt backend.DType, s backend.UpConvShape) string {
	if s.Is3D() {
		return fmt.Sprintf("%s/N%dC%dD%dH%dW%d_OC%dK%dx2", dt, s.N, s.C, s.D, s.H, s.W, s.OC, s.KDepth())
	}
	return fmt.Sprintf("%s/N%dC%dH%dW%d_OC%d", dt, s.N, s.C, s.H, s.W, s.OC)
}

// workspace is n float32 values prefilled with NaN (their contents are
// unspecified on entry), between guards: an operation that reads it before
// writing, or needs more than the Sizer said, shows.
func (c *check) workspace(n int) backend.View {
	c.Helper()
	if n < 0 {
		c.Fatalf("negative workspace %d", n)
	}
	return c.output(backend.Float32, n)
}

// TF32 is a backend whose fp32 convolutions may run on tensor cores with
// their operands rounded to TF32 (the CUDA backend's cuda.tf32): they are
// held to tolTF32.
type TF32 interface {
	ConvTF32() bool
}

// WeightGradRounder is a backend whose 16-bit convolutions may round a
// weight gradient to their 16-bit type before adding it to the fp32 one
// (the CUDA backend with a library's convolutions, as cuDNN's: its
// weight gradient is of the tensors' type, as in PyTorch's autocast):
// those are held to that type's tolerance.
type WeightGradRounder interface {
	RoundsWeightGrads() bool
}

// convTol is the tolerance of a convolution's output or input gradient
// stored as dt.
func (s *suite) convTol(dt backend.DType) float64 {
	if t, ok := s.b.(TF32); ok && dt == backend.Float32 && t.ConvTF32() {
		return tolTF32
	}
	return tolFor(dt, tolReduction)
}

// weightTol is the tolerance of a convolution's weight gradient (fp32)
// from tensors stored as dt, a sum over depth pixels: with TF32, tolTF32
// for up to 256 (PyTorch's tests sum far fewer), growing as the square
// root beyond (rounding errors of random sign add up as a random walk);
// dt's tolerance where the backend rounds it to dt (WeightGradRounder).
func (s *suite) weightTol(dt backend.DType, depth int) float64 {
	if t, ok := s.b.(TF32); ok && dt == backend.Float32 && t.ConvTF32() {
		return tolTF32 * math.Sqrt(max(1, float64(depth)/256))
	}
	if r, ok := s.b.(WeightGradRounder); ok && dt.Half() && r.RoundsWeightGrads() {
		return tolFor(dt, tolReduction)
	}
	return tolReduction
}

// Activations and weights are stored as dt, as the shape's DT says (the
// tensors a backend that computes on 16-bit types takes as they are);
// bias, weight and bias gradients and workspace are fp32 (parameters'
// masters and gradients).

func (s *suite) testConv(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpConv) {
		for _, sh := range convShapes {
			sh.DT = dt
			for _, bias := range []bool{true, false} {
				s.run(t, convName(dt, sh)+biasName(bias), func(c *check) {
					x, w := c.signed(sh.InSize()), c.signed(sh.WeightSize())
					var b []float32
					in, wv := c.input(dt, x), c.input(dt, w)
					var bv backend.View
					if bias {
						b = c.signed(sh.OC)
						bv = c.input(backend.Float32, b)
					}
					out := c.output(dt, sh.OutSize())
					ws := c.workspace(s.b.ConvWorkspace(sh))
					s.b.Conv(sh, out, in, wv, bv, ws)
					c.near("out", c.get(out), refConv(sh, f64(x), f64(w), f64(b)), s.convTol(dt))
				})
			}
		}
	}
}

func biasName(bias bool) string {
	if bias {
		return "/bias"
	}
	return "/nobias"
}

func (s *suite) testConvBack(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpConv) {
		for _, sh := range convShapes {
			sh.DT = dt
			for _, withDin := range []bool{true, false} {
				for _, bias := range []bool{true, false} {
					name := convName(dt, sh)
					if withDin {
						name += "/din"
					} else {
						name += "/nodin"
					}
					s.run(t, name+biasName(bias), func(c *check) {
						x, w, g := c.signed(sh.InSize()), c.signed(sh.WeightSize()), c.signed(sh.OutSize())
						dw0 := c.signed(sh.WeightSize())
						in, wv, dout := c.input(dt, x), c.input(dt, w), c.input(dt, g)
						dw := c.input(backend.Float32, dw0)
						var db0 []float32
						var dbias, din backend.View
						if bias {
							db0 = c.signed(sh.OC)
							dbias = c.input(backend.Float32, db0)
						}
						if withDin {
							din = c.output(dt, sh.InSize())
						}
						ws := c.workspace(s.b.ConvWorkspace(sh))
						wantDw, wantDb := f64(dw0), f64(db0)
						wantDin := refConvBack(sh, wantDw, wantDb, f64(g), f64(x), f64(w))
						s.b.ConvBack(sh, din, dw, dbias, dout, in, wv, ws)
						if withDin {
							c.near("din", c.get(din), wantDin, s.convTol(dt))
						}
						c.near("dw (accumulated)", c.get(dw), wantDw, s.weightTol(dt, sh.N*sh.OD()*sh.OH()*sh.OW()))
						if bias {
							c.near("dbias (accumulated)", c.get(dbias), wantDb, tolReduction)
						}
						c.unchanged("dout", dout, encode(dt, g))
					})
				}
			}
		}
	}
}

// UpConv's contract names no optional views: bias, din and dbias are
// always given.

func (s *suite) testUpConv(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpConv) {
		for _, sh := range upConvShapes {
			sh.DT = dt
			s.run(t, upConvName(dt, sh), func(c *check) {
				x, w, b := c.signed(sh.InSize()), c.signed(sh.WeightSize()), c.signed(sh.OC)
				in, wv, bv := c.input(dt, x), c.input(dt, w), c.input(backend.Float32, b)
				out := c.output(dt, sh.OutSize())
				ws := c.workspace(s.b.UpConvWorkspace(sh))
				s.b.UpConv(sh, out, in, wv, bv, ws)
				c.near("out", c.get(out), refUpConv(sh, f64(x), f64(w), f64(b)), s.convTol(dt))
			})
		}
	}
}

func (s *suite) testUpConvBack(t *testing.T) {
	for _, dt := range s.layerTypes(backend.OpConv) {
		for _, sh := range upConvShapes {
			sh.DT = dt
			s.run(t, upConvName(dt, sh), func(c *check) {
				x, w, g := c.signed(sh.InSize()), c.signed(sh.WeightSize()), c.signed(sh.OutSize())
				dw0, db0 := c.signed(sh.WeightSize()), c.signed(sh.OC)
				in, wv, dout := c.input(dt, x), c.input(dt, w), c.input(dt, g)
				dw, dbias := c.input(backend.Float32, dw0), c.input(backend.Float32, db0)
				din := c.output(dt, sh.InSize())
				ws := c.workspace(s.b.UpConvWorkspace(sh))
				wantDw, wantDb := f64(dw0), f64(db0)
				wantDin := refUpConvBack(sh, wantDw, wantDb, f64(g), f64(x), f64(w))
				s.b.UpConvBack(sh, din, dw, dbias, dout, in, wv, ws)
				c.near("din", c.get(din), wantDin, s.convTol(dt))
				c.near("dw (accumulated)", c.get(dw), wantDw, s.weightTol(dt, sh.N*sh.Depth()*sh.H*sh.W))
				c.near("dbias (accumulated)", c.get(dbias), wantDb, tolReduction)
				c.unchanged("dout", dout, encode(dt, g))
			})
		}
	}
}
