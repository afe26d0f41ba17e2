package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/memunet/memunet/backend"
)

// UpMode is how the decoder doubles the resolution.
type UpMode string

// NormKind is the normalization inside each DoubleConv.
type NormKind string

const (
	UpBilinear  UpMode = "bilinear"  // Upsample2 (align_corners=False), channels kept
	UpTranspose UpMode = "transpose" // UpConv 2x2 stride 2, channels halved

	NormBatch NormKind = "batch" // BatchNorm2d
	NormGroup NormKind = "group" // GroupNorm with Config.Groups groups
	NormNone  NormKind = "none"  // no norm; the convolutions get a bias instead
)

// MaxBase bounds Config.Base so that the widest level, Base*2^Depth, cannot
// overflow; no real network comes near it.
const MaxBase = 1 << 16

// Config is the UNet's architecture. Encoder widths are Base*2^i for
// i = 0..Depth, with 2x2 max pooling between levels; the input's height and
// width must be divisible by 2^Depth.
type Config struct {
	InChannels int      // default 3
	Classes    int      // default 2
	Base       int      // width of the first level; default 16
	Depth      int      // number of down (and up) levels; default 4
	Up         UpMode   // default bilinear
	Norm       NormKind // default batch
	Groups     int      // groups for NormGroup (capped at a layer's width); default 8
	// Checkpoint lists the resolution levels (0 = full size .. Depth = the
	// bottleneck) whose DoubleConv blocks are checkpointed: in forward they
	// keep only their input, in backward they recompute their activations.
	// Level i has the encoder block at that level and, below Depth, the
	// decoder block there too. Empty means none.
	Checkpoint []int
}

// CheckpointAll is the Checkpoint list of every level for a depth.
func CheckpointAll(depth int) []int {
	levels := make([]int, depth+1)
	for i := range levels {
		levels[i] = i
	}
	return levels
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.InChannels == 0 {
		c.InChannels = 3
	}
	if c.Classes == 0 {
		c.Classes = 2
	}
	if c.Base == 0 {
		c.Base = 16
	}
	if c.Depth == 0 {
		c.Depth = 4
	}
	if c.Up == "" {
		c.Up = UpBilinear
	}
	if c.Norm == "" {
		c.Norm = NormBatch
	}
	if c.Groups == 0 {
		c.Groups = 8
	}
	return c
}

// Validate reports the first invalid field, naming it and what is allowed.
func (c Config) Validate() error {
	switch {
	case c.InChannels < 1:
		return fmt.Errorf("model.in_channels: %d: must be at least 1", c.InChannels)
	case c.Classes < 2 || c.Classes > 255:
		return fmt.Errorf("model.classes: %d: must be between 2 and 255", c.Classes)
	case c.Base < 1 || c.Base > MaxBase:
		return fmt.Errorf("model.base: %d: must be between 1 and %d", c.Base, MaxBase)
	case c.Depth < 1 || c.Depth > 8:
		return fmt.Errorf("model.depth: %d: must be between 1 and 8", c.Depth)
	case c.Up != UpBilinear && c.Up != UpTranspose:
		return fmt.Errorf("model.up: %q: must be %q or %q", c.Up, UpBilinear, UpTranspose)
	case c.Norm != NormBatch && c.Norm != NormGroup && c.Norm != NormNone:
		return fmt.Errorf("model.norm: %q: must be %q, %q or %q", c.Norm, NormBatch, NormGroup, NormNone)
	case c.Norm == NormGroup && c.Groups < 1:
		return fmt.Errorf("model.groups: %d: must be at least 1", c.Groups)
	}
	for _, l := range c.Checkpoint {
		if l < 0 || l > c.Depth {
			return fmt.Errorf("model.checkpoint: level %d: levels go from 0 (full size) to model.depth = %d", l, c.Depth)
		}
	}
	if c.Norm == NormGroup {
		for i := 0; i <= c.Depth; i++ {
			if w := c.Base << i; w%min(c.Groups, w) != 0 {
				return fmt.Errorf("model.groups: %d does not divide the width %d of level %d; use a power of two", c.Groups, w, i)
			}
		}
	}
	return nil
}

// layer is a single-input Forward/Backward pair.
type layer interface {
	Forward(env *Env, in *Tensor) (*Tensor, error)
	Backward(env *Env, dout *Tensor) (*Tensor, error)
	// forget drops the layer's references to what it kept for backward,
	// without releasing them: after a failed step the caller frees the step's
	// buffers wholesale (memory.Pool.FreeSince).
	forget()
}

// DoubleConv is (conv3x3 -> norm -> ReLU) x 2; the convolutions have no bias
// unless the norm is none.
type DoubleConv struct {
	layers []layer
	params []*Param
	// Checkpointed blocks keep only their input in forward (in) and run their
	// forward again in backward before their backward.
	Checkpointed bool
	in           *Tensor
}

