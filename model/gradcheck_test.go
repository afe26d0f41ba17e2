package model

// Gradient checks: every layer's Backward against float64 central finite
// differences of a plain float64 reference forward written here from
// PyTorch's definitions, plus the memory contract of each Forward/Backward
// pair (what a layer saves it frees once its backward has used it).

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
	"github.com/memunet/memunet/memory"
)

// Tolerances. Every comparison is entrywise
//
//	|memunet - reference| <= tol * (1 + |reference|)
//
// where memunet computes in float32 from float32 inputs and the reference is
// float64 truth at exactly those (float32-representable) inputs, so the
// difference is float32 rounding only. The "1 +" makes the bound absolute for
// entries near 0 (e.g. a gradient that cancels) where a relative bound would
// be meaningless.
const (
	// gcTolFwd: a layer output is a sum of at most a few hundred products of
	// O(1) values (conv: C*K*K <= 50 terms; norms: means over <= 210
	// values), each float32 operation adding a relative error of at most
	// u = 2^-24 ~ 6e-8. The worst error observed is 3.6e-7; 1e-5 leaves a
	// ~30x margin (e.g. for FMA contraction on arm64), while an indexing,
	// padding or formula error is O(1e-2..1).
	gcTolFwd = 1e-5
	// gcTolGrad: the float32 backward sums more terms (dW sums over
	// N*OH*OW <= 70 positions; norm backward subtracts two means, which
	// cancels), and the central difference has its own error: truncation
	// eps^2*|L'''| ~ 1e-12 (0 for layers linear in each entry) plus float64
	// cancellation |L|*1e-16/eps ~ 1e-9. The worst error observed is 9e-7;
	// 2e-5 is a ~20x margin.
	gcTolGrad = 2e-5
	// gcTolNet: the whole UNet chains ~25 layers, with BatchNorm/GroupNorm
	// over as few as 4..12 values, so float32 errors compound. The worst
	// error observed (logits, loss and the 64x-scaled parameter gradients,
	// see TestGradUNet) is 5e-6; 1e-4 is a ~20x margin.
	gcTolNet = 1e-4
	// gcEps is the central-difference step. In float64 it is far below every
	// kink the inputs are kept away from (ReLU inputs |x| >= 1e-2, max pool
	// values >= 2/len apart) so the differenced function is smooth there.
	gcEps = 1e-6
)

// gcRNG makes a reproducible generator per test, independent of test order.
func gcRNG(name string) *rand.Rand {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(0x67726164, h))
}

// gcUniform returns n values uniform in [lo,hi); entry 0 is forced into the
// upper half so the slice is never all zero.
func gcUniform(rng *rand.Rand, n int, lo, hi float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	if n > 0 {
		s[0] = float32(lo + (hi-lo)*(0.5+0.5*rng.Float64()))
		if s[0] == 0 {
			s[0] = float32(hi) / 2
		}
	}
	return s
}

// gcAwayFromZero returns n values with |x| in [0.01, 1) and random sign:
// ReLU inputs for which the finite difference never crosses the kink at 0.
func gcAwayFromZero(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		v := float32(0.01 + 0.99*rng.Float64())
		if rng.IntN(2) == 0 {
			v = -v
		}
		s[i] = v
	}
	return s
}

// gcDistinct returns n values in (-1,1) that are a random permutation of
// evenly spaced levels 2/n apart: max pool inputs without ties or near-ties
// (2/n >> eps), so the argmax of every window is stable under the
// finite-difference step.
func gcDistinct(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i, p := range rng.Perm(n) {
		s[i] = float32((float64(p)+0.5)/float64(n)*2 - 1)
	}
	return s
}

func gcTensor(t *testing.T, dev *Device, n, c, h, w int, data []float32) *Tensor {
	t.Helper()
	x, err := NewTensor(dev, memory.Activations, backend.Float32, n, c, h, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != x.Len() {
		t.Fatalf("gcTensor: %d values for %v", len(data), x.Shape())
	}
	x.Write(data)
	return x
}

func gc64(s []float32) []float64 {
	if s == nil {
		return nil
	}
	d := make([]float64, len(s))
	for i, v := range s {
		d[i] = float64(v)
	}
	return d
}

func gc32(s []float64) []float32 {
	d := make([]float32, len(s))
	for i, v := range s {
		d[i] = float32(v)
	}
	return d
}

func gcDot(a, b []float64) float64 {
	if len(a) != len(b) {
		panic("gcDot: length mismatch")
	}
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func gcScale(a []float64, k float64) []float64 {
	d := make([]float64, len(a))
	for i, v := range a {
		d[i] = k * v
	}
	return d
}

// gcFD is the central difference of L with respect to every entry of x
// (which L reads), restoring x afterwards.
func gcFD(L func() float64, x []float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		v := x[i]
		hi, lo := v+gcEps, v-gcEps
		x[i] = hi
		lp := L()
		x[i] = lo
		lm := L()
		x[i] = v
		g[i] = (lp - lm) / (hi - lo)
	}
	return g
}

// gcClose checks got against want entrywise with |got-want| <= tol*(1+|want|).
func gcClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	worst, bad := 0.0, 0
	for i := range got {
		g := float64(got[i])
		e := math.Abs(g-want[i]) / (1 + math.Abs(want[i]))
		if math.IsNaN(e) || math.IsInf(g, 0) {
			e = math.Inf(1)
		}
		worst = max(worst, e)
		if e > tol {
			if bad < 5 {
				t.Errorf("%s[%d] = %.9g, want %.9g (|diff|/(1+|want|) = %.3g > %.3g)", what, i, g, want[i], e, tol)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d entries out of tolerance", what, bad, len(got))
	}
	t.Logf("%s: worst |diff|/(1+|want|) = %.3g (tol %.3g, %d values)", what, worst, tol, len(got))
}

// gcNontrivial fails if a reference gradient is (almost) all zero, which
// would make its check vacuous.
func gcNontrivial(t *testing.T, what string, g []float64) {
	t.Helper()
	m := 0.0
	for _, v := range g {
		m = max(m, math.Abs(v))
	}
	if m < 1e-3 {
		t.Errorf("%s: reference gradient is ~0 (max %.3g); the check would be vacuous", what, m)
	}
}

func gcEqual(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Errorf("%s: lengths %d and %d", what, len(a), len(b))
		return
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Errorf("%s[%d]: %v != %v (want bitwise equal)", what, i, a[i], b[i])
			return
		}
	}
}

