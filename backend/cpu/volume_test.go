package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// volumeTest is a CPU backend with a pool for a test's views.
type volumeTest struct {
	t    testing.TB
	c    CPU
	pool *memory.Pool
	rng  *rand.Rand
}

func newVolumeTest(t testing.TB) *volumeTest {
	return &volumeTest{t: t, c: New(), pool: memory.NewPool(HostAllocator{}, memory.Options{}), rng: rand.New(rand.NewPCG(48, 3))}
}

func (v *volumeTest) view(vals []float32) backend.View {
	buf, err := v.pool.Alloc(memory.Workspace, int64(4*max(len(vals), 1)))
	if err != nil {
		v.t.Fatal(err)
	}
	w := backend.View{Buf: buf, DT: backend.Float32, Len: len(vals)}
	backend.UploadFloat32(v.c, w, vals)
	return w
}

func (v *volumeTest) random(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(2*v.rng.Float64() - 1)
	}
	return x
}

func (v *volumeTest) get(w backend.View) []float32 { return backend.DownloadFloat32(v.c, w) }

// near fails where got and want differ by more than tol*(1+|want|).
func near(t testing.TB, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol*(1+math.Abs(want[i])) || d != d {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestVolumesThroughImageOps: the norms, ReLU and channel concatenation
// need no 3D operations: an (N,C,D,H,W) volume is an (N,C,D*H,W) image to
// them, with the results of the 3D definitions (statistics over
// (N,D,H,W) per channel, or over a group's channels and (D,H,W) per
// sample; torch.cat along dim 1 of 5-D tensors), written here with 5-D
// indices.
func TestVolumesThroughImageOps(t *testing.T) {
	v := newVolumeTest(t)
	const N, C, D, H, W, G = 2, 6, 3, 5, 7, 3
	at := func(n, c, d, h, w int) int { return (((n*C+c)*D+d)*H+h)*W + w }
	x := v.random(N * C * D * H * W)
	gamma, beta := v.random(C), v.random(C)
	img := backend.Shape4{N: N, C: C, H: D * H, W: W}
	const eps = 1e-5

	// set lists the voxels of channel c (batch norm) or of sample n's group g.
	norm := func(sets func(k int) [][5]int, count int) []float64 {
		want := make([]float64, len(x))
		for k := range count {
			vox := sets(k)
			var mean, vari float64
			for _, q := range vox {
				mean += float64(x[at(q[0], q[1], q[2], q[3], q[4])])
			}
			mean /= float64(len(vox))
			for _, q := range vox {
				d := float64(x[at(q[0], q[1], q[2], q[3], q[4])]) - mean
				vari += d * d
			}
			vari /= float64(len(vox))
			for _, q := range vox {
				i := at(q[0], q[1], q[2], q[3], q[4])
				want[i] = float64(gamma[q[1]])*(float64(x[i])-mean)/math.Sqrt(vari+eps) + float64(beta[q[1]])
			}
		}
		return want
	}
	voxels := func(keep func(n, c int) bool) [][5]int {
		var vox [][5]int
		for n := range N {
			for c := range C {
				if !keep(n, c) {
					continue
				}
				for d := range D {
					for h := range H {
						for w := range W {
							vox = append(vox, [5]int{n, c, d, h, w})
						}
					}
				}
			}
		}
		return vox
	}

	t.Run("BatchNorm", func(t *testing.T) {
		a := backend.NormArgs{Shape4: img, Eps: eps, Gamma: v.view(gamma), Beta: v.view(beta)}
		out, stats := v.view(make([]float32, len(x))), v.view(make([]float32, a.StatsLen(false)))
		v.c.BatchNorm(a, out, v.view(x), stats, false, false)
		want := norm(func(c int) [][5]int { return voxels(func(_, cc int) bool { return cc == c }) }, C)
		near(t, "batch norm of a volume", v.get(out), want, 1e-5)
	})
	t.Run("GroupNorm", func(t *testing.T) {
		a := backend.NormArgs{Shape4: img, Groups: G, Eps: eps, Gamma: v.view(gamma), Beta: v.view(beta)}
		out, stats := v.view(make([]float32, len(x))), v.view(make([]float32, a.StatsLen(true)))
		v.c.GroupNorm(a, out, v.view(x), stats, false)
		want := norm(func(k int) [][5]int {
			return voxels(func(n, c int) bool { return n == k/G && c/(C/G) == k%G })
		}, N*G)
		near(t, "group norm of a volume", v.get(out), want, 1e-5)
	})
	t.Run("ReLU", func(t *testing.T) {
		out := v.view(make([]float32, len(x)))
		v.c.ReLU(out, v.view(x))
		want := make([]float64, len(x))
		for i, e := range x {
			want[i] = max(float64(e), 0)
		}
		near(t, "ReLU of a volume", v.get(out), want, 0)
	})
	t.Run("Concat", func(t *testing.T) {
		const C2 = 2
		up := v.random(N * C2 * D * H * W)
		out := v.view(make([]float32, len(x)+len(up)))
		v.c.Concat(N, out, v.view(x), v.view(up))
		got := v.get(out)
		for n := range N {
			for c := range C + C2 {
				for d := range D {
					for h := range H {
						for w := range W {
							var want float32
							if c < C {
								want = x[at(n, c, d, h, w)]
							} else {
								want = up[(((n*C2+c-C)*D+d)*H+h)*W+w]
							}
							if g := got[((((n*(C+C2))+c)*D+d)*H+h)*W+w]; g != want {
								t.Fatalf("cat of volumes at (%d,%d,%d,%d,%d) = %v, want %v", n, c, d, h, w, g, want)
							}
						}
					}
				}
			}
		}
	})
}

// linearFD checks the backend's gradient grad of L = <f(x), g> in x
// against central differences of its own float32 forward f (through L),
// at a sample of coordinates: f is linear in x, so a step of 1/2 leaves
// only float32 rounding of the sums (a sum of a few hundred products of
// values in [-1, 1]: well under 1e-3 relative).
func linearFD(t *testing.T, what string, x []float32, grad []float32, L func() float64) {
	t.Helper()
	const h = 0.5
	rng := rand.New(rand.NewPCG(uint64(len(x)), 7))
	for range min(len(x), 40) {
		i := rng.IntN(len(x))
		x0 := x[i]
		x[i] = x0 + h
		up := L()
		x[i] = x0 - h
		down := L()
		x[i] = x0
		fd := (up - down) / (2 * h)
		if d := math.Abs(fd - float64(grad[i])); d > 1e-3*(1+math.Abs(fd)) {
			t.Errorf("%s[%d]: backward %v, finite difference of the forward %v", what, i, grad[i], fd)
		}
	}
}

func dot32(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestConv3GradientsFiniteDifferences: the CPU backend's 3D convolution
// backward (din, dw, dbias) against float64 central differences of its
// own forward, for each way the CPU computes it (the slices' stack with
// and without depth padding, 1x3x3, and 1x1x1 over the flattened volume).
func TestConv3GradientsFiniteDifferences(t *testing.T) {
	v := newVolumeTest(t)
	for _, s := range []backend.ConvShape{
		{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 4, K: 3, Pad: 1, KD: 3, PadD: 1},
		{N: 1, C: 3, D: 4, H: 5, W: 3, OC: 2, K: 3, Pad: 0, KD: 3},
		{N: 1, C: 2, D: 3, H: 5, W: 7, OC: 3, K: 3, Pad: 1, KD: 1},
		{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 5, K: 1, KD: 1},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d_pad%d", s.KDepth(), s.K, s.K, s.PadD), func(t *testing.T) {
			in, w, bias, g := v.random(s.InSize()), v.random(s.WeightSize()), v.random(s.OC), v.random(s.OutSize())
			ws := v.view(make([]float32, v.c.ConvWorkspace(s)))
			L := func() float64 {
				out := v.view(make([]float32, s.OutSize()))
				v.c.Conv(s, out, v.view(in), v.view(w), v.view(bias), ws)
				return dot32(v.get(out), g)
			}
			din, dw, db := v.view(make([]float32, s.InSize())), v.view(make([]float32, s.WeightSize())), v.view(make([]float32, s.OC))
			v.c.ConvBack(s, din, dw, db, v.view(g), v.view(in), v.view(w), ws)
			linearFD(t, "din", in, v.get(din), L)
			linearFD(t, "dw", w, v.get(dw), L)
			linearFD(t, "dbias", bias, v.get(db), L)
		})
	}
}

// TestUpConv3GradientsFiniteDifferences is the same for the 3D transposed
// convolution (2x2x2 and 1x2x2).
func TestUpConv3GradientsFiniteDifferences(t *testing.T) {
	v := newVolumeTest(t)
	for _, s := range []backend.UpConvShape{
		{N: 2, C: 3, D: 3, H: 3, W: 5, OC: 4, KD: 2},
		{N: 1, C: 3, D: 3, H: 5, W: 3, OC: 2, KD: 1},
	} {
		t.Run(fmt.Sprintf("%dx2x2", s.KDepth()), func(t *testing.T) {
			in, w, bias, g := v.random(s.InSize()), v.random(s.WeightSize()), v.random(s.OC), v.random(s.OutSize())
			ws := v.view(make([]float32, v.c.UpConvWorkspace(s)))
			L := func() float64 {
				out := v.view(make([]float32, s.OutSize()))
				v.c.UpConv(s, out, v.view(in), v.view(w), v.view(bias), ws)
				return dot32(v.get(out), g)
			}
			din, dw, db := v.view(make([]float32, s.InSize())), v.view(make([]float32, s.WeightSize())), v.view(make([]float32, s.OC))
			v.c.UpConvBack(s, din, dw, db, v.view(g), v.view(in), v.view(w), ws)
			linearFD(t, "din", in, v.get(din), L)
			linearFD(t, "dw", w, v.get(dw), L)
			linearFD(t, "dbias", bias, v.get(db), L)
		})
	}
}

// TestUpsample3GradientsFiniteDifferences is the same for the trilinear
// up-sampling (2x2x2 and 1x2x2).
func TestUpsample3GradientsFiniteDifferences(t *testing.T) {
	v := newVolumeTest(t)
	s := backend.Shape5{N: 2, C: 2, D: 3, H: 5, W: 7}
	for _, f := range []backend.Scale3{{D: 2, H: 2, W: 2}, {D: 1, H: 2, W: 2}} {
		t.Run(fmt.Sprintf("%dx%dx%d", f.D, f.H, f.W), func(t *testing.T) {
			x, g := v.random(s.Len()), v.random(s.Scaled(f).Len())
			L := func() float64 {
				out := v.view(make([]float32, s.Scaled(f).Len()))
				v.c.Upsample3(s, f, out, v.view(x))
				return dot32(v.get(out), g)
			}
			din := v.view(make([]float32, s.Len()))
			v.c.Upsample3Back(s, f, din, v.view(g))
			linearFD(t, "din", x, v.get(din), L)
		})
	}
}

// BenchmarkConv3 is a 3x3x3 convolution (padding 1) of 2x16x32^3 into 16
// channels: forward, and backward with the input gradient; GFLOP/s counts
// 2*N*OC*OD*OH*OW*C*27 per pass (twice that backward: dw and din).
func BenchmarkConv3(b *testing.B) {
	s := backend.ConvShape{N: 2, C: 16, D: 32, H: 32, W: 32, OC: 16, K: 3, Pad: 1, KD: 3, PadD: 1}
	v := newVolumeTest(b)
	in, w, bias, g := v.view(v.random(s.InSize())), v.view(v.random(s.WeightSize())), v.view(v.random(s.OC)), v.view(v.random(s.OutSize()))
	ws := v.view(make([]float32, v.c.ConvWorkspace(s)))
	out, din, dw, db := v.view(make([]float32, s.OutSize())), v.view(make([]float32, s.InSize())), v.view(make([]float32, s.WeightSize())), v.view(make([]float32, s.OC))
	flops := 2 * float64(s.N*s.OC*s.OD()*s.OH()*s.OW()) * float64(s.C*27)
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			v.c.Conv(s, out, in, w, bias, ws)
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("backward", func(b *testing.B) {
		for b.Loop() {
			v.c.ConvBack(s, din, dw, db, g, in, w, ws)
		}
		b.ReportMetric(2*flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	// The same products as 2D convolutions of the 64 slices' stacks
	// (C*KD = 48 channels), for comparison: what the kernels give the 3D
	// one's slices without its gathering.
	s2 := backend.ConvShape{N: s.N * s.D, C: s.C * 3, H: s.H, W: s.W, OC: s.OC, K: 3, Pad: 1}
	in2, out2, w2 := v.view(v.random(s2.InSize())), v.view(make([]float32, s2.OutSize())), v.view(v.random(s2.WeightSize()))
	ws2 := v.view(make([]float32, v.c.ConvWorkspace(s2)))
	b.Run("2d-slices-forward", func(b *testing.B) {
		for b.Loop() {
			v.c.Conv(s2, out2, in2, w2, bias, ws2)
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}
