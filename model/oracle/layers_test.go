package oracle

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// single adapts a single-input memunet layer to memLayer.
func single(l interface {
	Forward(*model.Env, *model.Tensor) (*model.Tensor, error)
	Backward(*model.Env, *model.Tensor) (*model.Tensor, error)
}) memLayer {
	return func(env *model.Env, ins []*model.Tensor) (*model.Tensor, func(*model.Tensor) ([]*model.Tensor, error), error) {
		out, err := l.Forward(env, ins[0])
		return out, func(dout *model.Tensor) ([]*model.Tensor, error) {
			din, err := l.Backward(env, dout)
			return []*model.Tensor{din}, err
		}, err
	}
}

func TestConv2d(t *testing.T) {
	for i, tc := range []struct {
		n, c, h, w, oc, k, pad int
		bias                   bool
	}{
		{2, 3, 7, 5, 4, 3, 1, false},
		{1, 4, 6, 9, 3, 3, 1, true},
		{2, 3, 9, 7, 4, 3, 0, true},
		{2, 5, 5, 6, 2, 1, 0, true}, // the UNet's outc
		{3, 2, 8, 7, 3, 5, 2, false},
	} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d_oc%d_k%d_pad%d_bias%v", tc.n, tc.c, tc.h, tc.w, tc.oc, tc.k, tc.pad, tc.bias), func(t *testing.T) {
			dev := model.NewDevice(cpu.New(), memory.Options{})
			l, err := model.NewConv2d(dev, "conv", tc.c, tc.oc, tc.k, tc.pad, tc.bias)
			if err != nil {
				t.Fatal(err)
			}
			worst := checkLayer(t, uint64(100+i), [][4]int{{tc.n, tc.c, tc.h, tc.w}}, l.Params(), dev, single(l),
				func(b *Builder, ins []*G.Node, ps map[string]*G.Node) *G.Node {
					return b.Conv2d(ins[0], ps["conv.weight"], ps["conv.bias"], tc.k, tc.pad)
				})
			t.Logf("worst error %.3g", worst)
		})
	}
}

func TestUpConv(t *testing.T) {
	for i, tc := range []struct{ n, c, h, w, oc int }{
		{2, 4, 3, 5, 3},
		{1, 3, 4, 4, 2},
		{2, 2, 5, 3, 5},
		{1, 1, 1, 2, 1},
	} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d_oc%d", tc.n, tc.c, tc.h, tc.w, tc.oc), func(t *testing.T) {
			dev := model.NewDevice(cpu.New(), memory.Options{})
			l, err := model.NewUpConv(dev, "up", tc.c, tc.oc)
			if err != nil {
				t.Fatal(err)
			}
			worst := checkLayer(t, uint64(200+i), [][4]int{{tc.n, tc.c, tc.h, tc.w}}, l.Params(), dev, single(l),
				func(b *Builder, ins []*G.Node, ps map[string]*G.Node) *G.Node {
					return b.UpConv(ins[0], ps["up.weight"], ps["up.bias"])
				})
			t.Logf("worst error %.3g", worst)
		})
	}
}