// gcPoison fills the pool's cache with NaN blocks of every size up to
// maxBytes, so that the first allocation of each size during the test
// returns NaN contents: a layer that reads (or accumulates into) output or
// workspace memory before writing it then produces NaN, which every check
// rejects. Allocated bytes are unaffected.
func gcPoison(dev *Device, maxBytes int) {
	const copies = 3
	var bufs []*memory.Buffer
	for size := memory.BlockRound; size <= maxBytes; size += memory.BlockRound {
		for range copies {
			v, err := allocView(dev, memory.Workspace, backend.Float32, size/4)
			if err != nil {
				panic(err)
			}
			dev.Backend.Fill(v, float32(math.NaN()))
			bufs = append(bufs, v.Buf)
		}
	}
	for _, b := range bufs {
		dev.Pool.MustFree(b)
	}
}

func gcBytes(t *Tensor) int64 { return memory.RoundSize(4 * int64(t.Len())) }

// gcCheckLive checks that, beyond base, exactly the given tensors (nil
// skipped, duplicates counted once) are allocated: all of them activations,
// nothing else live in the activations or workspace categories.
func gcCheckLive(t *testing.T, when string, dev *Device, base int64, live ...*Tensor) {
	t.Helper()
	seen := map[*Tensor]bool{}
	var want int64
	for _, x := range live {
		if x == nil || seen[x] {
			continue
		}
		seen[x] = true
		want += gcBytes(x)
	}
	st := dev.Pool.Stats()
	if got := st.Allocated.Current; got != base+want {
		t.Errorf("%s: allocated %d bytes, want %d (base %d + %d in %d live tensors): %+d leaked",
			when, got, base+want, base, want, len(seen), got-base-want)
	}
	if got := st.ByCategory[memory.Activations].Current; got != want {
		t.Errorf("%s: %d activation bytes live, want %d", when, got, want)
	}
	if got := st.ByCategory[memory.Workspace].Current; got != 0 {
		t.Errorf("%s: %d workspace bytes live, want 0", when, got)
	}
}

// ---------------------------------------------------------------------------
// float64 reference forwards (PyTorch definitions)

// gcT is a float64 NCHW tensor.
type gcT struct {
	N, C, H, W int
	D          []float64
}

func gcNew(n, c, h, w int) gcT { return gcT{n, c, h, w, make([]float64, n*c*h*w)} }

func (x gcT) i(n, c, y, xx int) int { return ((n*x.C+c)*x.H+y)*x.W + xx }

func gcOf(x *Tensor) gcT { return gcT{x.N, x.C, x.H, x.W, gc64(x.Read())} }

// gcRefConv is torch.nn.functional.conv2d(x, w, b, stride=1, padding=pad).
func gcRefConv(x gcT, w, b []float64, oc, k, pad int) gcT {
	s := backend.ConvShape{N: x.N, C: x.C, H: x.H, W: x.W, OC: oc, K: k, Pad: pad}
	out := gcNew(x.N, oc, s.OH(), s.OW())
	kernels.Conv2dNaive(s, out.D, x.D, w, b)
	return out
}

// gcRefUpConv is conv_transpose2d(x, w, b, stride=2) with a 2x2 kernel.
func gcRefUpConv(x gcT, w, b []float64, oc int) gcT {
	s := backend.UpConvShape{N: x.N, C: x.C, H: x.H, W: x.W, OC: oc}
	out := gcNew(x.N, oc, 2*x.H, 2*x.W)
	kernels.UpConvNaive(s, out.D, x.D, w, b)
	return out
}

// gcRefBatchNorm is BatchNorm2d in training mode: per channel, the batch mean
// and biased variance over (N,H,W). It also returns them.
func gcRefBatchNorm(x gcT, gamma, beta []float64, eps float64) (y gcT, mean, variance []float64) {
	y = gcNew(x.N, x.C, x.H, x.W)
	mean, variance = make([]float64, x.C), make([]float64, x.C)
	m := float64(x.N * x.H * x.W)
	for c := 0; c < x.C; c++ {
		var s float64
		for n := 0; n < x.N; n++ {
			for p := 0; p < x.H*x.W; p++ {
				s += x.D[x.i(n, c, 0, 0)+p]
			}
		}
		mu := s / m
		var ss float64
		for n := 0; n < x.N; n++ {
			for p := 0; p < x.H*x.W; p++ {
				d := x.D[x.i(n, c, 0, 0)+p] - mu
				ss += d * d
			}
		}
		mean[c], variance[c] = mu, ss/m
		for n := 0; n < x.N; n++ {
			for p := 0; p < x.H*x.W; p++ {
				j := x.i(n, c, 0, 0) + p
				y.D[j] = (x.D[j]-mu)/math.Sqrt(variance[c]+eps)*gamma[c] + beta[c]
			}
		}
	}
	return y, mean, variance
}

// gcRefBatchNormEval is BatchNorm2d in eval mode (running statistics).
func gcRefBatchNormEval(x gcT, gamma, beta, rm, rv []float64, eps float64) gcT {
	y := gcNew(x.N, x.C, x.H, x.W)
	for n := 0; n < x.N; n++ {
		for c := 0; c < x.C; c++ {
			for p := 0; p < x.H*x.W; p++ {
				j := x.i(n, c, 0, 0) + p
				y.D[j] = (x.D[j]-rm[c])/math.Sqrt(rv[c]+eps)*gamma[c] + beta[c]
			}
		}
	}
	return y
}

// gcRefGroupNorm is GroupNorm(groups, C): per sample and group of C/groups
// consecutive channels, mean and biased variance over (C/groups,H,W), then a
// per-channel affine.
func gcRefGroupNorm(x gcT, groups int, gamma, beta []float64, eps float64) gcT {
	y := gcNew(x.N, x.C, x.H, x.W)
	cg, hw := x.C/groups, x.H*x.W
	for n := 0; n < x.N; n++ {
		for g := 0; g < groups; g++ {
			var s float64
			for c := g * cg; c < (g+1)*cg; c++ {
				for p := 0; p < hw; p++ {
					s += x.D[x.i(n, c, 0, 0)+p]
				}
			}
			mu := s / float64(cg*hw)
			var ss float64
			for c := g * cg; c < (g+1)*cg; c++ {
				for p := 0; p < hw; p++ {
					d := x.D[x.i(n, c, 0, 0)+p] - mu
					ss += d * d
				}
			}
			sd := math.Sqrt(ss/float64(cg*hw) + eps)
			for c := g * cg; c < (g+1)*cg; c++ {
				for p := 0; p < hw; p++ {
					j := x.i(n, c, 0, 0) + p
					y.D[j] = (x.D[j]-mu)/sd*gamma[c] + beta[c]
				}
			}
		}
	}
	return y
}

func gcRefReLU(x gcT) gcT {
	y := gcNew(x.N, x.C, x.H, x.W)
	for i, v := range x.D {
		y.D[i] = max(v, 0)
	}
	return y
}

