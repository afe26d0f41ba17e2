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

// convEnv is a backend and a pool over its memory.
type convEnv struct {
	b    backend.Backend
	pool *memory.Pool
}

func newConvEnv(b backend.Backend) convEnv {
	return convEnv{b, memory.NewPool(b.Allocator(), memory.Options{})}
}

// view is vals in a new view of type dt (rounded to it by the backend's
// Convert, bit for bit the same on both).
func (e convEnv) view(t *testing.T, dt backend.DType, vals []float32) backend.View {
	t.Helper()
	alloc := func(dt backend.DType) backend.View {
		buf, err := e.pool.Alloc(memory.Activations, int64(dt.Size()*max(len(vals), 1)))
		if err != nil {
			t.Fatal(err)
		}
		return backend.View{Buf: buf, DT: dt, Len: len(vals)}
	}
	f := alloc(backend.Float32)
	backend.UploadFloat32(e.b, f, vals)
	if dt == backend.Float32 {
		return f
	}
	v := alloc(dt)
	e.b.Convert(v, f)
	return v
}

// bytes is vals in a new Uint8 view.
func (e convEnv) bytes(t *testing.T, vals []byte) backend.View {
	t.Helper()
	buf, err := e.pool.Alloc(memory.Activations, int64(max(len(vals), 1)))
	if err != nil {
		t.Fatal(err)
	}
	v := backend.View{Buf: buf, DT: backend.Uint8, Len: len(vals)}
	e.b.Upload(v, vals)
	return v
}

// precisionCase is a storage type and, for fp32, whether the CUDA backend
// rounds convolution operands to TF32, with the tolerance that holds a
// result to the CPU's (|got-want| <= tol*(1+|want|)).
type precisionCase struct {
	name string
	dt   backend.DType
	tf32 bool
	tol  float64
}

// TestSplitKWeightGradients: weight gradients long enough in depth to be
// split (the conformance suite's shapes are too small to be) accumulate
// into dw what the CPU computes, for the convolution and the transposed
// one, on every path: exact fp32 (1e-4), TF32 (PyTorch's 0.005 grown as
// the square root of the depth beyond 256, as backendtest's weight
// gradients: 0.017 and 0.016 here), fp16 and bf16 operands (exact
// products, fp32 sums: 1e-4).
func TestSplitKWeightGradients(t *testing.T) {
	cs := backend.ConvShape{N: 2, C: 3, H: 37, W: 41, OC: 5, K: 3, Pad: 1}
	us := backend.UpConvShape{N: 2, C: 4, H: 33, W: 35, OC: 3}
	tf32Tol := func(depth int) float64 { return 0.005 * math.Sqrt(float64(depth)/256) }
	for _, pc := range []struct {
		precisionCase
		upTol float64
	}{
		{precisionCase{"fp32", backend.Float32, false, 1e-4}, 1e-4},
		{precisionCase{"tf32", backend.Float32, true, tf32Tol(cs.N * cs.H * cs.W)}, tf32Tol(us.N * us.H * us.W)},
		{precisionCase{"fp16", backend.Float16, false, 1e-4}, 1e-4},
		{precisionCase{"bf16", backend.BFloat16, false, 1e-4}, 1e-4},
	} {
		t.Run(pc.name, func(t *testing.T) {
			gpu, err := emu.Backend(1 << 30)
			if err != nil {
				t.Fatal(err)
			}
			gpu.SetTF32(pc.tf32)
			envs := []convEnv{newConvEnv(gpu), newConvEnv(cpu.New())}
			rng := rand.New(rand.NewPCG(7, 9))
			random := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.Float64()*2 - 1)
				}
				return x
			}
			near := func(what string, got, want []float32, tol float64) {
				t.Helper()
				worst := 0.0
				for i := range want {
					worst = max(worst, math.Abs(float64(got[i]-want[i]))/(1+math.Abs(float64(want[i]))))
				}
				if worst > tol {
					t.Errorf("%s: worst relative error %g, tolerance %g", what, worst, tol)
				}
				t.Logf("%s: worst relative error %.3g (tolerance %.3g)", what, worst, tol)
			}

			cs := cs
			cs.DT = pc.dt
			if gpu.ConvWorkspace(cs) == 0 {
				t.Fatalf("%+v is not split; pick a longer depth", cs)
			}
			dout, in, w := random(cs.OutSize()), random(cs.InSize()), random(cs.WeightSize())
			dw0, db0 := random(cs.WeightSize()), random(cs.OC)
			var dws, dbs [2][]float32
			for i, e := range envs {
				dw, db := e.view(t, backend.Float32, dw0), e.view(t, backend.Float32, db0)
				e.b.ConvBack(cs, backend.View{}, dw, db, e.view(t, pc.dt, dout), e.view(t, pc.dt, in), e.view(t, pc.dt, w),
					e.view(t, backend.Float32, make([]float32, e.b.ConvWorkspace(cs))))
				dws[i], dbs[i] = backend.DownloadFloat32(e.b, dw), backend.DownloadFloat32(e.b, db)
			}
			near("conv dw", dws[0], dws[1], pc.tol)
			near("conv dbias", dbs[0], dbs[1], 1e-4)

			us := us
			us.DT = pc.dt
			if gpu.UpConvWorkspace(us) == 0 {
				t.Fatalf("%+v is not split", us)
			}
			dout, in, w = random(us.OutSize()), random(us.InSize()), random(us.WeightSize())
			dw0, db0 = random(us.WeightSize()), random(us.OC)
			for i, e := range envs {
				dw, db := e.view(t, backend.Float32, dw0), e.view(t, backend.Float32, db0)
				e.b.UpConvBack(us, backend.View{}, dw, db, e.view(t, pc.dt, dout), e.view(t, pc.dt, in), e.view(t, pc.dt, w),
					e.view(t, backend.Float32, make([]float32, e.b.UpConvWorkspace(us))))
				dws[i], dbs[i] = backend.DownloadFloat32(e.b, dw), backend.DownloadFloat32(e.b, db)
			}
			near("up-conv dw", dws[0], dws[1], pc.upTol)
			near("up-conv dbias", dbs[0], dbs[1], 1e-4)
		})
	}
}
