package oracle

import (
	"fmt"

	"github.com/memunet/memunet/model"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BatchNormEps and BatchNormMomentum are PyTorch's BatchNorm2d defaults,
// which memunet uses; GroupNorm uses the same eps.
const (
	BatchNormEps      = 1e-5
	BatchNormMomentum = 0.1
)

// Net is a UNet built as a gorgonia graph on one batch.
type Net struct {
	*Builder
	Config model.Config
	Image  *G.Node // (N,InChannels,H,W) input, not differentiated
	Logits *G.Node // (N,Classes,H,W)
	Loss   *G.Node // scalar mean cross entropy
	// Params maps each trainable parameter's state_dict name to its input
	// node, holding a copy of the model's value at build time.
	Params map[string]*G.Node
	// Names lists the keys of Params in the model's state_dict order.
	Names []string
	// BatchStats maps each BatchNorm2d's name prefix (e.g. "inc.double_conv.1")
	// to its batch mean and biased variance nodes (C).
	BatchStats map[string][2]*G.Node
	// running holds running_mean / running_var values at build time, by name.
	running map[string][]float64
	// count is N*H*W at each BatchNorm2d, by prefix.
	count   map[string]int
	grads   G.Nodes
	targets *Targets
}

// BuildUNet builds m's network (its Config and a copy of every parameter's
// current value) on one batch: image (N,InChannels,H,W) in NCHW order and
// target (N,H,W) class indices or model.IgnoreIndex, with dtype
// tensor.Float64 or tensor.Float32. BatchNorm runs in training mode (batch
// statistics), as in a training step.
func BuildUNet(m *model.UNet, shape [4]int, image []float32, target []uint8, dt tensor.Dtype) (*Net, error) {
	b, err := NewBuilder(dt)
	if err != nil {
		return nil, err
	}
	cfg := m.Config
	if err := m.CheckInput(shape[1], shape[2], shape[3]); err != nil {
		return nil, err
	}
	if n := shape[0] * shape[1] * shape[2] * shape[3]; n != len(image) || len(target) != n/shape[1] {
		return nil, fmt.Errorf("oracle: %d image values and %d targets for a batch of shape %v", len(image), len(target), shape)
	}
	net := &Net{
		Builder: b, Config: cfg,
		Params:     map[string]*G.Node{},
		BatchStats: map[string][2]*G.Node{},
		running:    map[string][]float64{},
		count:      map[string]int{},
	}
	byName := map[string]*model.Param{}
	for _, p := range m.Params() {
		byName[p.Name] = p
		if p.Trainable {
			net.Params[p.Name] = b.Input32(p.Name, p.Shape, p.Read())
			net.Names = append(net.Names, p.Name)
		} else {
			net.running[p.Name] = Float64s(p.Read())
		}
	}
	param := func(name string) *G.Node {
		n, ok := net.Params[name]
		if !ok {
			b.fail("unet", fmt.Errorf("the model has no trainable parameter %q", name))
		}
		return n
	}
	doubleConv := func(prefix string, x *G.Node) *G.Node {
		idx := 0
		for range 2 {
			conv := fmt.Sprintf("%s.%d", prefix, idx)
			var bias *G.Node
			if cfg.Norm == model.NormNone {
				bias = param(conv + ".bias")
			}
			x = b.Conv2d(x, param(conv+".weight"), bias, 3, 1)
			idx++
			norm := fmt.Sprintf("%s.%d", prefix, idx)
			switch cfg.Norm {
			case model.NormBatch:
				var mean, variance *G.Node
				x, mean, variance = b.BatchNorm2d(x, param(norm+".weight"), param(norm+".bias"), BatchNormEps)
				net.BatchStats[norm] = [2]*G.Node{mean, variance}
				if x != nil {
					s := x.Shape()
					net.count[norm] = s[0] * s[2] * s[3]
				}
				idx++
			case model.NormGroup:
				if x != nil {
					c := x.Shape()[1]
					x = b.GroupNorm(x, param(norm+".weight"), param(norm+".bias"), min(cfg.Groups, c), BatchNormEps)
				}
				idx++
			}
			x = b.ReLU(x)
			idx++
		}
		return x
	}

	net.Image = b.Input32("image", shape[:], image)
	h := doubleConv("inc.double_conv", net.Image)
	skips := []*G.Node{}
	for i := 1; i <= cfg.Depth; i++ {
		skips = append(skips, h)
		h = doubleConv(fmt.Sprintf("down%d.maxpool_conv.1.double_conv", i), b.MaxPool2(h))
	}
	for i := 1; i <= cfg.Depth; i++ {
		skip := skips[len(skips)-1]
		skips = skips[:len(skips)-1]
		var upped *G.Node
		if cfg.Up == model.UpTranspose {
			name := fmt.Sprintf("up%d.up", i)
			upped = b.UpConv(h, param(name+".weight"), param(name+".bias"))
		} else {
			upped = b.Upsample2(h)
		}
		h = doubleConv(fmt.Sprintf("up%d.conv.double_conv", i), b.Concat(skip, upped))
	}
	net.Logits = b.Conv2d(h, param("outc.conv.weight"), param("outc.conv.bias"), 1, 0)
	net.Loss, net.targets = b.CrossEntropyTargets(net.Logits, target)
	if err := b.Err(); err != nil {
		return nil, err
	}
	return net, nil
}

// SetBatch binds another batch of the shape the net was built for, to
// rerun the graph (e.g. a TapeMachine's Reset and RunAll in a training loop)
// without building it again.
func (n *Net) SetBatch(image []float32, target []uint8) error {
	shape := n.Image.Shape()
	if len(image) != shape.TotalSize() {
		return fmt.Errorf("oracle: %d image values for a batch of shape %v", len(image), shape)
	}
	if err := G.Let(n.Image, n.Dense(shape, Float64s(image))); err != nil {
		return fmt.Errorf("oracle: binding the image: %w", err)
	}
	return n.targets.Set(target)
}

// Grad adds the symbolic gradient of Loss with respect to every parameter
// (gorgonia.Grad) and returns the gradient nodes in Names order. It is
// idempotent.
func (n *Net) Grad() (G.Nodes, error) {
	if n.grads != nil {
		return n.grads, nil
	}
	wrt := make(G.Nodes, len(n.Names))
	for i, name := range n.Names {
		wrt[i] = n.Params[name]
	}
	grads, err := G.Grad(n.Loss, wrt...)
	if err != nil {
		return nil, fmt.Errorf("oracle: gradient of the loss: %w", err)
	}
	n.grads = grads
	return grads, nil
}

// Result is the outcome of one forward and backward run of a Net.
type Result struct {
	Loss   float64
	Logits []float64
	// Grads maps each trainable parameter's name to the gradient of Loss.
	Grads map[string][]float64
	// Running maps each BatchNorm2d's running_mean and running_var name to
	// its value after one step from the values the model had when the net
	// was built, as PyTorch updates it (momentum 0.1, unbiased batch
	// variance); empty without batch norm.
	Running map[string][]float64
}

// Run adds the gradient (Grad), runs the graph once on a TapeMachine and
// reads the loss, logits, gradients and updated running statistics.
func (n *Net) Run() (*Result, error) {
	grads, err := n.Grad()
	if err != nil {
		return nil, err
	}
	vm := G.NewTapeMachine(n.G)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, fmt.Errorf("oracle: running the UNet graph: %w", err)
	}
	r := &Result{Grads: map[string][]float64{}, Running: map[string][]float64{}}
	loss, err := ValueFloat64s(n.Loss.Value())
	if err != nil {
		return nil, err
	}
	r.Loss = loss[0]
	if r.Logits, err = ValueFloat64s(n.Logits.Value()); err != nil {
		return nil, err
	}
	for i, name := range n.Names {
		if r.Grads[name], err = ValueFloat64s(grads[i].Value()); err != nil {
			return nil, fmt.Errorf("oracle: gradient of %s: %w", name, err)
		}
	}
	for prefix, st := range n.BatchStats {
		mean, err := ValueFloat64s(st[0].Value())
		if err != nil {
			return nil, err
		}
		variance, err := ValueFloat64s(st[1].Value())
		if err != nil {
			return nil, err
		}
		M := float64(n.count[prefix])
		rm := append([]float64(nil), n.running[prefix+".running_mean"]...)
		rv := append([]float64(nil), n.running[prefix+".running_var"]...)
		for c := range rm {
			unbiased := variance[c]
			if M > 1 {
				unbiased *= M / (M - 1)
			}
			rm[c] = (1-BatchNormMomentum)*rm[c] + BatchNormMomentum*mean[c]
			rv[c] = (1-BatchNormMomentum)*rv[c] + BatchNormMomentum*unbiased
		}
		r.Running[prefix+".running_mean"], r.Running[prefix+".running_var"] = rm, rv
	}
	return r, nil
}
