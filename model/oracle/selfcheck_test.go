package oracle

import (
	"fmt"
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestOracleFiniteDifferences checks the oracle itself, independently of
// memunet: the gradient gorgonia derives for each op (of L = sum(out * R),
// or of the loss) against float64 central differences of the same graph's
// forward value. gorgonia's primitives are not all right (v0.9.18's
// InverseSqrt has a wrong gradient), so an op composed from them is trusted
// only once this passes. Central differences with h = 1e-6 in float64 have
// an error of about 1e-9 here; the tolerance is 1e-6 of |g| + rms(gradient).
func TestOracleFiniteDifferences(t *testing.T) {
	type tc struct {
		name   string
		shapes [][]int // inputs, parameters included
		build  func(b *Builder, in []*G.Node) *G.Node
		loss   bool // build returns the scalar loss itself
	}
	target := []uint8{0, 2, 255, 1, 1, 0, 255, 2, 2, 0, 1, 0} // (2,2,3)
	cases := []tc{
		{"conv3x3_pad1_bias", [][]int{{2, 3, 4, 5}, {2, 3, 3, 3}, {2}}, func(b *Builder, in []*G.Node) *G.Node { return b.Conv2d(in[0], in[1], in[2], 3, 1) }, false},
		{"conv1x1_bias", [][]int{{2, 3, 3, 4}, {4, 3, 1, 1}, {4}}, func(b *Builder, in []*G.Node) *G.Node { return b.Conv2d(in[0], in[1], in[2], 1, 0) }, false},
		{"batchnorm", [][]int{{3, 2, 3, 4}, {2}, {2}}, func(b *Builder, in []*G.Node) *G.Node {
			y, _, _ := b.BatchNorm2d(in[0], in[1], in[2], BatchNormEps)
			return y
		}, false},
		{"groupnorm", [][]int{{2, 4, 3, 3}, {4}, {4}}, func(b *Builder, in []*G.Node) *G.Node { return b.GroupNorm(in[0], in[1], in[2], 2, BatchNormEps) }, false},
		{"relu", [][]int{{2, 3, 3, 4}}, func(b *Builder, in []*G.Node) *G.Node { return b.ReLU(in[0]) }, false},
		{"maxpool", [][]int{{2, 2, 5, 4}}, func(b *Builder, in []*G.Node) *G.Node { return b.MaxPool2(in[0]) }, false},
		{"upsample", [][]int{{2, 2, 3, 4}}, func(b *Builder, in []*G.Node) *G.Node { return b.Upsample2(in[0]) }, false},
		{"upconv", [][]int{{2, 3, 2, 3}, {3, 2, 2, 2}, {2}}, func(b *Builder, in []*G.Node) *G.Node { return b.UpConv(in[0], in[1], in[2]) }, false},
		{"concat", [][]int{{2, 2, 3, 3}, {2, 1, 3, 3}}, func(b *Builder, in []*G.Node) *G.Node { return b.Concat(in[0], in[1]) }, false},
		{"cross_entropy", [][]int{{2, 3, 2, 3}}, func(b *Builder, in []*G.Node) *G.Node { return b.CrossEntropy(in[0], target) }, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRand(uint64(800 + i))
			data := make([][]float64, len(c.shapes))
			for j, s := range c.shapes {
				n := 1
				for _, d := range s {
					n *= d
				}
				data[j] = Float64s(randn(rng, n))
			}
			var R []float64
			// eval builds the graph on data, returns L and, if grad, dL/d(every input).
			eval := func(grad bool) (float64, [][]float64) {
				b, err := NewBuilder(tensor.Float64)
				if err != nil {
					t.Fatal(err)
				}
				in := make([]*G.Node, len(c.shapes))
				for j, s := range c.shapes {
					in[j] = b.Input(fmt.Sprintf("in%d", j), s, data[j])
				}
				L := c.build(b, in)
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				if !c.loss {
					if R == nil {
						R = Float64s(randn(rng, L.Shape().TotalSize()))
					}
					p, err := G.HadamardProd(L, b.Input("R", L.Shape(), R))
					if err != nil {
						t.Fatal(err)
					}
					if L, err = G.Sum(p); err != nil {
						t.Fatal(err)
					}
				}
				var gs G.Nodes
				if grad {
					if gs, err = G.Grad(L, in...); err != nil {
						t.Fatal(err)
					}
				}
				vm := G.NewTapeMachine(b.G)
				defer vm.Close()
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				var out [][]float64
				for _, g := range gs {
					out = append(out, mustValues(t, g.Value()))
				}
				return mustValues(t, L.Value())[0], out
			}
			_, grads := eval(true)
			const h = 1e-6
			worst := 0.0
			for j := range data {
				var ss float64
				for _, g := range grads[j] {
					ss += g * g
				}
				ref := math.Sqrt(ss / float64(len(grads[j])))
				if ref == 0 {
					t.Fatalf("input %d: gradient all zero", j)
				}
				for k := range data[j] {
					v := data[j][k]
					data[j][k] = v + h
					lp, _ := eval(false)
					data[j][k] = v - h
					lm, _ := eval(false)
					data[j][k] = v
					num := (lp - lm) / (2 * h)
					e := math.Abs(grads[j][k]-num) / (math.Abs(num) + ref)
					worst = max(worst, e)
					if e > 1e-6 {
						t.Errorf("input %d [%d]: gorgonia gradient %.9g, central difference %.9g", j, k, grads[j][k], num)
					}
				}
			}
			t.Logf("worst error %.3g", worst)
		})
	}
}