// gcRefMaxPool is MaxPool2d(2) (floor mode: a last odd row or column is
// dropped). On ties the first maximum in row-major window order wins, as in
// PyTorch's CPU kernel.
func gcRefMaxPool(x gcT) (y gcT, arg []int) {
	oh, ow := x.H/2, x.W/2
	y = gcNew(x.N, x.C, oh, ow)
	arg = make([]int, len(y.D))
	for n := 0; n < x.N; n++ {
		for c := 0; c < x.C; c++ {
			for oy := 0; oy < oh; oy++ {
				for ox := 0; ox < ow; ox++ {
					best := math.Inf(-1)
					at := -1
					for dy := 0; dy < 2; dy++ {
						for dx := 0; dx < 2; dx++ {
							j := x.i(n, c, 2*oy+dy, 2*ox+dx)
							if v := x.D[j]; at < 0 || v > best {
								best, at = v, j
							}
						}
					}
					o := y.i(n, c, oy, ox)
					y.D[o], arg[o] = best, at
				}
			}
		}
	}
	return y, arg
}

// gcBilinearSrc is PyTorch's source index for upsampling n -> 2n with
// align_corners=False (area_pixel_compute_source_index with scale 1/2, then
// the neighbour and weight of upsample_bilinear2d).
func gcBilinearSrc(d, n int) (i0, i1 int, lambda float64) {
	src := 0.5*(float64(d)+0.5) - 0.5
	if src < 0 {
		src = 0
	}
	i0 = int(math.Floor(src))
	i1 = i0
	if i0 < n-1 {
		i1 = i0 + 1
	}
	return i0, i1, src - float64(i0)
}

// gcRefUpsample is Upsample(scale_factor=2, mode="bilinear", align_corners=False).
func gcRefUpsample(x gcT) gcT {
	y := gcNew(x.N, x.C, 2*x.H, 2*x.W)
	for n := 0; n < x.N; n++ {
		for c := 0; c < x.C; c++ {
			for oy := 0; oy < 2*x.H; oy++ {
				y0, y1, ly := gcBilinearSrc(oy, x.H)
				for ox := 0; ox < 2*x.W; ox++ {
					x0, x1, lx := gcBilinearSrc(ox, x.W)
					y.D[y.i(n, c, oy, ox)] =
						(1-ly)*((1-lx)*x.D[x.i(n, c, y0, x0)]+lx*x.D[x.i(n, c, y0, x1)]) +
							ly*((1-lx)*x.D[x.i(n, c, y1, x0)]+lx*x.D[x.i(n, c, y1, x1)])
				}
			}
		}
	}
	return y
}

// gcRefConcat is torch.cat([skip, up], dim=1).
func gcRefConcat(skip, up gcT) gcT {
	y := gcNew(skip.N, skip.C+up.C, skip.H, skip.W)
	for n := 0; n < skip.N; n++ {
		for c := 0; c < y.C; c++ {
			for p := 0; p < y.H*y.W; p++ {
				if c < skip.C {
					y.D[y.i(n, c, 0, 0)+p] = skip.D[skip.i(n, c, 0, 0)+p]
				} else {
					y.D[y.i(n, c, 0, 0)+p] = up.D[up.i(n, c-skip.C, 0, 0)+p]
				}
			}
		}
	}
	return y
}

// gcRefCrossEntropy is CrossEntropyLoss(ignore_index=255): the mean over
// pixels whose target is not 255 of logsumexp(z) - z[target]; 0 if none.
func gcRefCrossEntropy(z gcT, target []uint8) float64 {
	var sum float64
	count := 0
	for n := 0; n < z.N; n++ {
		for p := 0; p < z.H*z.W; p++ {
			tg := int(target[n*z.H*z.W+p])
			if tg == IgnoreIndex {
				continue
			}
			mx := math.Inf(-1)
			for k := 0; k < z.C; k++ {
				mx = max(mx, z.D[z.i(n, k, 0, 0)+p])
			}
			var se float64
			for k := 0; k < z.C; k++ {
				se += math.Exp(z.D[z.i(n, k, 0, 0)+p] - mx)
			}
			sum += mx + math.Log(se) - z.D[z.i(n, tg, 0, 0)+p]
			count++
		}
	}
	if count == 0 {
		return 0
	}
	return sum / float64(count)
}

// ---------------------------------------------------------------------------
// the layer harness

// gcLayer is one layer under test with its inputs and float64 reference.
type gcLayer struct {
	dev     *Device
	inputs  []*Tensor // the test holds one reference to each
	params  []*Param  // trainable parameters whose gradients are checked
	forward func(env *Env, in []*Tensor) (*Tensor, error)
	// backward returns one din per input, nil where the layer computes none.
	backward func(env *Env, dout *Tensor) ([]*Tensor, error)
	// ref is the float64 forward from the inputs' and params' values.
	ref func(xs []gcT, ps [][]float64) gcT
	// evalSame: eval mode computes the same function (all but BatchNorm).
	evalSame bool
}

