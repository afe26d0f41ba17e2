//go:build cudaemu

package emu_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/emu"
)

// tcShape has several k-slices on both paths (9 filter positions, C over
// one or two slices) and two fragments a warp in each direction.
var tcShape = backend.ConvShape{N: 2, C: 20, H: 12, W: 11, OC: 40, K: 3, Pad: 1}

// convResults are a convolution's forward output, input gradient and
// weight gradient on b, as float32, from inputs seeded by seed, stored as
// dt; b's first error, if any.
func convResults(t *testing.T, b backend.Backend, s backend.ConvShape, seed uint64) (out, din, dw []float32, err error) {
	t.Helper()
	e := newConvEnv(b)
	rng := rand.New(rand.NewPCG(seed, 3))
	random := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.Float64()*2 - 1)
		}
		return x
	}
	in, w, bias, dout := e.view(t, s.DT, random(s.InSize())), e.view(t, s.DT, random(s.WeightSize())),
		e.view(t, backend.Float32, random(s.OC)), e.view(t, s.DT, random(s.OutSize()))
	ws := e.view(t, backend.Float32, make([]float32, b.ConvWorkspace(s)))
	o, di, g := e.view(t, s.DT, make([]float32, s.OutSize())), e.view(t, s.DT, make([]float32, s.InSize())),
		e.view(t, backend.Float32, make([]float32, s.WeightSize()))
	b.Conv(s, o, in, w, bias, ws)
	b.ConvBack(s, di, g, backend.View{}, dout, in, w, ws)
	out, din, dw = backend.DownloadFloat32(b, o), backend.DownloadFloat32(b, di), backend.DownloadFloat32(b, g)
	return out, din, dw, b.Sync()
}

// worstError is the largest |got-want|/(1+|want|).
func worstError(got, want []float32) float64 {
	worst := 0.0
	for i := range want {
		e := math.Abs(float64(got[i]-want[i])) / (1 + math.Abs(float64(want[i])))
		if e > worst || e != e {
			worst = e
		}
	}
	return worst
}

// TestPlantedTensorCoreBugs: a tensor-core kernel with a bug planted (a
// swapped fragment, a skipped k-slice, a pipeline a stage early), in
// place of the forward and of the weight-gradient kernel, on the TF32 and
// the 16-bit path, is caught: the results leave their tolerance by far
// (10x), or the sanitizer reports the early stage (a read of shared memory
// a cp.async has not landed in; a write into the buffer other warps read).
func TestPlantedTensorCoreBugs(t *testing.T) {
	paths := []struct {
		name         string
		dt           backend.DType
		conv, wgrad  cuda.Kernel
		tol          float64
		earlyFinding string
	}{
		{"tf32", backend.Float32, cuda.KTcConvTf32, cuda.KTcWgradTf32, 0.005, "cp.async into it is in flight"},
		{"fp16", backend.Float16, cuda.KTcConv16, cuda.KTcWgrad16, 0x1p-10, "since another thread"},
	}
	for _, p := range paths {
		s := tcShape
		s.DT = p.dt
		wantOut, wantDin, wantDw, err := convResults(t, cpu.New(), s, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, bug := range []emu.Planted{emu.SwappedFragment, emu.SkippedSlice, emu.EarlyStage} {
			for _, k := range []cuda.Kernel{p.conv, p.wgrad} {
				t.Run(p.name+"/"+bug.String()+"/"+k.String(), func(t *testing.T) {
					d := emu.New(1 << 30)
					gpu, err := cuda.New(d)
					if err != nil {
						t.Fatal(err)
					}
					d.Substitute(k, bug)
					out, din, dw, err := convResults(t, gpu, s, 1)
					if bug == emu.EarlyStage {
						if err == nil || !strings.Contains(err.Error(), p.earlyFinding) {
							t.Fatalf("the sanitizer did not find the early stage (%q): %v", p.earlyFinding, err)
						}
						t.Logf("found: %.300s", err)
						return
					}
					if err != nil {
						t.Fatalf("a numeric bug faulted: %v", err)
					}
					worst := worstError(dw, wantDw)
					if k == p.conv {
						worst = max(worstError(out, wantOut), worstError(din, wantDin))
					}
					if worst < 10*p.tol {
						t.Errorf("worst error %.3g with %s planted: within 10x the tolerance %.3g", worst, bug, p.tol)
					}
					t.Logf("worst error %.3g (tolerance %.3g)", worst, p.tol)
				})
			}
		}
	}
}

// TestTensorCoreSameBits: two emulated runs of the tensor-core kernels
// (forward, input and weight gradients, the weight gradient split over its
// depth) with other block orders and one or two blocks at a time give the
// same bits, on the TF32 and the 16-bit path.
func TestTensorCoreSameBits(t *testing.T) {
	shapes := []backend.ConvShape{tcShape, {N: 2, C: 3, H: 37, W: 41, OC: 5, K: 3, Pad: 1}}
	for _, dt := range []backend.DType{backend.Float32, backend.Float16, backend.BFloat16} {
		for _, s := range shapes {
			s.DT = dt
			var runs [2][3][]float32
			for i := range runs {
				d := emu.New(1 << 30)
				d.SetSeed(uint64(11 + i))
				d.SetWorkers(1 + i)
				gpu, err := cuda.New(d)
				if err != nil {
					t.Fatal(err)
				}
				out, din, dw, err := convResults(t, gpu, s, 5)
				if err != nil {
					t.Fatal(err)
				}
				runs[i] = [3][]float32{out, din, dw}
			}
			for j, what := range []string{"out", "din", "dw"} {
				if !bytes.Equal(float32Bits(runs[0][j]), float32Bits(runs[1][j])) {
					t.Errorf("%s %+v: %s differs between two runs", dt, s, what)
				}
			}
		}
	}
}

// float32Bits is vs's bytes.
func float32Bits(vs []float32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		u := math.Float32bits(v)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return b
}

// TestTensorCoreKernelOrder: planted.cpp runs tc.cu's kernels by their
// place in the file, which the Kernel enum follows.
func TestTensorCoreKernelOrder(t *testing.T) {
	for i, name := range []string{"tc_conv_tf32", "tc_conv_16", "tc_wgrad_tf32", "tc_wgrad_16"} {
		if k := cuda.KTcConvTf32 + cuda.Kernel(i); k.String() != name {
			t.Errorf("tc.cu's kernel %d is %s, planted.cpp runs it as %s", i, k, name)
		}
	}
}