func newDoubleConv(dev *Device, cfg Config, name string, inC, outC int) (*DoubleConv, error) {
	b := &DoubleConv{}
	idx := 0
	for i, c := range []int{inC, outC} {
		conv, err := NewConv2d(dev, fmt.Sprintf("%s.%d", name, idx), c, outC, 3, 1, cfg.Norm == NormNone)
		if err != nil {
			return nil, err
		}
		if i == 0 && inC == cfg.InChannels && name == "inc.double_conv" {
			conv.NoInputGrad = true
		}
		b.layers = append(b.layers, conv)
		b.params = append(b.params, conv.Params()...)
		idx++
		switch cfg.Norm {
		case NormBatch:
			bn, err := NewBatchNorm2d(dev, fmt.Sprintf("%s.%d", name, idx), outC)
			if err != nil {
				return nil, err
			}
			b.layers = append(b.layers, bn)
			b.params = append(b.params, bn.Params()...)
			idx++
		case NormGroup:
			gn, err := NewGroupNorm(dev, fmt.Sprintf("%s.%d", name, idx), min(cfg.Groups, outC), outC)
			if err != nil {
				return nil, err
			}
			b.layers = append(b.layers, gn)
			b.params = append(b.params, gn.Params()...)
			idx++
		}
		b.layers = append(b.layers, &ReLU{})
		idx++
	}
	return b, nil
}

// Forward runs the layers in order. A checkpointed block in training keeps
// only in; its layers keep nothing (BatchNorm still updates its running
// statistics, once).
func (b *DoubleConv) Forward(env *Env, in *Tensor) (*Tensor, error) {
	if !b.Checkpointed || !env.saves() {
		return forwardChain(env, b.layers, in)
	}
	quiet := *env
	quiet.noSave = true
	out, err := forwardChain(&quiet, b.layers, in)
	if err != nil {
		return nil, err
	}
	b.in = in.Retain()
	return out, nil
}

// Backward runs the layers' backward in reverse order; it consumes dout. A
// checkpointed block first recomputes its forward from the kept input, with
// the same batch statistics and without touching the running statistics, so
// its gradients equal the plain block's bit for bit.
func (b *DoubleConv) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	if b.in != nil {
		again := *env
		again.recompute = true
		out, err := forwardChain(&again, b.layers, b.in)
		b.in.Release()
		b.in = nil
		if err != nil {
			dout.Release()
			return nil, err
		}
		out.Release() // ReLU keeps its own reference for backward
	}
	return backwardChain(env, b.layers, dout)
}

func (b *DoubleConv) forget() {
	b.in = nil
	for _, l := range b.layers {
		l.forget()
	}
}

// forwardChain runs layers in order; the caller keeps its reference to in.
func forwardChain(env *Env, layers []layer, in *Tensor) (*Tensor, error) {
	x := in.Retain()
	for _, l := range layers {
		y, err := l.Forward(env, x)
		x.Release()
		if err != nil {
			return nil, err
		}
		x = y
	}
	return x, nil
}

