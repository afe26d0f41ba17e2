package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/memunet/memunet/backend"
)

// TestWorkspaceIsEnough: with a workspace of exactly WorkspaceSize values
// the conv kernels carve everything they need from it and allocate no
// packing buffer of their own (the strict implementation panics if they
// would), forward and backward with and without din, on the odd-size grid,
// UNet-like shapes (few pixels, many channels) and at several GOMAXPROCS.
func TestWorkspaceIsEnough(t *testing.T) {
	shapes := append(convShapes(),
		backend.ConvShape{N: 1, C: 128, H: 8, W: 8, OC: 256, K: 3, Pad: 1},
		backend.ConvShape{N: 1, C: 48, H: 64, W: 64, OC: 16, K: 3, Pad: 1},
		backend.ConvShape{N: 1, C: 16, H: 128, W: 128, OC: 16, K: 3, Pad: 1},
		backend.ConvShape{N: 1, C: 256, H: 4, W: 4, OC: 256, K: 3, Pad: 1},
		backend.ConvShape{N: 1, C: 16, H: 64, W: 64, OC: 2, K: 1, Pad: 0})
	ups := []backend.UpConvShape{{N: 1, C: 256, H: 8, W: 8, OC: 128}, {N: 1, C: 32, H: 32, W: 32, OC: 16}, {N: 2, C: 3, H: 5, W: 7, OC: 4}, {N: 1, C: 1, H: 1, W: 1, OC: 1}}
	for _, procs := range []int{1, 2, 5} {
		prev := runtime.GOMAXPROCS(procs)
		for _, impl := range gemmImpls(t) {
			impl.strict = true
			for _, s := range shapes {
				t.Run(fmt.Sprintf("p%d/%s/%+v", procs, impl.name, s), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(s.C*31+s.OC), uint64(s.H*7+s.K)))
					rnd := func(n int) []float32 {
						x := make([]float32, n)
						for i := range x {
							x[i] = rng.Float32() - 0.5
						}
						return x
					}
					in, w, bias := rnd(s.InSize()), rnd(s.WeightSize()), rnd(s.OC)
					ws := make([]float32, ConvWorkspace(s))
					out := make([]float32, s.OutSize())
					conv2d(impl, s, out, Float32Image(in), w, bias, ws)
					want := make([]float32, s.OutSize())
					Conv2dNaive(s, want, in, w, bias)
					assertClose(t, "out", out, want)
					dw := make([]float32, len(w))
					conv2dBackward(impl, s, make([]float32, len(in)), dw, make([]float32, s.OC), rnd(s.OutSize()), Float32Image(in), w, ws)
					conv2dBackward(impl, s, nil, dw, nil, rnd(s.OutSize()), Float32Image(in), w, ws)
				})
			}
			for _, s := range ups {
				in, w := make([]float32, s.InSize()), make([]float32, s.WeightSize())
				ws := make([]float32, UpConvWorkspace(s))
				upConv(impl, s, make([]float32, s.OutSize()), in, w, make([]float32, s.OC), ws)
				upConvBackward(impl, s, make([]float32, len(in)), make([]float32, len(w)), make([]float32, s.OC), make([]float32, s.OutSize()), in, w, ws)
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

func assertClose(t *testing.T, what string, got, want []float32) {
	t.Helper()
	var worst, scale float64
	for i := range want {
		d := float64(got[i] - want[i])
		worst = max(worst, d*d)
		scale = max(scale, float64(want[i]*want[i]))
	}
	if worst > 1e-8*(1+scale) {
		t.Fatalf("%s: max squared error %g (scale %g)", what, worst, scale)
	}
}
