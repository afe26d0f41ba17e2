//go:build cudaemu

package emu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/memory"
)

// TestSplitKWeightGradients: weight gradients long enough in depth to be
// split (the conformance suite's shapes are too small to be) accumulate
// into dw what the CPU computes, for the convolution and the transposed
// one.
func TestSplitKWeightGradients(t *testing.T) {
	gpu, err := emu.Backend(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	host := cpu.New()
	rng := rand.New(rand.NewPCG(7, 9))
	random := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.Float64()*2 - 1)
		}
		return x
	}
	type env struct {
		b    backend.Backend
		pool *memory.Pool
	}
	envs := []env{{gpu, memory.NewPool(gpu.Allocator(), memory.Options{})}, {host, memory.NewPool(host.Allocator(), memory.Options{})}}
	view := func(e env, vals []float32) backend.View {
		buf, err := e.pool.Alloc(memory.Activations, int64(4*max(len(vals), 1)))
		if err != nil {
			t.Fatal(err)
		}
		v := backend.View{Buf: buf, DT: backend.Float32, Len: len(vals)}
		backend.UploadFloat32(e.b, v, vals)
		return v
	}
	near := func(what string, got, want []float32) {
		t.Helper()
		worst := 0.0
		for i := range want {
			worst = max(worst, math.Abs(float64(got[i]-want[i]))/(1+math.Abs(float64(want[i]))))
		}
		if worst > 1e-4 {
			t.Errorf("%s: worst relative error %g", what, worst)
		}
	}

	cs := backend.ConvShape{N: 2, C: 3, H: 37, W: 41, OC: 5, K: 3, Pad: 1}
	if gpu.ConvWorkspace(cs) == 0 {
		t.Fatalf("%+v is not split; pick a longer depth", cs)
	}
	dout, in, w := random(cs.OutSize()), random(cs.InSize()), random(cs.WeightSize())
	dw0, db0 := random(cs.WeightSize()), random(cs.OC)
	var dws, dbs [2][]float32
	for i, e := range envs {
		dw, db := view(e, dw0), view(e, db0)
		e.b.ConvBack(cs, backend.View{}, dw, db, view(e, dout), view(e, in), view(e, w), view(e, make([]float32, e.b.ConvWorkspace(cs))))
		dws[i], dbs[i] = backend.DownloadFloat32(e.b, dw), backend.DownloadFloat32(e.b, db)
	}
	near("conv dw", dws[0], dws[1])
	near("conv dbias", dbs[0], dbs[1])

	us := backend.UpConvShape{N: 2, C: 4, H: 33, W: 35, OC: 3}
	if gpu.UpConvWorkspace(us) == 0 {
		t.Fatalf("%+v is not split", us)
	}
	dout, in, w = random(us.OutSize()), random(us.InSize()), random(us.WeightSize())
	dw0, db0 = random(us.WeightSize()), random(us.OC)
	for i, e := range envs {
		dw, db := view(e, dw0), view(e, db0)
		e.b.UpConvBack(us, backend.View{}, dw, db, view(e, dout), view(e, in), view(e, w), view(e, make([]float32, e.b.UpConvWorkspace(us))))
		dws[i], dbs[i] = backend.DownloadFloat32(e.b, dw), backend.DownloadFloat32(e.b, db)
	}
	near("up-conv dw", dws[0], dws[1])
	near("up-conv dbias", dbs[0], dbs[1])
}