// backwardChain runs backward in reverse order, consuming dout.
func backwardChain(env *Env, layers []layer, dout *Tensor) (*Tensor, error) {
	g := dout
	for i := len(layers) - 1; i >= 0; i-- {
		var err error
		if g, err = layers[i].Backward(env, g); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// down is max pooling followed by a DoubleConv.
type down struct {
	pool MaxPool2
	conv *DoubleConv
}

// up doubles the resolution, concatenates the skip and applies a DoubleConv.
type up struct {
	upsample layer // *Upsample2 or *UpConv
	cat      Concat
	conv     *DoubleConv
}

// UNet is the segmentation network: logits (N,Classes,H,W) from an image
// (N,InChannels,H,W). Its parameters and their gradients live on the device
// given to New until Free.
type UNet struct {
	Config Config
	inc    *DoubleConv
	downs  []*down
	ups    []*up
	outc   *Conv2d
	params []*Param
	dev    *Device
}

// New builds a UNet on dev with Kaiming-normal weights (fan_in, ReLU gain)
// from a PCG generator seeded with seed, zero biases, unit norm weights. The
// weights are drawn on the host and uploaded.
func New(dev *Device, cfg Config, seed uint64) (*UNet, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &UNet{Config: cfg, dev: dev}
	if err := m.build(dev); err != nil {
		m.Free()
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, p := range m.params {
		if len(p.Shape) == 4 && p.Trainable {
			w := make([]float32, p.Len())
			kaimingNormal(rng, w, p.Shape[1]*p.Shape[2]*p.Shape[3])
			p.Write(w)
		}
	}
	return m, nil
}

// Device is where the model lives.
func (m *UNet) Device() *Device { return m.dev }

func (m *UNet) build(dev *Device) error {
	cfg := m.Config
	width := func(level int) int { return cfg.Base << level }
	var err error
	if m.inc, err = newDoubleConv(dev, cfg, "inc.double_conv", cfg.InChannels, width(0)); err != nil {
		return err
	}
	m.params = append(m.params, m.inc.params...)
	for i := 1; i <= cfg.Depth; i++ {
		d := &down{}
		if d.conv, err = newDoubleConv(dev, cfg, fmt.Sprintf("down%d.maxpool_conv.1.double_conv", i), width(i-1), width(i)); err != nil {
			return err
		}
		m.downs = append(m.downs, d)
		m.params = append(m.params, d.conv.params...)
	}
	for i := 1; i <= cfg.Depth; i++ {
		inC, skipC := width(cfg.Depth-i+1), width(cfg.Depth-i)
		u := &up{}
		catC := inC + skipC
		if cfg.Up == UpTranspose {
			uc, err := NewUpConv(dev, fmt.Sprintf("up%d.up", i), inC, inC/2)
			if err != nil {
				return err
			}
			u.upsample = uc
			m.params = append(m.params, uc.Params()...)
			catC = inC/2 + skipC
		} else {
			u.upsample = &Upsample2{}
		}
		if u.conv, err = newDoubleConv(dev, cfg, fmt.Sprintf("up%d.conv.double_conv", i), catC, skipC); err != nil {
			return err
		}
		m.ups = append(m.ups, u)
		m.params = append(m.params, u.conv.params...)
	}
	if m.outc, err = NewConv2d(dev, "outc.conv", width(0), cfg.Classes, 1, 0, true); err != nil {
		return err
	}
	m.params = append(m.params, m.outc.Params()...)
	m.SetCheckpoint(cfg.Checkpoint)
	return nil
}

// SetCheckpoint checkpoints the DoubleConv blocks at the given levels (see
// Config.Checkpoint) and no others. Call it between steps, not inside one.
func (m *UNet) SetCheckpoint(levels []int) {
	on := map[int]bool{}
	for _, l := range levels {
		on[l] = true
	}
	m.Config.Checkpoint = append([]int(nil), levels...)
	m.inc.Checkpointed = on[0]
	for i, d := range m.downs {
		d.conv.Checkpointed = on[i+1]
	}
	for i, u := range m.ups {
		u.conv.Checkpointed = on[m.Config.Depth-1-i]
	}
}

// SetPrecision gives every convolution weight a working copy in dt (Float16
// or BFloat16; Float32 drops the copies), rounded from the fp32 master and
// used by the kernels from then on. The copies are allocated as params.
func (m *UNet) SetPrecision(dt backend.DType) error {
	for _, p := range m.params {
		if p.Trainable && len(p.Shape) == 4 {
			if err := p.setWork(dt); err != nil {
				return err
			}
		}
	}
	return nil
}

// SyncWorkingWeights rounds the fp32 masters into the 16-bit working copies
// (after an optimizer step); a no-op without them.
func (m *UNet) SyncWorkingWeights() {
	for _, p := range m.params {
		p.syncWork()
	}
}

// SaveBuffers copies the non-trainable buffers (BatchNorm running
// statistics and batch counts), which a forward in training mode updates, and
// returns a function that puts them back: for retrying a failed step exactly.
// The copies are small and live in host memory, outside the pool.
func (m *UNet) SaveBuffers() (restore func()) {
	var saved [][]float32
	for _, p := range m.params {
		if !p.Trainable {
			saved = append(saved, p.Read())
		}
	}
	var counts []int64
	m.eachBatchNorm(func(bn *BatchNorm2d) { counts = append(counts, bn.NumBatchesTracked) })
	return func() {
		i := 0
		for _, p := range m.params {
			if !p.Trainable {
				p.Write(saved[i])
				i++
			}
		}
		j := 0
		m.eachBatchNorm(func(bn *BatchNorm2d) { bn.NumBatchesTracked = counts[j]; j++ })
	}
}

func (m *UNet) eachBatchNorm(fn func(*BatchNorm2d)) {
	blocks := []*DoubleConv{m.inc}
	for _, d := range m.downs {
		blocks = append(blocks, d.conv)
	}
	for _, u := range m.ups {
		blocks = append(blocks, u.conv)
	}
	for _, b := range blocks {
		for _, l := range b.layers {
			if bn, ok := l.(*BatchNorm2d); ok {
				fn(bn)
			}
		}
	}
}

// Forget drops every reference the layers keep for backward, without
// releasing them, for a step that failed between Forward and the end of
// Backward: the caller then frees the step's buffers with
// memory.Pool.FreeSince. Gradients are left as they are.
func (m *UNet) Forget() {
	m.inc.forget()
	for _, d := range m.downs {
		d.pool.forget()
		d.conv.forget()
	}
	for _, u := range m.ups {
		u.upsample.forget()
		u.conv.forget()
	}
	m.outc.forget()
}

// Params lists every parameter and buffer in state_dict order.
func (m *UNet) Params() []*Param { return m.params }

// NumParams counts trainable values (what PyTorch's
// sum(p.numel() for p in model.parameters()) gives).
func (m *UNet) NumParams() int {
	n := 0
	for _, p := range m.params {
		if p.Trainable {
			n += p.Len()
		}
	}
	return n
}

// ZeroGrad sets every gradient to 0.
func (m *UNet) ZeroGrad() {
	for _, p := range m.params {
		if p.Trainable {
			m.dev.Backend.Fill(p.GradView(), 0)
		}
	}
}

// Free returns parameters and gradients to the pool.
func (m *UNet) Free() {
	for _, p := range m.params {
		p.free(m.dev.Pool)
	}
	m.params = nil
}

// CheckInput returns an error unless an (H,W) image fits the network.
func (m *UNet) CheckInput(c, h, w int) error {
	f := 1 << m.Config.Depth
	if c != m.Config.InChannels {
		return fmt.Errorf("model: input has %d channels, model.in_channels is %d", c, m.Config.InChannels)
	}
	if h%f != 0 || w%f != 0 || h < f || w < f {
		return fmt.Errorf("model: image size %dx%d is not divisible by 2^depth = %d; resize to a multiple of %d (data.resize) or lower model.depth", h, w, f, f)
	}
	return nil
}

// Forward computes logits for x (N,InChannels,H,W); the caller keeps its
// reference to x. In training the layers keep what Backward needs.
func (m *UNet) Forward(env *Env, x *Tensor) (logits *Tensor, err error) {
	if err := m.CheckInput(x.C, x.H, x.W); err != nil {
		return nil, err
	}
	skips := make([]*Tensor, 0, m.Config.Depth+1)
	defer func() {
		for _, s := range skips {
			s.Release()
		}
	}()
	h, err := m.inc.Forward(env, x)
	if err != nil {
		return nil, err
	}
	for _, d := range m.downs {
		skips = append(skips, h)
		p, err := d.pool.Forward(env, h)
		if err != nil {
			return nil, err
		}
		h, err = d.conv.Forward(env, p)
		p.Release()
		if err != nil {
			return nil, err
		}
	}
	for _, u := range m.ups {
		skip := skips[len(skips)-1]
		upped, err := u.upsample.Forward(env, h)
		h.Release()
		if err != nil {
			return nil, err
		}
		cat, err := u.cat.Forward(env, skip, upped)
		upped.Release()
		if err != nil {
			return nil, err
		}
		skips = skips[:len(skips)-1]
		skip.Release()
		h, err = u.conv.Forward(env, cat)
		cat.Release()
		if err != nil {
			return nil, err
		}
	}
	logits, err = m.outc.Forward(env, h)
	h.Release()
	return logits, err
}

// Backward accumulates every parameter's gradient from dlogits, which it
// consumes. After it, no activation of the step is left in the pool.
func (m *UNet) Backward(env *Env, dlogits *Tensor) error {
	g, err := m.outc.Backward(env, dlogits)
	if err != nil {
		return err
	}
	dskips := make([]*Tensor, 0, len(m.ups))
	defer func() {
		for _, d := range dskips {
			d.Release()
		}
	}()
	for i := len(m.ups) - 1; i >= 0; i-- {
		u := m.ups[i]
		dcat, err := u.conv.Backward(env, g)
		if err != nil {
			return err
		}
		dskip, dup, err := u.cat.Backward(env, dcat)
		if err != nil {
			return err
		}
		dskips = append(dskips, dskip)
		if g, err = u.upsample.Backward(env, dup); err != nil {
			return err
		}
	}
	// ups[i] used the skip that was the input of downs[Depth-1-i], and ups run
	// backward from last to first, so dskips[j] is the gradient of downs[j]'s input.
	for i := len(m.downs) - 1; i >= 0; i-- {
		d := m.downs[i]
		dp, err := d.conv.Backward(env, g)
		if err != nil {
			return err
		}
		dh, err := d.pool.Backward(env, dp)
		if err != nil {
			return err
		}
		ds := dskips[i]
		if err := addInto(env, dh, ds); err != nil {
			return err
		}
		ds.Release()
		dskips[i] = nil
		g = dh
	}
	din, err := m.inc.Backward(env, g)
	din.Release()
	return err
}
