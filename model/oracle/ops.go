package oracle

import (
	"fmt"
	"math"

	"github.com/memunet/memunet/model"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Builder builds ops of one dtype into one ExprGraph. Its op methods take
// NCHW nodes (shape (N,C,H,W)) and keep the first error: after one, every op
// returns nil and Err reports it.
type Builder struct {
	G     *G.ExprGraph
	Dtype tensor.Dtype // tensor.Float64 or tensor.Float32
	err   error
	n     int // for unique names
}

// NewBuilder returns a builder over a new graph; dt is tensor.Float64 or tensor.Float32.
func NewBuilder(dt tensor.Dtype) (*Builder, error) {
	if dt != tensor.Float64 && dt != tensor.Float32 {
		return nil, fmt.Errorf("oracle: dtype %v: want float64 or float32", dt)
	}
	return &Builder{G: G.NewGraph(), Dtype: dt}, nil
}

// Err is the first error of any op so far.
func (b *Builder) Err() error { return b.err }

func (b *Builder) fail(op string, err error) {
	if b.err == nil && err != nil {
		b.err = fmt.Errorf("oracle: %s: %w", op, err)
	}
}

// ok records err for op and reports whether building may go on.
func (b *Builder) ok(op string, err error) bool {
	b.fail(op, err)
	return b.err == nil
}

func (b *Builder) name(prefix string) string {
	b.n++
	return fmt.Sprintf("%s_%d", prefix, b.n)
}

// Dense returns a tensor of the builder's dtype with the given shape and
// values (converted from float64).
func (b *Builder) Dense(shape []int, data []float64) *tensor.Dense {
	if b.Dtype == tensor.Float32 {
		v := make([]float32, len(data))
		for i, x := range data {
			v[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), data...)))
}