func TestBatchNorm2d(t *testing.T) {
	for i, s := range [][4]int{{2, 3, 5, 7}, {4, 5, 3, 3}, {1, 2, 7, 9}, {3, 1, 1, 2}} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d", s[0], s[1], s[2], s[3]), func(t *testing.T) {
			dev := model.NewDevice(cpu.New(), memory.Options{})
			l, err := model.NewBatchNorm2d(dev, "bn", s[1])
			if err != nil {
				t.Fatal(err)
			}
			// Start the running statistics away from PyTorch's (0, 1).
			rng := newRand(uint64(350 + i))
			rm0, rv0 := randn(rng, s[1]), randn(rng, s[1])
			for c := range rv0 {
				rv0[c] = 1 + rv0[c]*rv0[c]
			}
			l.RunningMean.Write(rm0)
			l.RunningVar.Write(rv0)
			var mean, variance *G.Node
			worst := checkLayer(t, uint64(300+i), [][4]int{s}, l.Params(), dev, single(l),
				func(b *Builder, ins []*G.Node, ps map[string]*G.Node) *G.Node {
					var y *G.Node
					y, mean, variance = b.BatchNorm2d(ins[0], ps["bn.weight"], ps["bn.bias"], BatchNormEps)
					return y
				})
			// Running statistics: PyTorch's update with the unbiased batch variance.
			m := float64(s[0] * s[2] * s[3])
			mu, v := mustValues(t, mean.Value()), mustValues(t, variance.Value())
			wantM, wantV := make([]float64, s[1]), make([]float64, s[1])
			for c := range wantM {
				unbiased := v[c]
				if m > 1 {
					unbiased *= m / (m - 1)
				}
				wantM[c] = 0.9*float64(rm0[c]) + 0.1*mu[c]
				wantV[c] = 0.9*float64(rv0[c]) + 0.1*unbiased
			}
			worst = max(worst, compare(t, "running_mean", l.RunningMean.Read(), wantM, layerTol))
			worst = max(worst, compare(t, "running_var", l.RunningVar.Read(), wantV, layerTol))
			if l.NumBatchesTracked != 1 {
				t.Errorf("num_batches_tracked = %d, want 1", l.NumBatchesTracked)
			}
			t.Logf("worst error %.3g", worst)
		})
	}
}

func TestGroupNorm(t *testing.T) {
	for i, tc := range []struct {
		s      [4]int
		groups int
	}{
		{[4]int{2, 6, 5, 7}, 3},
		{[4]int{3, 4, 6, 5}, 4}, // one channel per group
		{[4]int{1, 8, 3, 9}, 2},
		{[4]int{2, 4, 5, 5}, 1}, // LayerNorm-like
	} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d_g%d", tc.s[0], tc.s[1], tc.s[2], tc.s[3], tc.groups), func(t *testing.T) {
			dev := model.NewDevice(cpu.New(), memory.Options{})
			l, err := model.NewGroupNorm(dev, "gn", tc.groups, tc.s[1])
			if err != nil {
				t.Fatal(err)
			}
			worst := checkLayer(t, uint64(400+i), [][4]int{tc.s}, l.Params(), dev, single(l),
				func(b *Builder, ins []*G.Node, ps map[string]*G.Node) *G.Node {
					return b.GroupNorm(ins[0], ps["gn.weight"], ps["gn.bias"], tc.groups, BatchNormEps)
				})
			t.Logf("worst error %.3g", worst)
		})
	}
}

func TestParameterFreeLayers(t *testing.T) {
	type tc struct {
		name   string
		shapes [][4]int
		mem    func() memLayer
		orc    orcLayer
	}
	var cases []tc
	for _, s := range [][4]int{{2, 3, 5, 7}, {1, 2, 4, 1}} {
		cases = append(cases, tc{"relu", [][4]int{s}, func() memLayer { return single(&model.ReLU{}) },
			func(b *Builder, ins []*G.Node, _ map[string]*G.Node) *G.Node { return b.ReLU(ins[0]) }})
	}
	for _, s := range [][4]int{{2, 3, 7, 9}, {1, 2, 6, 8}, {2, 2, 5, 4}, {1, 1, 2, 3}} {
		cases = append(cases, tc{"maxpool", [][4]int{s}, func() memLayer { return single(&model.MaxPool{}) },
			func(b *Builder, ins []*G.Node, _ map[string]*G.Node) *G.Node { return b.MaxPool2(ins[0]) }})
	}
	for _, s := range [][4]int{{2, 3, 5, 7}, {1, 2, 4, 6}, {2, 1, 3, 2}, {1, 2, 1, 3}} {
		cases = append(cases, tc{"upsample", [][4]int{s}, func() memLayer { return single(&model.Upsample2{}) },
			func(b *Builder, ins []*G.Node, _ map[string]*G.Node) *G.Node { return b.Upsample2(ins[0]) }})
	}
	for _, sh := range [][2][4]int{{{2, 3, 5, 7}, {2, 2, 5, 7}}, {{1, 4, 3, 6}, {1, 1, 3, 6}}} {
		cases = append(cases, tc{"concat", sh[:], func() memLayer {
			l := &model.Concat{}
			return func(env *model.Env, ins []*model.Tensor) (*model.Tensor, func(*model.Tensor) ([]*model.Tensor, error), error) {
				out, err := l.Forward(env, ins[0], ins[1])
				return out, func(dout *model.Tensor) ([]*model.Tensor, error) {
					ds, du, err := l.Backward(env, dout)
					return []*model.Tensor{ds, du}, err
				}, err
			}
		}, func(b *Builder, ins []*G.Node, _ map[string]*G.Node) *G.Node { return b.Concat(ins[0], ins[1]) }})
	}
	for i, c := range cases {
		name := c.name
		for _, s := range c.shapes {
			name += fmt.Sprintf("_%dx%dx%dx%d", s[0], s[1], s[2], s[3])
		}
		t.Run(name, func(t *testing.T) {
			dev := model.NewDevice(cpu.New(), memory.Options{})
			worst := checkLayer(t, uint64(500+i), c.shapes, nil, dev, c.mem(), c.orc)
			t.Logf("worst error %.3g", worst)
		})
	}
}

