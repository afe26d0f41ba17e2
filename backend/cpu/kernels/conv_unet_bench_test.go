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

// BenchmarkConvUNet times each of the seed UNet's convolutions forward,
// backward (with din, as every layer but the first needs) and the weight
// gradient alone (dw; bwd less dw is the input gradient) over a batch of
// 4 the way the CPU backend runs them, one image per call with one image's
// workspace, on a team, for comparison with PyTorch layer by layer.
func BenchmarkConvUNet(b *testing.B) {
	const batch = 4
	team := NewTeam()
	for _, sh := range unetConvShapes {
		s := backend.ConvShape{N: 1, C: sh.c, H: sh.hw, W: sh.hw, OC: sh.oc, K: 3, Pad: 1}
		r := seedFor("bench")
		in, w, dout := randSlice(r, batch*s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, batch*s.OutSize())
		out, ws := make([]float32, batch*s.OutSize()), make([]float32, ConvWorkspace(s))
		din, dw := make([]float32, batch*s.InSize()), make([]float32, s.WeightSize())
		image := func(x []float32, size, k int) []float32 { return x[k*size : (k+1)*size] }
		name := fmt.Sprintf("%d-%d@%d", sh.c, sh.oc, sh.hw)
		b.Run("fwd/"+name, func(b *testing.B) {
			for range b.N {
				for k := range batch {
					team.Conv2d(s, image(out, s.OutSize(), k), image(in, s.InSize(), k), w, nil, ws)
				}
			}
			reportGFLOPs(b, batch*convFlops(s))
		})
		b.Run("bwd/"+name, func(b *testing.B) {
			for range b.N {
				for k := range batch {
					team.Conv2dBackward(s, image(din, s.InSize(), k), dw, nil, image(dout, s.OutSize(), k), image(in, s.InSize(), k), w, ws)
				}
			}
			reportGFLOPs(b, 2*batch*convFlops(s))
		})
		// The weight gradient alone: bwd less this is the input gradient.
		b.Run("dw/"+name, func(b *testing.B) {
			for range b.N {
				for k := range batch {
					team.Conv2dBackward(s, nil, dw, nil, image(dout, s.OutSize(), k), image(in, s.InSize(), k), w, ws)
				}
			}
			reportGFLOPs(b, batch*convFlops(s))
		})
	}
}

// BenchmarkConvUNetWinograd is BenchmarkConvUNet the Winograd way, for
// the shapes it takes (fwd4: the forward with F(4x4,3x3)): the batch in one call, the filter transformed
// once per call, as the CPU backend runs it (GFLOP/s of the direct
// convolution's FLOPs, for comparison).
func BenchmarkConvUNetWinograd(b *testing.B) {
	const batch = 4
	team := NewTeam()
	for _, sh := range unetConvShapes {
		s := backend.ConvShape{N: batch, C: sh.c, H: sh.hw, W: sh.hw, OC: sh.oc, K: 3, Pad: 1, Algo: backend.ConvWinograd}
		if !winoShapeOK(s) {
			continue
		}
		r := seedFor("bench")
		in, w, dout := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OutSize())
		out, ws := make([]float32, s.OutSize()), make([]float32, ConvWorkspace(s.Images(1)))
		din, dw := make([]float32, s.InSize()), make([]float32, s.WeightSize())
		name := fmt.Sprintf("%d-%d@%d", sh.c, sh.oc, sh.hw)
		b.Run("fwd/"+name, func(b *testing.B) {
			for range b.N {
				u, rest := team.WinogradFilter(s, Wino2, w, ws, false)
				team.ConvWinograd(s, Wino2, out, Float32Image(in), u, nil, rest)
			}
			reportGFLOPs(b, convFlops(s))
		})
		if winoTileOK(s, Wino4) {
			// F(4x4,3x3)'s forward, in its own workspace.
			one, unlimited := s.Images(1), int(^uint(0)>>1)
			ws4 := make([]float32, max(len(ws), winoForwardNeed(one, Wino4, winoForwardRows(one, Wino4, unlimited))))
			b.Run("fwd4/"+name, func(b *testing.B) {
				for range b.N {
					u, rest := team.WinogradFilter(s, Wino4, w, ws4, false)
					team.ConvWinograd(s, Wino4, out, Float32Image(in), u, nil, rest)
				}
				reportGFLOPs(b, convFlops(s))
			})
		}
		dwOnly := func() {
			g := gemmOn(team)
			du, rest := g.carve(ws, WinogradFilterSize(s, Wino2))
			clear(du)
			team.WinogradWeightGrad(s, Wino2, du, dout, Float32Image(in), rest)
			team.WinogradWeightGradAdd(s, Wino2, dw, du, rest)
		}
		b.Run("bwd/"+name, func(b *testing.B) {
			for range b.N {
				u, rest := team.WinogradFilter(s, Wino2, w, ws, true)
				team.ConvWinograd(WinogradSwapped(s), Wino2, din, Float32Image(dout), u, nil, rest)
				dwOnly()
			}
			reportGFLOPs(b, 2*convFlops(s))
		})
		b.Run("dw/"+name, func(b *testing.B) {
			for range b.N {
				dwOnly()
			}
			reportGFLOPs(b, convFlops(s))
		})
	}
}