// gcCheckLayer runs the layer through two training passes and one eval pass:
//
//   - "exclusive": the test holds the only reference to each input and to
//     dout, so layers that can work in place (ReLU forward, ReLU/norm
//     backward) do;
//   - "shared": the test holds a second reference to each input during
//     Forward and to dout during Backward, so they must not; inputs and dout
//     must come back unchanged.
//
// In each pass it checks (a) the float32 forward against the float64
// reference, (b) for L = sum(out*R) the input gradients and the accumulated
// parameter gradients (after pass k they are k times dL/dp) against central
// differences of the reference on every entry, (c) that after Backward only
// the inputs, the returned dins (and the test's dout) are allocated and the
// inputs are back to the test's single reference: every saved tensor and
// workspace is freed. The two passes must agree bitwise. Eval mode must
// allocate the output and nothing else, and keep no reference.
func gcCheckLayer(t *testing.T, rng *rand.Rand, c gcLayer) {
	t.Helper()
	dev := c.dev
	xs := make([]gcT, len(c.inputs))
	var held int64
	for i, in := range c.inputs {
		xs[i] = gcOf(in)
		held += gcBytes(in)
	}
	ps := make([][]float64, len(c.params))
	for j, p := range c.params {
		ps[j] = gc64(p.Read())
	}
	base := dev.Pool.Stats().Allocated.Current - held
	gcPoison(dev, 32<<10)

	want := c.ref(xs, ps)
	R := gc64(gcUniform(rng, len(want.D), -1, 1))
	L := func() float64 { return gcDot(c.ref(xs, ps).D, R) }
	fdIn := make([][]float64, len(xs))
	for i := range xs {
		fdIn[i] = gcFD(L, xs[i].D)
	}
	fdP := make([][]float64, len(ps))
	for j := range ps {
		fdP[j] = gcFD(L, ps[j])
		gcNontrivial(t, c.params[j].Name+" grad", fdP[j])
	}

	var firstOut []float32
	var firstDin [][]float32
	for pass, shared := range []bool{false, true} {
		name := map[bool]string{false: "exclusive", true: "shared"}[shared]
		for i, in := range c.inputs {
			in.Write(gc32(xs[i].D))
		}
		env := &Env{Device: dev, Training: true}
		if shared {
			for _, in := range c.inputs {
				in.Retain()
			}
		}
		out, err := c.forward(env, c.inputs)
		if err != nil {
			t.Fatal(err)
		}
		if shared {
			for i, in := range c.inputs {
				in.Release()
				gcClose(t, name+": input after forward", in.Read(), xs[i].D, 0)
			}
		}
		if got := [4]int{want.N, want.C, want.H, want.W}; out.Shape() != got {
			t.Fatalf("%s: forward shape %v, want %v", name, out.Shape(), got)
		}
		gcClose(t, name+": forward", out.Read(), want.D, gcTolFwd)
		outCopy := out.Read()
		dout := gcTensor(t, dev, out.N, out.C, out.H, out.W, gc32(R))
		out.Release()
		if shared {
			dout.Retain()
		}
		dins, err := c.backward(env, dout)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range c.inputs {
			if in.Refs() != 1 {
				t.Errorf("%s: after backward an input has %d references, want 1 (the test's): the layer kept one", name, in.Refs())
			}
		}
		live := append(append([]*Tensor(nil), c.inputs...), dins...)
		if shared {
			gcCheckLive(t, name+": after backward", dev, base, append(live, dout)...)
			gcClose(t, name+": dout after backward", dout.Read(), R, 0)
			dout.Release()
		}
		gcCheckLive(t, name+": after backward", dev, base, live...)
		for i, d := range dins {
			if d == nil {
				continue
			}
			gcNontrivial(t, "din", fdIn[i])
			gcClose(t, name+": din", d.Read(), fdIn[i], gcTolGrad)
		}
		for j, p := range c.params {
			gcClose(t, name+": "+p.Name+" grad", p.ReadGrad(), gcScale(fdP[j], float64(pass+1)), gcTolGrad)
		}
		if pass == 0 {
			firstOut = outCopy
			for _, d := range dins {
				var s []float32
				if d != nil {
					s = append(s, d.Read()...)
				}
				firstDin = append(firstDin, s)
			}
		} else {
			gcEqual(t, "forward, shared vs exclusive", outCopy, firstOut)
			for i, d := range dins {
				if d != nil {
					gcEqual(t, "din, shared vs exclusive", d.Read(), firstDin[i])
				}
			}
		}
		for _, d := range dins {
			d.Release()
		}
		gcCheckLive(t, name+": after releasing din", dev, base, c.inputs...)
	}

	for i, in := range c.inputs {
		in.Write(gc32(xs[i].D))
	}
	env := &Env{Device: dev}
	out, err := c.forward(env, c.inputs)
	if err != nil {
		t.Fatal(err)
	}
	gcCheckLive(t, "eval: after forward", dev, base, append(append([]*Tensor(nil), c.inputs...), out)...)
	for _, in := range c.inputs {
		if want := map[bool]int{false: 1, true: 2}[in == out]; in.Refs() != want {
			t.Errorf("eval: after forward an input has %d references, want %d: the layer kept one", in.Refs(), want)
		}
	}
	if c.evalSame {
		gcClose(t, "eval: forward", out.Read(), want.D, gcTolFwd)
	}
	out.Release()
	gcCheckLive(t, "eval: after releasing out", dev, base, c.inputs...)
}

func gcFillParam(rng *rand.Rand, p *Param, lo, hi float64) {
	p.Write(gcUniform(rng, p.Len(), lo, hi))
}

func gcParams(ps ...*Param) []*Param { return appendNonNil(nil, ps...) }

// ---------------------------------------------------------------------------
// per-layer checks

func TestGradConv2d(t *testing.T) {
	for _, tc := range []struct {
		name              string
		n, c, h, w, oc, k int
		pad               int
		bias, noInputGrad bool
	}{
		{"3x3/pad1", 2, 3, 5, 7, 4, 3, 1, false, false},
		{"3x3/pad1/bias", 2, 3, 5, 7, 4, 3, 1, true, false},
		{"3x3/pad1/no-input-grad", 2, 3, 5, 7, 4, 3, 1, false, true},
		{"3x3/pad0", 1, 2, 6, 5, 3, 3, 0, true, false},
		{"1x1/bias", 2, 5, 3, 7, 2, 1, 0, true, false}, // outc: the direct (no im2col) path
		{"5x5/pad2/tiny-image", 2, 2, 3, 2, 3, 5, 2, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := gcRNG(t.Name())
			dev := testDevice()
			l, err := NewConv2d(dev, "conv", tc.c, tc.oc, tc.k, tc.pad, tc.bias)
			if err != nil {
				t.Fatal(err)
			}
			l.NoInputGrad = tc.noInputGrad
			gcFillParam(rng, l.Weight, -1, 1)
			if l.Bias != nil {
				gcFillParam(rng, l.Bias, -1, 1)
			}
			x := gcTensor(t, dev, tc.n, tc.c, tc.h, tc.w, gcUniform(rng, tc.n*tc.c*tc.h*tc.w, -1, 1))
			gcCheckLayer(t, rng, gcLayer{
				dev: dev, inputs: []*Tensor{x}, params: gcParams(l.Weight, l.Bias), evalSame: true,
				forward: func(env *Env, in []*Tensor) (*Tensor, error) { return l.Forward(env, in[0]) },
				backward: func(env *Env, dout *Tensor) ([]*Tensor, error) {
					din, err := l.Backward(env, dout)
					if tc.noInputGrad && din != nil {
						t.Errorf("NoInputGrad conv returned a din")
					}
					return []*Tensor{din}, err
				},
				ref: func(xs []gcT, ps [][]float64) gcT {
					var b []float64
					if tc.bias {
						b = ps[1]
					}
					return gcRefConv(xs[0], ps[0], b, tc.oc, tc.k, tc.pad)
				},
			})
			x.Release()
		})
	}
}

func TestGradUpConv(t *testing.T) {
	for _, tc := range []struct {
		name           string
		n, c, h, w, oc int
	}{
		{"2x4x3x5->3", 2, 4, 3, 5, 3},
		{"1x3x1x1->2", 1, 3, 1, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := gcRNG(t.Name())
			dev := testDevice()
			l, err := NewUpConv(dev, "up", tc.c, tc.oc)
			if err != nil {
				t.Fatal(err)
			}
			gcFillParam(rng, l.Weight, -1, 1)
			gcFillParam(rng, l.Bias, -1, 1)
			x := gcTensor(t, dev, tc.n, tc.c, tc.h, tc.w, gcUniform(rng, tc.n*tc.c*tc.h*tc.w, -1, 1))
			gcCheckLayer(t, rng, gcLayer{
				dev: dev, inputs: []*Tensor{x}, params: gcParams(l.Weight, l.Bias), evalSame: true,
				forward: func(env *Env, in []*Tensor) (*Tensor, error) { return l.Forward(env, in[0]) },
				backward: func(env *Env, dout *Tensor) ([]*Tensor, error) {
					din, err := l.Backward(env, dout)
					return []*Tensor{din}, err
				},
				ref: func(xs []gcT, ps [][]float64) gcT { return gcRefUpConv(xs[0], ps[0], ps[1], tc.oc) },
			})
			x.Release()
		})
	}
}

