package kernels

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend"
)

// unetConvShapes are the 3x3 convolutions of the seed UNet (base 16, depth
// 4, batch 4, 3x128x128): the narrow, large-image layers at the top are
// where a step's time goes at this width.
var unetConvShapes = []struct{ c, oc, hw int }{
	{3, 16, 128}, {16, 16, 128}, {16, 32, 64}, {32, 32, 64}, {32, 64, 32}, {64, 64, 32},
	{64, 128, 16}, {128, 128, 16}, {128, 256, 8}, {256, 256, 8},
	{384, 128, 16}, {192, 64, 32}, {96, 32, 64}, {48, 16, 128},
}

// BenchmarkConvUNet times each of the seed UNet's convolutions forward and
// backward (with din, as every layer but the first needs), for comparison
// with PyTorch layer by layer.
func BenchmarkConvUNet(b *testing.B) {
	for _, sh := range unetConvShapes {
		s := backend.ConvShape{N: 4, C: sh.c, H: sh.hw, W: sh.hw, OC: sh.oc, K: 3, Pad: 1}
		r := seedFor("bench")
		in, w, dout := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OutSize())
		out, ws := make([]float32, s.OutSize()), make([]float32, ConvWorkspace(s))
		din, dw := make([]float32, s.InSize()), make([]float32, s.WeightSize())
		name := fmt.Sprintf("%d-%d@%d", sh.c, sh.oc, sh.hw)
		b.Run("fwd/"+name, func(b *testing.B) {
			for range b.N {
				Conv2d(s, out, in, w, nil, ws)
			}
			reportGFLOPs(b, convFlops(s))
		})
		b.Run("bwd/"+name, func(b *testing.B) {
			for range b.N {
				Conv2dBackward(s, din, dw, nil, dout, in, w, ws)
			}
			reportGFLOPs(b, 2*convFlops(s))
		})
	}
}
