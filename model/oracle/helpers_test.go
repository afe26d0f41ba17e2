package oracle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Tolerances. memunet computes in float32 (with float64 accumulation in its
// reductions), the oracle in float64, so they differ by float32 rounding:
// about 6e-8 relative per operation, growing with the number of terms summed
// (a conv weight gradient sums N*H*W products) and the depth of the chain.
// A value a of memunet is accepted against the oracle's b when
//
//	|a - b| <= tol * (|b| + rms(B))
//
// where rms(B) is the root mean square of the whole compared tensor B (1 if
// B is all zero): relative for the large entries, and relative to the
// tensor's scale for entries that are small only because of cancellation
// (a float32 sum of terms of size rms has an absolute error of order
// rms * 1e-7 * sqrt(terms), whatever the size of the result).
const (
	// layerTol: one layer on O(1) inputs; observed errors are below 1e-6.
	layerTol = 1e-4
	// unetTol: the whole UNet, about 20 layers deep, BatchNorm's
	// cancellations included; observed errors are below 1e-5.
	unetTol = 1e-4
	// float32Tol: the oracle built in float32 too; gorgonia sums in float32
	// without float64 accumulation. Observed errors are below 2e-5.
	float32Tol = 1e-3
)

// compare checks got (memunet) against want (oracle) with tolerance tol and
// returns the largest |a-b|/(|b|+rms(B)) seen.
func compare(t *testing.T, what string, got []float32, want []float64, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, oracle has %d", what, len(got), len(want))
		return math.Inf(1)
	}
	var ss float64
	for _, b := range want {
		ss += b * b
	}
	ref := math.Sqrt(ss / float64(max(len(want), 1)))
	if ref == 0 {
		ref = 1
	}
	worst, bad := 0.0, 0
	for i, b := range want {
		a := float64(got[i])
		e := math.Abs(a-b) / (math.Abs(b) + ref)
		if math.IsNaN(a) || math.IsNaN(e) {
			e = math.Inf(1)
		}
		worst = max(worst, e)
		if e > tol {
			if bad < 5 {
				t.Errorf("%s[%d] = %.9g, oracle %.9g (error %.3g of |b|+rms, tolerance %g)", what, i, a, b, e, tol)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values out of tolerance", what, bad, len(want))
	}
	return worst
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1)) }

// randn returns n standard normal float32 values (never all zero).
func randn(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func size(s [4]int) int { return s[0] * s[1] * s[2] * s[3] }

// tensorOf makes an activation tensor holding a copy of data.
func tensorOf(t *testing.T, dev *model.Device, s [4]int, data []float32) *model.Tensor {
	t.Helper()
	x, err := model.NewTensor(dev, memory.Activations, backend.Float32, s[0], s[1], s[2], s[3])
	if err != nil {
		t.Fatal(err)
	}
	x.Write(data)
	return x
}

// memLayer runs one memunet layer: forward on ins (the caller's references
// are released by the harness after it returns), and a backward that
// consumes dout and returns one gradient per input.
type memLayer func(env *model.Env, ins []*model.Tensor) (out *model.Tensor, backward func(dout *model.Tensor) ([]*model.Tensor, error), err error)

// orcLayer builds the same layer in the oracle from input and parameter nodes.
type orcLayer func(b *Builder, ins []*G.Node, params map[string]*G.Node) *G.Node

// checkLayer compares one memunet layer with its oracle on random inputs of
// the given shapes, random values of every trainable parameter in params,
// and L = sum(out * R) with random R: the output, the input gradients and
// the parameter gradients, and that no activation bytes are left in the pool
// afterwards. It returns the worst error seen. The oracle's graph has been
// run when it returns, so nodes orc kept can be read.
func checkLayer(t *testing.T, seed uint64, shapes [][4]int, params []*model.Param, dev *model.Device, mem memLayer, orc orcLayer) float64 {
	t.Helper()
	rng := newRand(seed)
	inData := make([][]float32, len(shapes))
	for i, s := range shapes {
		inData[i] = randn(rng, size(s))
	}
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		v := randn(rng, p.Len())
		p.Write(v)
	}

	// Oracle, float64.
	b, err := NewBuilder(tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	var wrt G.Nodes
	ins := make([]*G.Node, len(shapes))
	for i, s := range shapes {
		ins[i] = b.Input32(fmt.Sprintf("in%d", i), s[:], inData[i])
		wrt = append(wrt, ins[i])
	}
	pnodes := map[string]*G.Node{}
	var pnames []string
	for _, p := range params {
		pnodes[p.Name] = b.Input32(p.Name, p.Shape, p.Read())
		if p.Trainable {
			wrt = append(wrt, pnodes[p.Name])
			pnames = append(pnames, p.Name)
		}
	}
	out := orc(b, ins, pnodes)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	outShape := out.Shape()
	R := randn(rng, outShape.TotalSize())
	rn := b.Input32("R", outShape, R)
	prod, err := G.HadamardProd(out, rn)
	if err != nil {
		t.Fatal(err)
	}
	L, err := G.Sum(prod)
	if err != nil {
		t.Fatal(err)
	}
	grads, err := G.Grad(L, wrt...)
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(b.G)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	wantOut := mustValues(t, out.Value())

	// memunet.
	env := &model.Env{Device: dev, Training: true}
	mins := make([]*model.Tensor, len(shapes))
	for i, s := range shapes {
		mins[i] = tensorOf(t, dev, s, inData[i])
	}
	mout, backward, err := mem(env, mins)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range mins {
		x.Release()
	}
	if got := mout.Shape(); len(outShape) != 4 || got != [4]int(outShape) {
		t.Fatalf("memunet output shape %v, oracle %v", got, outShape)
	}
	worst := compare(t, "out", mout.Read(), wantOut, layerTol)
	dout := tensorOf(t, dev, mout.Shape(), R)
	mout.Release()
	dins, err := backward(dout)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range dins {
		if d == nil {
			continue
		}
		worst = max(worst, compare(t, fmt.Sprintf("din%d", i), d.Read(), mustValues(t, grads[i].Value()), layerTol))
		d.Release()
	}
	for j, name := range pnames {
		var p *model.Param
		for _, q := range params {
			if q.Name == name {
				p = q
			}
		}
		worst = max(worst, compare(t, "d"+name, p.ReadGrad(), mustValues(t, grads[len(shapes)+j].Value()), layerTol))
	}
	if a := dev.Pool.Stats().ByCategory[memory.Activations].Current; a != 0 {
		t.Errorf("%d activation bytes still allocated after backward", a)
	}
	return worst
}

func mustValues(t *testing.T, v G.Value) []float64 {
	t.Helper()
	if v == nil {
		t.Fatal("oracle node has no value")
	}
	d, err := ValueFloat64s(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// targetView is host class indices on a CPU device of their own (so the
// device under test holds only what its layers allocate).
func targetView(target []uint8) backend.View {
	dev := model.NewDevice(cpu.New(), memory.Options{})
	buf, err := dev.Pool.Alloc(memory.Activations, int64(len(target)))
	if err != nil {
		panic(err)
	}
	v := backend.Whole(buf, backend.Uint8)
	dev.Backend.Upload(v, target)
	return v
}