func TestGradBatchNorm(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, c, h, w int
	}{
		{"2x3x5x7", 2, 3, 5, 7},
		{"3x2x1x1", 3, 2, 1, 1}, // the deepest UNet level: 1x1 images, M = N
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := gcRNG(t.Name())
			dev := testDevice()
			l, err := NewBatchNorm2d(dev, "bn", tc.c)
			if err != nil {
				t.Fatal(err)
			}
			gcFillParam(rng, l.Weight, 0.5, 1.5)
			gcFillParam(rng, l.Bias, -0.5, 0.5)
			// Non-zero mean and non-unit scale, so that centring matters.
			x := gcTensor(t, dev, tc.n, tc.c, tc.h, tc.w, gcUniform(rng, tc.n*tc.c*tc.h*tc.w, 1, 4))
			gcCheckLayer(t, rng, gcLayer{
				dev: dev, inputs: []*Tensor{x}, params: gcParams(l.Weight, l.Bias),
				forward: func(env *Env, in []*Tensor) (*Tensor, error) { return l.Forward(env, in[0]) },
				backward: func(env *Env, dout *Tensor) ([]*Tensor, error) {
					din, err := l.Backward(env, dout)
					return []*Tensor{din}, err
				},
				ref: func(xs []gcT, ps [][]float64) gcT {
					y, _, _ := gcRefBatchNorm(xs[0], ps[0], ps[1], 1e-5)
					return y
				},
			})
			x.Release()
		})
	}
}

// TestBatchNormRunningStats checks PyTorch's update rule after one training
// forward, running = 0.9*running + 0.1*batch with the unbiased batch
// variance, and that eval mode normalizes with the running statistics.
func TestBatchNormRunningStats(t *testing.T) {
	rng := gcRNG(t.Name())
	dev := testDevice()
	const n, c, h, w = 2, 3, 5, 7
	l, err := NewBatchNorm2d(dev, "bn", c)
	if err != nil {
		t.Fatal(err)
	}
	gcFillParam(rng, l.Weight, 0.5, 1.5)
	gcFillParam(rng, l.Bias, -0.5, 0.5)
	// Start from non-default statistics so the (1-momentum)*old term counts.
	gcFillParam(rng, l.RunningMean, -1, 1)
	gcFillParam(rng, l.RunningVar, 0.5, 2)
	rm0, rv0 := gc64(l.RunningMean.Read()), gc64(l.RunningVar.Read())
	gamma, beta := gc64(l.Weight.Read()), gc64(l.Bias.Read())

	x := gcTensor(t, dev, n, c, h, w, gcUniform(rng, n*c*h*w, -1, 3))
	base := dev.Pool.Stats().Allocated.Current - gcBytes(x)
	env := &Env{Device: dev, Training: true}
	out, err := l.Forward(env, x)
	if err != nil {
		t.Fatal(err)
	}
	_, mean, biased := gcRefBatchNorm(gcOf(x), gamma, beta, 1e-5)
	m := float64(n * h * w)
	wantRM, wantRV := make([]float64, c), make([]float64, c)
	for i := range c {
		wantRM[i] = 0.9*rm0[i] + 0.1*mean[i]
		wantRV[i] = 0.9*rv0[i] + 0.1*biased[i]*m/(m-1)
	}
	// Single float32 roundings of O(1) values: 1e-6 is ~10 ulps.
	gcClose(t, "running_mean", l.RunningMean.Read(), wantRM, 1e-6)
	gcClose(t, "running_var", l.RunningVar.Read(), wantRV, 1e-6)
	if l.NumBatchesTracked != 1 {
		t.Errorf("num_batches_tracked = %d, want 1", l.NumBatchesTracked)
	}
	dout := gcTensor(t, dev, n, c, h, w, gcUniform(rng, n*c*h*w, -1, 1))
	out.Release()
	din, err := l.Backward(env, dout)
	if err != nil {
		t.Fatal(err)
	}
	din.Release()

	// Eval: running statistics, which eval must not change.
	x2 := gcTensor(t, dev, n, c, h, w, gcUniform(rng, n*c*h*w, -2, 2))
	rm1, rv1 := l.RunningMean.Read(), l.RunningVar.Read()
	out, err = l.Forward(&Env{Device: dev}, x2)
	if err != nil {
		t.Fatal(err)
	}
	gcCheckLive(t, "eval forward", dev, base, x, x2, out)
	gcClose(t, "eval forward", out.Read(), gcRefBatchNormEval(gcOf(x2), gamma, beta, gc64(rm1), gc64(rv1), 1e-5).D, gcTolFwd)
	gcEqual(t, "running_mean after eval", l.RunningMean.Read(), rm1)
	gcEqual(t, "running_var after eval", l.RunningVar.Read(), rv1)
	if l.NumBatchesTracked != 1 {
		t.Errorf("num_batches_tracked after eval = %d, want 1", l.NumBatchesTracked)
	}
	out.Release()
	x.Release()
	x2.Release()
	gcCheckLive(t, "end", dev, base)
}

func TestGradGroupNorm(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, c, h, w int
		groups     int
	}{
		{"2x6x5x7/3groups", 2, 6, 5, 7, 3},
		{"2x6x5x7/1group", 2, 6, 5, 7, 1},
		{"2x6x3x5/6groups", 2, 6, 3, 5, 6},
		{"3x4x1x2/2groups", 3, 4, 1, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := gcRNG(t.Name())
			dev := testDevice()
			l, err := NewGroupNorm(dev, "gn", tc.groups, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			gcFillParam(rng, l.Weight, 0.5, 1.5)
			gcFillParam(rng, l.Bias, -0.5, 0.5)
			x := gcTensor(t, dev, tc.n, tc.c, tc.h, tc.w, gcUniform(rng, tc.n*tc.c*tc.h*tc.w, 1, 4))
			gcCheckLayer(t, rng, gcLayer{
				dev: dev, inputs: []*Tensor{x}, params: gcParams(l.Weight, l.Bias), evalSame: true,
				forward: func(env *Env, in []*Tensor) (*Tensor, error) { return l.Forward(env, in[0]) },
				backward: func(env *Env, dout *Tensor) ([]*Tensor, error) {
					din, err := l.Backward(env, dout)
					return []*Tensor{din}, err
				},
				ref: func(xs []gcT, ps [][]float64) gcT {
					return gcRefGroupNorm(xs[0], tc.groups, ps[0], ps[1], 1e-5)
				},
			})
			x.Release()
		})
	}
	t.Run("indivisible", func(t *testing.T) {
		dev := testDevice()
		if _, err := NewGroupNorm(dev, "gn", 4, 6); err == nil || !strings.Contains(err.Error(), "not divisible") {
			t.Errorf("GroupNorm(4 groups, 6 channels): err = %v, want one saying not divisible", err)
		}
	})
}

