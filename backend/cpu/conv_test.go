package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
	"github.com/memunet/memunet/memory"
)

// TestConvWinogradMatchesDirect: Conv and ConvBack with the Winograd
// algorithm (and auto) agree with the direct one to float32 rounding
// (the kernels' tests hold each to its error bound), with bias, with and
// without the input gradient, dw and dbias accumulated; the forward over
// the batch at once, the input gradient with the flipped filter.
func TestConvWinogradMatchesDirect(t *testing.T) {
	c := New()
	pool := memory.NewPool(HostAllocator{}, memory.Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	view := func(vals []float32) backend.View {
		buf, err := pool.Alloc(memory.Workspace, int64(4*max(len(vals), 1)))
		if err != nil {
			t.Fatal(err)
		}
		v := backend.View{Buf: buf, DT: backend.Float32, Len: len(vals)}
		backend.UploadFloat32(c, v, vals)
		return v
	}
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, s := range []backend.ConvShape{
		{N: 3, C: 16, H: 8, W: 32, OC: 24, K: 3, Pad: 1},
		{N: 2, C: 32, H: 16, W: 16, OC: 16, K: 3, Pad: 1},
		{N: 2, C: 48, H: 16, W: 32, OC: 16, K: 3, Pad: 1},
	} {
		in, w, bias, dout := random(s.InSize()), random(s.WeightSize()), random(s.OC), random(s.OutSize())
		dw0, db0 := random(s.WeightSize()), random(s.OC)
		type result struct{ out, din, dw, db []float32 }
		run := func(algo backend.ConvAlgo, withDin, room bool) result {
			s := s
			s.Algo = algo
			ws := view(make([]float32, c.ConvWorkspace(s)))
			if !room {
				ws = view(make([]float32, c.ConvWorkspace(withAlgo(s, backend.ConvDirect))))
			}
			out := view(make([]float32, s.OutSize()))
			c.Conv(s, out, view(in), view(w), view(bias), ws)
			dw, db := view(dw0), view(db0)
			var din backend.View
			if withDin {
				din = view(make([]float32, s.InSize()))
			}
			c.ConvBack(s, din, dw, db, view(dout), view(in), view(w), ws)
			r := result{out: backend.DownloadFloat32(c, out), dw: backend.DownloadFloat32(c, dw), db: backend.DownloadFloat32(c, db)}
			if withDin {
				r.din = backend.DownloadFloat32(c, din)
			}
			return r
		}
		for _, algo := range []backend.ConvAlgo{backend.ConvWinograd, backend.ConvAuto} {
			for _, withDin := range []bool{true, false} {
				name := fmt.Sprintf("%+v %s din=%v", s, algo, withDin)
				want, got := run(backend.ConvDirect, withDin, true), run(algo, withDin, true)
				for _, c := range []struct {
					what      string
					got, want []float32
				}{{"out", got.out, want.out}, {"din", got.din, want.din}, {"dw", got.dw, want.dw}, {"dbias", got.db, want.db}} {
					var worst, scale float64
					for i := range c.want {
						worst = max(worst, math.Abs(float64(c.got[i]-c.want[i])))
						scale = max(scale, math.Abs(float64(c.want[i])))
					}
					if worst > 1e-5*(1+scale) {
						t.Errorf("%s: %s differs from direct's by %.3g (scale %.3g)", name, c.what, worst, scale)
					}
				}
				if algo == backend.ConvWinograd && (got.out[0] == want.out[0] && got.out[1] == want.out[1] && got.out[2] == want.out[2]) {
					t.Errorf("%s: the same bits as direct's: did it run the Winograd way?", name)
				}
			}
		}
		// Auto given only the direct way's workspace (less than its own)
		// runs what fits in it: the direct way's bits where that is
		// nothing.
		auto, direct := withAlgo(s, backend.ConvAuto), withAlgo(s, backend.ConvDirect)
		p := kernels.PlanConv(auto, c.ConvWorkspace(direct))
		t.Logf("%+v: auto plans %+v with its workspace, %+v with the direct way's", s, kernels.PlanConv(auto, c.ConvWorkspace(auto)), p)
		want, got := run(backend.ConvDirect, true, true), run(backend.ConvAuto, true, false)
		if !p.Any() && (!slices.Equal(got.out, want.out) || !slices.Equal(got.din, want.din) || !slices.Equal(got.dw, want.dw)) {
			t.Errorf("%+v: auto in the direct way's workspace differs from direct", s)
		}
	}
}

func withAlgo(s backend.ConvShape, a backend.ConvAlgo) backend.ConvShape {
	s.Algo = a
	return s
}