// Input adds an input node (a leaf that gorgonia.Grad may differentiate
// with respect to) holding data with the given shape; name must be unique in
// the graph.
func (b *Builder) Input(name string, shape []int, data []float64) *G.Node {
	if b.err != nil {
		return nil
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n != len(data) {
		b.fail("input "+name, fmt.Errorf("%d values for shape %v", len(data), shape))
		return nil
	}
	return G.NewTensor(b.G, b.Dtype, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(b.Dense(shape, data)))
}

// Input32 is Input for float32 data.
func (b *Builder) Input32(name string, shape []int, data []float32) *G.Node {
	return b.Input(name, shape, Float64s(data))
}

// constant adds an input node that is never differentiated (the graph is
// only differentiated with respect to the nodes passed to gorgonia.Grad).
func (b *Builder) constant(prefix string, shape []int, data []float64) *G.Node {
	return b.Input(b.name(prefix), shape, data)
}

// Scalar is a constant scalar of the builder's dtype.
func (b *Builder) Scalar(v float64) *G.Node {
	if b.Dtype == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

func dims4(op string, x *G.Node) (n, c, h, w int, err error) {
	s := x.Shape()
	if len(s) != 4 {
		return 0, 0, 0, 0, fmt.Errorf("%s: want an (N,C,H,W) node, got shape %v", op, s)
	}
	return s[0], s[1], s[2], s[3], nil
}

// matmul is a (m,k) x (k,n) matrix product.
func matmul(a, c *G.Node) (*G.Node, error) {
	if a.Dims() != 2 || c.Dims() != 2 {
		return nil, fmt.Errorf("matmul of shapes %v and %v", a.Shape(), c.Shape())
	}
	return G.Mul(a, c)
}

// Conv2d is a k x k, stride 1 convolution with zero padding pad:
// x (N,C,H,W), w (OC,C,k,k), bias (OC) or nil.
func (b *Builder) Conv2d(x, w, bias *G.Node, k, pad int) *G.Node {
	if b.err != nil {
		return nil
	}
	y, err := G.Conv2d(x, w, tensor.Shape{k, k}, []int{pad, pad}, []int{1, 1}, []int{1, 1})
	if !b.ok("conv2d", err) {
		return nil
	}
	if bias != nil {
		y = b.ChannelAdd(y, bias)
	}
	return y
}

// ChannelAdd is x + v[c] for x (N,C,H,W) and v (C).
func (b *Builder) ChannelAdd(x, v *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	y, err := G.BroadcastAdd(x, v, nil, []byte{0, 2, 3})
	b.ok("channel add", err)
	return y
}

// ChannelMul is x * v[c] for x (N,C,H,W) and v (C).
func (b *Builder) ChannelMul(x, v *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	y, err := G.BroadcastHadamardProd(x, v, nil, []byte{0, 2, 3})
	b.ok("channel mul", err)
	return y
}

// normalizeRows returns (x - mean)/sqrt(var + eps) per row of the matrix x
// (R,M), with the biased variance, and the rows' mean and variance (R).
func (b *Builder) normalizeRows(x *G.Node, eps float64) (xhat, mean, variance *G.Node) {
	if b.err != nil {
		return nil, nil, nil
	}
	M := x.Shape()[1]
	invM := b.Scalar(1 / float64(M))
	sum, err := G.Sum(x, 1)
	if !b.ok("norm sum", err) {
		return
	}
	if mean, err = G.Mul(sum, invM); !b.ok("norm mean", err) {
		return
	}
	xc, err := G.BroadcastSub(x, mean, nil, []byte{1})
	if !b.ok("norm center", err) {
		return
	}
	sq, err := G.Square(xc)
	if !b.ok("norm square", err) {
		return
	}
	ss, err := G.Sum(sq, 1)
	if !b.ok("norm sum of squares", err) {
		return
	}
	if variance, err = G.Mul(ss, invM); !b.ok("norm variance", err) {
		return
	}
	ve, err := G.Add(variance, b.Scalar(eps))
	if !b.ok("norm variance+eps", err) {
		return
	}
	// Not G.InverseSqrt: in gorgonia v0.9.18 its gradient is -dy/(2y^3)
	// instead of -dy*y^3/2. Inverse(Sqrt(.)) differentiates correctly.
	std, err := G.Sqrt(ve)
	if !b.ok("norm std", err) {
		return
	}
	invstd, err := G.Inverse(std)
	if !b.ok("norm inverse std", err) {
		return
	}
	xhat, err = G.BroadcastHadamardProd(xc, invstd, nil, []byte{1})
	b.ok("norm scale", err)
	return xhat, mean, variance
}

// BatchNorm2d is PyTorch's BatchNorm2d in training mode: x (N,C,H,W) is
// normalized per channel with the batch mean and biased variance over
// (N,H,W), then y = xhat*gamma[c] + beta[c]. It also returns the batch mean
// and biased variance (C), from which running statistics follow.
func (b *Builder) BatchNorm2d(x, gamma, beta *G.Node, eps float64) (y, mean, variance *G.Node) {
	if b.err != nil {
		return nil, nil, nil
	}
	N, C, H, W, err := dims4("batch norm", x)
	if !b.ok("batch norm", err) {
		return
	}
	xt, err := G.Transpose(x, 1, 0, 2, 3)
	if !b.ok("batch norm transpose", err) {
		return
	}
	x2, err := G.Reshape(xt, tensor.Shape{C, N * H * W})
	if !b.ok("batch norm reshape", err) {
		return
	}
	xhat, mean, variance := b.normalizeRows(x2, eps)
	if b.err != nil {
		return
	}
	y2, err := G.BroadcastHadamardProd(xhat, gamma, nil, []byte{1})
	if !b.ok("batch norm gamma", err) {
		return
	}
	if y2, err = G.BroadcastAdd(y2, beta, nil, []byte{1}); !b.ok("batch norm beta", err) {
		return
	}
	y4, err := G.Reshape(y2, tensor.Shape{C, N, H, W})
	if !b.ok("batch norm reshape back", err) {
		return
	}
	y, err = G.Transpose(y4, 1, 0, 2, 3)
	b.ok("batch norm transpose back", err)
	return y, mean, variance
}

// GroupNorm is PyTorch's GroupNorm(groups, C): x (N,C,H,W) is normalized
// over each (sample, group of C/groups channels) with the biased variance,
// then y = xhat*gamma[c] + beta[c].
func (b *Builder) GroupNorm(x, gamma, beta *G.Node, groups int, eps float64) *G.Node {
	if b.err != nil {
		return nil
	}
	N, C, H, W, err := dims4("group norm", x)
	if !b.ok("group norm", err) {
		return nil
	}
	if groups <= 0 || C%groups != 0 {
		b.fail("group norm", fmt.Errorf("%d channels in %d groups", C, groups))
		return nil
	}
	x2, err := G.Reshape(x, tensor.Shape{N * groups, C / groups * H * W})
	if !b.ok("group norm reshape", err) {
		return nil
	}
	xhat, _, _ := b.normalizeRows(x2, eps)
	if b.err != nil {
		return nil
	}
	x4, err := G.Reshape(xhat, tensor.Shape{N, C, H, W})
	if !b.ok("group norm reshape back", err) {
		return nil
	}
	return b.ChannelAdd(b.ChannelMul(x4, gamma), beta)
}

// ReLU is x * (x > 0), whose gradient is 0 at 0 as in PyTorch.
func (b *Builder) ReLU(x *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	pos, err := G.Gt(x, b.Scalar(0), true)
	if !b.ok("relu compare", err) {
		return nil
	}
	y, err := G.HadamardProd(x, pos)
	b.ok("relu", err)
	return y
}

// MaxPool2 is a 2x2, stride 2 max pooling; odd trailing rows and columns are dropped.
func (b *Builder) MaxPool2(x *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	y, err := G.MaxPool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
	b.ok("max pool", err)
	return y
}

// BilinearMatrix is the (2n, n) row-major matrix of 2x bilinear upsampling
// along one axis with PyTorch's align_corners=False rule: output d reads
// src = (d+0.5)/2 - 0.5 clamped below at 0, i0 = floor(src),
// i1 = min(i0+1, n-1), with weights 1-l and l, l = src - i0.
func BilinearMatrix(n int) []float64 {
	a := make([]float64, 2*n*n)
	for d := range 2 * n {
		src := math.Max((float64(d)+0.5)/2-0.5, 0)
		i0 := int(math.Floor(src))
		l := src - float64(i0)
		i1 := min(i0+1, n-1)
		a[d*n+i0] += 1 - l
		a[d*n+i1] += l
	}
	return a
}

// transposed returns the (c, r) transpose of the row-major (r, c) matrix a.
func transposed(a []float64, r, c int) []float64 {
	t := make([]float64, len(a))
	for i := range r {
		for j := range c {
			t[j*r+i] = a[i*c+j]
		}
	}
	return t
}

// Upsample2 is 2x bilinear upsampling (align_corners=False): per plane
// out = Ah * X * Aw^T, x (N,C,H,W), out (N,C,2H,2W).
func (b *Builder) Upsample2(x *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	N, C, H, W, err := dims4("upsample", x)
	if !b.ok("upsample", err) {
		return nil
	}
	awT := b.constant("upsample_AwT", []int{W, 2 * W}, transposed(BilinearMatrix(W), 2*W, W))
	ahT := b.constant("upsample_AhT", []int{H, 2 * H}, transposed(BilinearMatrix(H), 2*H, H))
	steps := []func(*G.Node) (*G.Node, error){
		func(n *G.Node) (*G.Node, error) { return G.Reshape(n, tensor.Shape{N * C * H, W}) },
		func(n *G.Node) (*G.Node, error) { return matmul(n, awT) }, // rows interpolated along W
		func(n *G.Node) (*G.Node, error) { return G.Reshape(n, tensor.Shape{N * C, H, 2 * W}) },
		func(n *G.Node) (*G.Node, error) { return G.Transpose(n, 0, 2, 1) },
		func(n *G.Node) (*G.Node, error) { return G.Reshape(n, tensor.Shape{N * C * 2 * W, H}) },
		func(n *G.Node) (*G.Node, error) { return matmul(n, ahT) }, // columns along H
		func(n *G.Node) (*G.Node, error) { return G.Reshape(n, tensor.Shape{N * C, 2 * W, 2 * H}) },
		func(n *G.Node) (*G.Node, error) { return G.Transpose(n, 0, 2, 1) },
		func(n *G.Node) (*G.Node, error) { return G.Reshape(n, tensor.Shape{N, C, 2 * H, 2 * W}) },
	}
	return b.chain("upsample", x, steps)
}

func (b *Builder) chain(op string, x *G.Node, steps []func(*G.Node) (*G.Node, error)) *G.Node {
	for i, f := range steps {
		var err error
		if x, err = f(x); !b.ok(fmt.Sprintf("%s step %d", op, i), err) {
			return nil
		}
	}
	return x
}

// UpConv is PyTorch's ConvTranspose2d(C, OC, 2, stride=2):
// x (N,C,H,W), w (C,OC,2,2), bias (OC), out (N,OC,2H,2W) with
// out[n,o,2i+a,2j+c] = bias[o] + sum_k x[n,k,i,j] w[k,o,a,c].
func (b *Builder) UpConv(x, w, bias *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	N, C, H, W, err := dims4("transposed conv", x)
	if !b.ok("transposed conv", err) {
		return nil
	}
	ws := w.Shape()
	if len(ws) != 4 || ws[0] != C || ws[2] != 2 || ws[3] != 2 {
		b.fail("transposed conv", fmt.Errorf("weight shape %v for input %v", ws, x.Shape()))
		return nil
	}
	OC := ws[1]
	w2, err := G.Reshape(w, tensor.Shape{C, OC * 4})
	if !b.ok("transposed conv weight reshape", err) {
		return nil
	}
	steps := []func(*G.Node) (*G.Node, error){
		func(n *G.Node) (*G.Node, error) { return G.Transpose(n, 0, 2, 3, 1) }, // (N,H,W,C)
		func(n *G.Node) (*G.Node, error) { return G.Reshape(n, tensor.Shape{N * H * W, C}) },
		func(n *G.Node) (*G.Node, error) { return matmul(n, w2) }, // (NHW, OC*4)
		func(n *G.Node) (*G.Node, error) { return G.Reshape(n, tensor.Shape{N, H, W, OC, 2, 2}) },
		func(n *G.Node) (*G.Node, error) { return G.Transpose(n, 0, 3, 1, 4, 2, 5) }, // (N,OC,H,2,W,2)
		func(n *G.Node) (*G.Node, error) { return G.Reshape(n, tensor.Shape{N, OC, 2 * H, 2 * W}) },
	}
	y := b.chain("transposed conv", x, steps)
	if b.err != nil {
		return nil
	}
	return b.ChannelAdd(y, bias)
}

// Concat joins skip (N,Cs,H,W) and up (N,Cu,H,W) along channels, skip first.
func (b *Builder) Concat(skip, up *G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	y, err := G.Concat(1, skip, up)
	b.ok("concat", err)
	return y
}

// CrossEntropy is the mean over pixels whose target is not
// model.IgnoreIndex of -log softmax(logits)[target], for logits (N,K,H,W)
// and target (N,H,W) flattened. With no counted pixel it is 0. The
// log-sum-exp is not shifted by the maximum (gorgonia's max would add
// gradient paths); logits of a UNet are far from exp's overflow.
func (b *Builder) CrossEntropy(logits *G.Node, target []uint8) *G.Node {
	loss, _ := b.CrossEntropyTargets(logits, target)
	return loss
}

// Targets are the inputs of a CrossEntropy graph that depend on the target:
// the valid-pixel mask (P), the one-hot targets (P,K) and 1/count (scalar),
// for P = N*H*W pixels.
type Targets struct {
	Mask, OneHot, InvCount *G.Node
	P, K                   int
	dt                     tensor.Dtype
}

// CrossEntropyTargets is CrossEntropy that also returns its target inputs,
// so that the graph can be rerun on another target (Targets.Set).
func (b *Builder) CrossEntropyTargets(logits *G.Node, target []uint8) (*G.Node, *Targets) {
	if b.err != nil {
		return nil, nil
	}
	N, K, H, W, err := dims4("cross entropy", logits)
	if !b.ok("cross entropy", err) {
		return nil, nil
	}
	P := N * H * W
	mask, onehot, inv, err := targetValues(target, P, K)
	if !b.ok("cross entropy", err) {
		return nil, nil
	}
	tg := &Targets{P: P, K: K, dt: b.Dtype}
	tg.Mask = b.constant("ce_mask", []int{P}, mask)
	tg.OneHot = b.constant("ce_onehot", []int{P, K}, onehot)
	tg.InvCount = G.NewScalar(b.G, b.Dtype, G.WithName(b.name("ce_inv_count")), G.WithValue(b.scalarValue(inv)))
	var z, lse, picked, total, diff *G.Node
	steps := []func() error{
		func() (err error) { z, err = G.Transpose(logits, 0, 2, 3, 1); return },
		func() (err error) { z, err = G.Reshape(z, tensor.Shape{P, K}); return },
		func() (err error) { lse, err = G.Exp(z); return },
		func() (err error) { lse, err = G.Sum(lse, 1); return },
		func() (err error) { lse, err = G.Log(lse); return },
		func() (err error) { lse, err = G.HadamardProd(lse, tg.Mask); return },
		func() (err error) { total, err = G.Sum(lse); return },
		func() (err error) { picked, err = G.HadamardProd(z, tg.OneHot); return },
		func() (err error) { picked, err = G.Sum(picked); return },
		func() (err error) { diff, err = G.Sub(total, picked); return },
		func() (err error) { diff, err = G.Mul(diff, tg.InvCount); return },
	}
	for i, f := range steps {
		if !b.ok(fmt.Sprintf("cross entropy step %d", i), f()) {
			return nil, nil
		}
	}
	return diff, tg
}

// Set binds the values for another target of the same shape.
func (tg *Targets) Set(target []uint8) error {
	mask, onehot, inv, err := targetValues(target, tg.P, tg.K)
	if err != nil {
		return fmt.Errorf("oracle: cross entropy: %w", err)
	}
	b := &Builder{Dtype: tg.dt}
	for _, l := range []struct {
		n *G.Node
		v G.Value
	}{
		{tg.Mask, b.Dense([]int{tg.P}, mask)},
		{tg.OneHot, b.Dense([]int{tg.P, tg.K}, onehot)},
		{tg.InvCount, b.scalarValue(inv)},
	} {
		if err := G.Let(l.n, l.v); err != nil {
			return fmt.Errorf("oracle: cross entropy: binding %v: %w", l.n, err)
		}
	}
	return nil
}

// targetValues returns the mask, one-hot and 1/count (1 with no valid pixel)
// of P target pixels over K classes.
func targetValues(target []uint8, P, K int) (mask, onehot []float64, invCount float64, err error) {
	if len(target) != P {
		return nil, nil, 0, fmt.Errorf("%d targets for %d pixels", len(target), P)
	}
	mask = make([]float64, P)
	onehot = make([]float64, P*K)
	count := 0
	for p, t := range target {
		if t == model.IgnoreIndex {
			continue
		}
		if int(t) >= K {
			return nil, nil, 0, fmt.Errorf("target %d at pixel %d is not one of %d classes (nor the ignore index %d)", t, p, K, model.IgnoreIndex)
		}
		mask[p] = 1
		onehot[p*K+int(t)] = 1
		count++
	}
	return mask, onehot, 1 / float64(max(count, 1)), nil
}

func (b *Builder) scalarValue(v float64) G.Value {
	if b.Dtype == tensor.Float32 {
		return G.NewF32(float32(v))
	}
	return G.NewF64(v)
}

// Float64s converts float32 values to float64.
func Float64s(xs []float32) []float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = float64(x)
	}
	return v
}

// ValueFloat64s returns the data of a float64 or float32 gorgonia value
// (a tensor or a scalar) as float64.
func ValueFloat64s(v G.Value) ([]float64, error) {
	switch d := v.Data().(type) {
	case []float64:
		return append([]float64(nil), d...), nil
	case []float32:
		return Float64s(d), nil
	case float64:
		return []float64{d}, nil
	case float32:
		return []float64{float64(d)}, nil
	}
	return nil, fmt.Errorf("oracle: value of type %T is not float64 or float32", v.Data())
}