func TestGradReLU(t *testing.T) {
	rng := gcRNG(t.Name())
	dev := testDevice()
	var l ReLU
	x := gcTensor(t, dev, 2, 3, 5, 7, gcAwayFromZero(rng, 2*3*5*7))
	gcCheckLayer(t, rng, gcLayer{
		dev: dev, inputs: []*Tensor{x}, evalSame: true,
		forward: func(env *Env, in []*Tensor) (*Tensor, error) { return l.Forward(env, in[0]) },
		backward: func(env *Env, dout *Tensor) ([]*Tensor, error) {
			din, err := l.Backward(env, dout)
			return []*Tensor{din}, err
		},
		ref: func(xs []gcT, _ [][]float64) gcT { return gcRefReLU(xs[0]) },
	})
	x.Release()
}

// TestReLUInPlace: with the caller holding the only reference, ReLU works in
// the input's buffer (forward) and dout's buffer (backward); the numbers are
// the same as on the copying path and nothing is left allocated.
func TestReLUInPlace(t *testing.T) {
	rng := gcRNG(t.Name())
	dev := testDevice()
	const n, c, h, w = 2, 3, 5, 7
	xv := gcUniform(rng, n*c*h*w, -1, 1) // exact zeros are fine here: no differences taken
	xv[1], xv[2] = 0, float32(math.Copysign(0, -1))
	gv := gcUniform(rng, n*c*h*w, -1, 1)
	env := &Env{Device: dev, Training: true}

	type result struct{ out, din []float32 }
	run := func(inPlace bool) result {
		var l ReLU
		x := gcTensor(t, dev, n, c, h, w, xv)
		if !inPlace {
			x.Retain() // someone else holds x
		}
		out, err := l.Forward(env, x)
		if err != nil {
			t.Fatal(err)
		}
		if (out == x) != inPlace {
			t.Errorf("in place %v: out == in is %v", inPlace, out == x)
		}
		if !inPlace {
			gcEqual(t, "input after copying forward", x.Read(), xv)
			x.Release()
		}
		x.Release() // the caller is done with its input, as forwardChain is
		if out.Refs() != 2 {
			t.Errorf("in place %v: out has %d references, want 2 (caller, saved)", inPlace, out.Refs())
		}
		res := result{out: out.Read()}
		dout := gcTensor(t, dev, n, c, h, w, gv)
		out.Release()
		if !inPlace {
			dout.Retain()
		}
		din, err := l.Backward(env, dout)
		if err != nil {
			t.Fatal(err)
		}
		if (din == dout) != inPlace {
			t.Errorf("in place %v: din == dout is %v", inPlace, din == dout)
		}
		if !inPlace {
			gcEqual(t, "dout after copying backward", dout.Read(), gv)
			dout.Release()
		}
		gcCheckLive(t, "after backward", dev, 0, din)
		res.din = din.Read()
		din.Release()
		gcCheckLive(t, "end", dev, 0)
		return res
	}
	a, b := run(true), run(false)
	gcEqual(t, "out, in place vs copy", a.out, b.out)
	gcEqual(t, "din, in place vs copy", a.din, b.din)
	for i, v := range xv {
		want, g := max(v, 0), float32(0)
		if v > 0 {
			g = gv[i]
		}
		if a.out[i] != want || a.din[i] != g {
			t.Errorf("x=%v: out %v din %v, want %v %v", v, a.out[i], a.din[i], want, g)
		}
	}
}

func TestGradMaxPool(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, c, h, w int
	}{
		{"5x7/floor", 2, 3, 5, 7}, // last row and column dropped, get 0 gradient
		{"4x6", 1, 2, 4, 6},
		{"3x2", 2, 1, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := gcRNG(t.Name())
			dev := testDevice()
			var l MaxPool
			x := gcTensor(t, dev, tc.n, tc.c, tc.h, tc.w, gcDistinct(rng, tc.n*tc.c*tc.h*tc.w))
			gcCheckLayer(t, rng, gcLayer{
				dev: dev, inputs: []*Tensor{x}, evalSame: true,
				forward: func(env *Env, in []*Tensor) (*Tensor, error) { return l.Forward(env, in[0]) },
				backward: func(env *Env, dout *Tensor) ([]*Tensor, error) {
					din, err := l.Backward(env, dout)
					return []*Tensor{din}, err
				},
				ref: func(xs []gcT, _ [][]float64) gcT { y, _ := gcRefMaxPool(xs[0]); return y },
			})
			x.Release()
		})
	}
}

// TestMaxPoolTies: on ties the gradient goes to the first maximum in
// row-major window order, as in PyTorch (where finite differences do not
// apply).
func TestMaxPoolTies(t *testing.T) {
	dev := testDevice()
	windows := [][4]float32{{1, 1, 1, 1}, {0, 2, 1, 2}, {0, 1, 3, 3}, {-1, -2, -1, -3}, {5, 1, 1, 5}}
	vals := make([]float32, 4*len(windows))
	for i, win := range windows {
		vals[2*i], vals[2*i+1] = win[0], win[1]
		vals[2*len(windows)+2*i], vals[2*len(windows)+2*i+1] = win[2], win[3]
	}
	x := gcTensor(t, dev, 1, 1, 2, 2*len(windows), vals)
	var l MaxPool
	env := &Env{Device: dev, Training: true}
	out, err := l.Forward(env, x)
	if err != nil {
		t.Fatal(err)
	}
	y, arg := gcRefMaxPool(gcOf(x))
	gcClose(t, "forward", out.Read(), y.D, 0)
	dout := gcTensor(t, dev, 1, 1, 1, len(windows), gcUniform(gcRNG(t.Name()), len(windows), 1, 2))
	want := make([]float64, x.Len())
	g := dout.Read()
	for o, j := range arg {
		want[j] = float64(g[o])
	}
	out.Release()
	din, err := l.Backward(env, dout)
	if err != nil {
		t.Fatal(err)
	}
	gcClose(t, "din", din.Read(), want, 0)
	din.Release()
	x.Release()
	gcCheckLive(t, "end", dev, 0)
}