// TestBilinearMatrix pins the interpolation matrix to hand-computed rows of
// PyTorch's align_corners=False rule, so the oracle does not merely share
// memunet's reading of it.
func TestBilinearMatrix(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []float64 // (2n, n) row-major
	}{
		{1, []float64{1, 1}},
		{2, []float64{1, 0, 0.75, 0.25, 0.25, 0.75, 0, 1}},
		{3, []float64{
			1, 0, 0,
			0.75, 0.25, 0,
			0.25, 0.75, 0,
			0, 0.75, 0.25,
			0, 0.25, 0.75,
			0, 0, 1,
		}},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			got := BilinearMatrix(tc.n)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("BilinearMatrix(%d) = %v, want %v", tc.n, got, tc.want)
			}
		})
	}
}

func TestCrossEntropy(t *testing.T) {
	for i, tc := range []struct {
		s          [4]int // logits (N,K,H,W)
		ignoreFrac float64
	}{
		{[4]int{2, 3, 5, 7}, 0.2},
		{[4]int{1, 2, 4, 6}, 0},
		{[4]int{3, 5, 3, 3}, 0.5},
		{[4]int{1, 3, 2, 3}, 1}, // every pixel ignored: loss and gradient 0
	} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d_ignore%g", tc.s[0], tc.s[1], tc.s[2], tc.s[3], tc.ignoreFrac), func(t *testing.T) {
			rng := newRand(uint64(600 + i))
			logits := randn(rng, size(tc.s))
			for j := range logits {
				logits[j] *= 3
			}
			target := make([]uint8, tc.s[0]*tc.s[2]*tc.s[3])
			for j := range target {
				if rng.Float64() < tc.ignoreFrac {
					target[j] = model.IgnoreIndex
				} else {
					target[j] = uint8(rng.IntN(tc.s[1]))
				}
			}

			b, err := NewBuilder(tensor.Float64)
			if err != nil {
				t.Fatal(err)
			}
			z := b.Input32("logits", tc.s[:], logits)
			loss := b.CrossEntropy(z, target)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			grads, err := G.Grad(loss, z)
			if err != nil {
				t.Fatal(err)
			}
			vm := G.NewTapeMachine(b.G)
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			wantLoss := mustValues(t, loss.Value())

			dev := model.NewDevice(cpu.New(), memory.Options{})
			env := &model.Env{Device: dev, Training: true}
			x := tensorOf(t, dev, tc.s, logits)
			var ce model.CrossEntropy
			got, err := ce.Forward(env, x, targetView(target))
			if err != nil {
				t.Fatal(err)
			}
			x.Release()
			worst := compare(t, "loss", []float32{float32(got)}, wantLoss, layerTol)
			dz, err := ce.Backward(env, 1)
			if err != nil {
				t.Fatal(err)
			}
			worst = max(worst, compare(t, "dlogits", dz.Read(), mustValues(t, grads[0].Value()), layerTol))
			dz.Release()
			if a := dev.Pool.Stats().ByCategory[memory.Activations].Current; a != 0 {
				t.Errorf("%d activation bytes still allocated after backward", a)
			}
			t.Logf("loss %.6g, worst error %.3g", got, worst)
		})
	}
}