func TestGradUpsample(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, c, h, w int
	}{
		{"2x3x5x7", 2, 3, 5, 7},
		{"1x2x1x3", 1, 2, 1, 3}, // a single row: both vertical taps are row 0
		{"1x1x1x1", 1, 1, 1, 1},
		{"2x1x2x2", 2, 1, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := gcRNG(t.Name())
			dev := testDevice()
			var l Upsample2
			x := gcTensor(t, dev, tc.n, tc.c, tc.h, tc.w, gcUniform(rng, tc.n*tc.c*tc.h*tc.w, -1, 1))
			gcCheckLayer(t, rng, gcLayer{
				dev: dev, inputs: []*Tensor{x}, evalSame: true,
				forward: func(env *Env, in []*Tensor) (*Tensor, error) { return l.Forward(env, in[0]) },
				backward: func(env *Env, dout *Tensor) ([]*Tensor, error) {
					din, err := l.Backward(env, dout)
					return []*Tensor{din}, err
				},
				ref: func(xs []gcT, _ [][]float64) gcT { return gcRefUpsample(xs[0]) },
			})
			x.Release()
		})
	}
}

// TestUpsampleKnownValues pins the align_corners=False weights on a 1x2 row
// [a b] -> [a, .75a+.25b, .25a+.75b, b], independently of gcRefUpsample.
func TestUpsampleKnownValues(t *testing.T) {
	dev := testDevice()
	x := gcTensor(t, dev, 1, 1, 1, 2, []float32{4, 8})
	var l Upsample2
	out, err := l.Forward(&Env{Device: dev}, x)
	if err != nil {
		t.Fatal(err)
	}
	row := []float64{4, 5, 7, 8}
	gcClose(t, "upsample", out.Read(), append(append([]float64(nil), row...), row...), 0)
	out.Release()
	x.Release()
}

func TestGradConcat(t *testing.T) {
	rng := gcRNG(t.Name())
	dev := testDevice()
	var l Concat
	skip := gcTensor(t, dev, 2, 3, 5, 7, gcUniform(rng, 2*3*5*7, -1, 1))
	up := gcTensor(t, dev, 2, 2, 5, 7, gcUniform(rng, 2*2*5*7, -1, 1))
	gcCheckLayer(t, rng, gcLayer{
		dev: dev, inputs: []*Tensor{skip, up}, evalSame: true,
		forward: func(env *Env, in []*Tensor) (*Tensor, error) { return l.Forward(env, in[0], in[1]) },
		backward: func(env *Env, dout *Tensor) ([]*Tensor, error) {
			ds, du, err := l.Backward(env, dout)
			return []*Tensor{ds, du}, err
		},
		ref: func(xs []gcT, _ [][]float64) gcT { return gcRefConcat(xs[0], xs[1]) },
	})
	skip.Release()
	up.Release()
}

// gcLossLayer is what the losses share: CrossEntropy and Loss.
type gcLossLayer interface {
	Forward(env *Env, logits *Tensor, target backend.View) (float64, error)
	Backward(env *Env, scale float32) (*Tensor, error)
}

// gcLossRun runs a new loss layer's Forward on logits zv of shape (n,k,h,w)
// and target, holding the loss to L, then Backward(scale), holding dlogits
// to the finite differences fd times scale, and returns dlogits. With
// release the caller drops its logits reference before Backward, which may
// then reuse the buffer (and must: dlogits is the logits tensor exactly
// when released); either way only dlogits and the caller's logits are live
// after Backward, and nothing at the end.
func gcLossRun(t *testing.T, env *Env, newLayer func() gcLossLayer, shape [4]int, zv []float32, target []uint8, L func() float64, fd []float64, release bool, scale float32) []float32 {
	t.Helper()
	dev := env.Device
	logits := gcTensor(t, dev, shape[0], shape[1], shape[2], shape[3], zv)
	l := newLayer()
	loss, err := l.Forward(env, logits, gcTarget(target))
	if err != nil {
		t.Fatal(err)
	}
	if want := L(); math.Abs(loss-want) > gcTolFwd*(1+math.Abs(want)) {
		t.Errorf("loss = %.9g, want %.9g", loss, want)
	}
	live := []*Tensor{logits}
	if release {
		logits.Release()
		live = nil
	}
	dz, err := l.Backward(env, scale)
	if err != nil {
		t.Fatal(err)
	}
	if release != (dz == logits) {
		t.Errorf("release %v: dlogits reuses logits: %v", release, dz == logits)
	}
	gcCheckLive(t, "after backward", dev, 0, append(live, dz)...)
	gcClose(t, "dlogits", dz.Read(), gcScale(fd, float64(scale)), gcTolGrad)
	g := dz.Read()
	dz.Release()
	if !release {
		gcEqual(t, "logits after backward", logits.Read(), zv)
		logits.Release()
	}
	gcCheckLive(t, "end", dev, 0)
	return g
}

// TestGradCrossEntropy: L is the loss itself. Logits 2x4x5x7 with about a
// fifth of the pixels ignored.
func TestGradCrossEntropy(t *testing.T) {
	rng := gcRNG(t.Name())
	dev := testDevice()
	const n, k, h, w = 2, 4, 5, 7
	zv := gcUniform(rng, n*k*h*w, -3, 3)
	target := make([]uint8, n*h*w)
	for i := range target {
		target[i] = uint8(rng.IntN(k))
		if rng.IntN(5) == 0 {
			target[i] = IgnoreIndex
		}
	}
	z64 := gcT{n, k, h, w, gc64(zv)}
	L := func() float64 { return gcRefCrossEntropy(z64, target) }
	fd := gcFD(L, z64.D)
	gcNontrivial(t, "dlogits", fd)
	gcPoison(dev, 32<<10)
	env := &Env{Device: dev, Training: true}

	run := func(release bool, scale float32) []float32 {
		t.Helper()
		return gcLossRun(t, env, func() gcLossLayer { return &CrossEntropy{} }, [4]int{n, k, h, w}, zv, target, L, fd, release, scale)
	}
	g := run(false, 1)
	gcEqual(t, "dlogits, in place vs copy", run(true, 1), g)
	run(false, 0.25)

	t.Run("eval", func(t *testing.T) {
		logits := gcTensor(t, dev, n, k, h, w, zv)
		var l CrossEntropy
		if _, err := l.Forward(&Env{Device: dev}, logits, gcTarget(target)); err != nil {
			t.Fatal(err)
		}
		if logits.Refs() != 1 {
			t.Errorf("eval forward kept a reference to logits")
		}
		logits.Release()
	})
	t.Run("all ignored", func(t *testing.T) {
		logits := gcTensor(t, dev, n, k, h, w, zv)
		ignored := make([]uint8, len(target))
		for i := range ignored {
			ignored[i] = IgnoreIndex
		}
		var l CrossEntropy
		loss, err := l.Forward(env, logits, gcTarget(ignored))
		if err != nil || loss != 0 {
			t.Errorf("loss = %v, %v; want 0, nil", loss, err)
		}
		dz, err := l.Backward(env, 1)
		if err != nil {
			t.Fatal(err)
		}
		gcClose(t, "dlogits", dz.Read(), make([]float64, dz.Len()), 0)
		dz.Release()
		logits.Release()
		gcCheckLive(t, "end", dev, 0)
	})
	t.Run("bad target", func(t *testing.T) {
		logits := gcTensor(t, dev, n, k, h, w, zv)
		bad := append([]uint8(nil), target...)
		bad[len(bad)-1] = k
		var l CrossEntropy
		_, err := l.Forward(env, logits, gcTarget(bad))
		if err == nil || !strings.Contains(err.Error(), "target value 4") {
			t.Errorf("err = %v, want one naming target value 4", err)
		}
		if logits.Refs() != 1 {
			t.Errorf("failed forward kept a reference to logits")
		}
		logits.Release()
		gcCheckLive(t, "end", dev, 0)
	})
}

// ---------------------------------------------------------------------------
// the whole network

// gcRefUNet is the UNet forward in float64 from the reference layers, with
// the trainable parameters' values taken from P (training mode: BatchNorm
// uses batch statistics). Only the parameters come from m; the architecture
// (3x3 pad 1 convs, norm, widths, skip order) is spelled out here.
func gcRefUNet(m *UNet, P map[*Param][]float64, x gcT) gcT {
	cfg := m.Config
	dc := func(b *DoubleConv, h gcT) gcT {
		for _, l := range b.parts.Layers {
			switch l := l.(type) {
			case *Conv2d:
				var bias []float64
				if cfg.Norm == NormNone {
					bias = P[l.Bias]
				}
				h = gcRefConv(h, P[l.Weight], bias, l.Weight.Shape[0], 3, 1)
			case *BatchNorm2d:
				h, _, _ = gcRefBatchNorm(h, P[l.Weight], P[l.Bias], 1e-5)
			case *GroupNorm:
				h = gcRefGroupNorm(h, min(cfg.Groups, h.C), P[l.Weight], P[l.Bias], 1e-5)
			case *ReLU:
				h = gcRefReLU(h)
			default:
				panic("gcRefUNet: unexpected layer")
			}
		}
		return h
	}
	h := dc(m.levels[0].encBody, x)
	var skips []gcT
	for _, L := range m.levels[1:] {
		skips = append(skips, h)
		p, _ := gcRefMaxPool(h)
		h = dc(L.encBody, p)
	}
	for lv := cfg.Depth - 1; lv >= 0; lv-- {
		L := m.levels[lv]
		skip := skips[lv]
		if cfg.Up == UpTranspose {
			uc := L.up.(*UpConv)
			h = gcRefUpConv(h, P[uc.Weight], P[uc.Bias], h.C/2)
		} else {
			h = gcRefUpsample(h)
		}
		h = dc(L.decBody, gcRefConcat(skip, h))
	}
	return gcRefConv(h, P[m.outc.Weight], P[m.outc.Bias], cfg.Classes, 1, 0)
}

// TestGradUNet checks one training step of a tiny UNet end to end: logits
// and loss against the float64 reference network, and every parameter's
// gradient (CrossEntropy backward then UNet backward, through skips, pools,
// upsampling and norms) against central differences of the reference loss.
// Random inputs keep ReLU and max pool kinks away from the differences with
// overwhelming probability; the seeds are fixed.
//
// The loss is scaled by 64 (CrossEntropy.Backward's scale, as a grad scaler
// would; a power of two, so exact): the unscaled gradients are O(3e-3..0.5),
// where the absolute part of tol*(1+|want|) would be a loose bound; scaled
// they are O(0.2..30) and the relative part applies.
func TestGradUNet(t *testing.T) {
	const lossScale = 64
	for _, cfg := range []Config{
		{Arch: Arch{InChannels: 2, Classes: 3, Base: 2, Depth: 2, Up: UpBilinear, Norm: NormBatch}},
		{Arch: Arch{InChannels: 2, Classes: 3, Base: 2, Depth: 2, Up: UpTranspose, Norm: NormGroup, Groups: 2}},
		{Arch: Arch{InChannels: 1, Classes: 2, Base: 2, Depth: 2, Up: UpTranspose, Norm: NormNone}},
	} {
		t.Run(string(cfg.Up)+"/"+string(cfg.Norm), func(t *testing.T) {
			rng := gcRNG(t.Name())
			dev := testDevice()
			m, err := New(dev, cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			P := map[*Param][]float64{}
			for _, p := range m.Params() {
				switch {
				case !p.Trainable:
				case strings.HasSuffix(p.Name, ".bias"):
					gcFillParam(rng, p, -0.3, 0.3)
				case len(p.Shape) == 1: // norm weight
					gcFillParam(rng, p, 0.5, 1.5)
				}
				if p.Trainable {
					P[p] = gc64(p.Read())
				}
			}
			const n, h, w = 2, 8, 12
			ic := m.Config.InChannels
			x := gcTensor(t, dev, n, ic, h, w, gcUniform(rng, n*ic*h*w, -1, 1))
			defer x.Release()
			target := make([]uint8, n*h*w)
			for i := range target {
				target[i] = uint8(rng.IntN(cfg.Classes))
				if rng.IntN(8) == 0 {
					target[i] = IgnoreIndex
				}
			}
			x64 := gcOf(x)
			gcPoison(dev, 32<<10)

			env := &Env{Device: dev, Training: true}
			base := dev.Pool.Stats().Allocated.Current
			logits, err := m.Forward(env, x)
			if err != nil {
				t.Fatal(err)
			}
			want := gcRefUNet(m, P, x64)
			gcClose(t, "logits", logits.Read(), want.D, gcTolNet)
			var ce CrossEntropy
			loss, err := ce.Forward(env, logits, gcTarget(target))
			if err != nil {
				t.Fatal(err)
			}
			if wl := gcRefCrossEntropy(want, target); math.Abs(loss-wl) > gcTolNet*(1+math.Abs(wl)) {
				t.Errorf("loss = %.9g, want %.9g", loss, wl)
			}
			logits.Release()
			dlogits, err := ce.Backward(env, lossScale)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(env, dlogits); err != nil {
				t.Fatal(err)
			}
			if got := dev.Pool.Stats().Allocated.Current; got != base {
				t.Errorf("after the step %d bytes allocated, want %d", got, base)
			}

			L := func() float64 { return lossScale * gcRefCrossEntropy(gcRefUNet(m, P, x64), target) }
			for _, p := range m.Params() {
				if !p.Trainable {
					continue
				}
				fd := gcFD(L, P[p])
				gcNontrivial(t, p.Name+" grad", fd)
				gcClose(t, p.Name+" grad", p.ReadGrad(), fd, gcTolNet)
			}
		})
	}
}
