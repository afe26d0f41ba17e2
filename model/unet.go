package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// The UNet is described once, as its levels: level i works at 1/2^i of the
// input's resolution with Base*2^i channels. Forward goes down the encoders
// (level 0 is inc; level i > 0 is a 2x2 max pool then a DoubleConv), keeping
// each level's output as the skip of its decoder, then up the decoders
// (upsample from the level below, concatenate the skip first, DoubleConv)
// to outc. Backward, FLOPs, parameter names, recompute and the plan all
// walk the same levels.

// level is one resolution of the UNet.
type level struct {
	pool    *MaxPool // nil at level 0
	encBody *DoubleConv
	enc     Layer // encBody, or encBody recomputed
	// The decoder, none at the bottleneck (level Depth).
	up      Layer // *Upsample2, *Upsample3 or *UpConv, from the level below
	cat     Concat
	decBody *DoubleConv
	dec     Layer // decBody, or decBody recomputed
	// input rebuilds dec's input in backward where dec is recomputed
	// (with bilinear upsampling; else nil).
	input *decoderInput
	// plainCat rebuilds it for decBody's conv1 where dec is not recomputed
	// (bilinear upsampling, blocks with norms; else nil).
	plainCat *decoderCat
}

// UNet is the segmentation network: logits (N,Classes,H,W) from an image
// (N,InChannels,H,W). Its parameters and their gradients live on the device
// given to New until Free.
type UNet struct {
	Config Config
	levels []*level // 0 (full size) .. Depth (the bottleneck)
	outc   *Conv2d
	params []*Param
	dev    *Device
	// snapshot is SaveBuffers' host memory the device copies to directly
	// (backend.Offloader), one view a buffer; nil until the first save.
	snapshot *memory.Pool
	saved    []backend.View
}

// New builds a UNet on dev with Kaiming-normal weights (fan_in, ReLU gain)
// from a PCG generator seeded with seed, zero biases, unit norm weights. The
// weights are drawn on the host and uploaded; a virtual pool (planning) has
// no memory to put them in, so there they are not drawn at all, and a plan
// of a network far larger than the host takes no host memory.
func New(dev *Device, cfg Config, seed uint64) (*UNet, error) {
	cfg = cfg.WithDefaults()
	m := &UNet{Config: cfg, dev: dev}
	if err := m.build(); err != nil {
		m.Free()
		return nil, err
	}
	if dev.Pool.Virtual() {
		return m, nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, p := range m.params {
		if len(p.Shape) >= 4 && p.Trainable {
			w := make([]float32, p.Len())
			kaimingNormal(rng, w, p.Len()/p.Shape[0])
			p.Write(w)
		}
	}
	return m, nil
}

// Device is where the model lives.
func (m *UNet) Device() *Device { return m.dev }

// build makes the layers in state_dict order (inc, down1..Depth,
// up1..Depth from the bottleneck up, outc), naming the parameters as
// PyTorch's UNet does.
func (m *UNet) build() error {
	cfg, dev := m.Config, m.dev
	width := cfg.Width
	m.levels = make([]*level, cfg.Depth+1)
	for lv := range m.levels {
		L := &level{}
		m.levels[lv] = L
		name, in := "inc.double_conv", cfg.InChannels
		if lv > 0 {
			L.pool = &MaxPool{}
			if cfg.Volumes() {
				L.pool = &MaxPool{K: cfg.PoolKernel(lv - 1)}
			}
			name, in = fmt.Sprintf("down%d.maxpool_conv.1.double_conv", lv), width(lv-1)
		}
		var err error
		if L.encBody, err = newDoubleConv(dev, cfg, name, in, width(lv)); err != nil {
			return err
		}
		if lv == 0 {
			L.encBody.conv1.NoInputGrad = true // fed by the data
		}
		m.params = append(m.params, L.encBody.Params()...)
	}
	for lv := cfg.Depth - 1; lv >= 0; lv-- {
		L, i := m.levels[lv], cfg.Depth-lv // up1 is the first decoder, at level Depth-1
		from, skip := width(lv+1), width(lv)
		cat := from + skip
		switch {
		case cfg.Up == UpTranspose:
			// to the skip's width: from/2 where no cap binds (nnU-Net's rule)
			uc, err := NewUpConv(dev, fmt.Sprintf("up%d.up", i), from, skip)
			if cfg.Volumes() {
				uc, err = NewUpConv3d(dev, fmt.Sprintf("up%d.up", i), from, skip, cfg.PoolKernel(lv).D)
			}
			if err != nil {
				return err
			}
			L.up = uc
			m.params = append(m.params, uc.Params()...)
			cat = 2 * skip
		case cfg.Volumes():
			L.up = &Upsample3{F: cfg.PoolKernel(lv)}
		default:
			L.up = &Upsample2{}
		}
		var err error
		if L.decBody, err = newDoubleConv(dev, cfg, fmt.Sprintf("up%d.conv.double_conv", i), cat, skip); err != nil {
			return err
		}
		m.params = append(m.params, L.decBody.Params()...)
	}
	var err error
	newConv := NewConv2d
	if cfg.Volumes() {
		newConv = NewConv3d
	}
	if m.outc, err = newConv(dev, "outc.conv", width(0), cfg.Classes, 1, 0, true); err != nil {
		return err
	}
	m.params = append(m.params, m.outc.Params()...)
	for _, b := range m.blocks() {
		b.conv1.Algo, b.conv2.Algo = cfg.ConvAlgo, cfg.ConvAlgo
	}
	m.SetRecompute(cfg.Recompute)
	return nil
}

// encoder is level lv's encoder: the max pool (below level 0), then the
// block.
func (L *level) encoder() []Layer {
	if L.pool == nil {
		return []Layer{L.enc}
	}
	return []Layer{L.pool, L.enc}
}

// layers lists every layer in state_dict order, blocks as themselves.
func (m *UNet) layers() []Layer {
	var out []Layer
	for _, L := range m.levels {
		out = append(out, L.encoder()...)
	}
	for lv := len(m.levels) - 2; lv >= 0; lv-- {
		out = append(out, m.levels[lv].up, m.levels[lv].dec)
	}
	return append(out, m.outc)
}

// blocks lists the DoubleConvs in state_dict order: the encoders', then the
// decoders' from the bottleneck up.
func (m *UNet) blocks() []*DoubleConv {
	var out []*DoubleConv
	for _, L := range m.levels {
		out = append(out, L.encBody)
	}
	for lv := len(m.levels) - 2; lv >= 0; lv-- {
		out = append(out, m.levels[lv].decBody)
	}
	return out
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

// CheckVolume returns an error unless a (D,H,W) volume fits a 3D network:
// each axis divisible by its poolings' product.
func (m *UNet) CheckVolume(c, d, h, w int) error {
	if c != m.Config.InChannels {
		return fmt.Errorf("model: input has %d channels, model.in_channels is %d", c, m.Config.InChannels)
	}
	f := backend.Scale3{D: 1, H: 1, W: 1}
	for lv := range m.Config.Depth {
		k := m.Config.PoolKernel(lv)
		f = backend.Scale3{D: f.D * k.D, H: f.H * k.H, W: f.W * k.W}
	}
	if d%f.D != 0 || h%f.H != 0 || w%f.W != 0 || d < f.D || h < f.H || w < f.W {
		return fmt.Errorf("model: volume size %dx%dx%d is not divisible by the poolings' %dx%dx%d; crop or pad to a multiple, or lower model.depth", d, h, w, f.D, f.H, f.W)
	}
	return nil
}

// Forward: x (N,InChannels,H,W) -> logits (N,Classes,H,W); the caller
// keeps its reference to x. In training the layers keep what Backward
// needs (recompute.go says what).
func (m *UNet) Forward(env *Env, x *Tensor) (logits *Tensor, err error) {
	if m.Config.Volumes() {
		err = m.CheckVolume(x.C, x.D, x.H, x.W)
	} else {
		err = m.CheckInput(x.C, x.H, x.W)
	}
	if err != nil {
		return nil, err
	}
	D := m.Config.Depth
	skips := make([]*Tensor, D) // skips[lv] is level lv's encoder output
	defer func() {
		for _, s := range skips {
			s.Release()
		}
	}()
	h := x.Retain()
	for lv, L := range m.levels {
		for _, l := range L.encoder() {
			y, err := l.Forward(env, h)
			h.Release()
			if err != nil {
				return nil, err
			}
			h = y
		}
		if lv < D {
			skips[lv] = h.Retain()
		}
	}
	for lv := D - 1; lv >= 0; lv-- {
		L := m.levels[lv]
		cat, err := L.join(env, skips[lv], h)
		if err != nil {
			return nil, err
		}
		skips[lv].Release()
		skips[lv] = nil
		h, err = L.dec.Forward(env, cat)
		cat.Release()
		if err != nil {
			return nil, err
		}
	}
	logits, err = m.outc.Forward(env, h)
	h.Release()
	return logits, err
}

// join is level L's decoder input, concat(skip, up(h)), consuming the
// caller's reference to h; in training it keeps what the decoder's input
// sources need. The upsampling writes into the concatenation where the
// concatenation takes it (Concat.upsampled), holding h meanwhile (a
// quarter of the upsampled tensor it saves).
func (L *level) join(env *Env, skip, h *Tensor) (*Tensor, error) {
	defer func() { h.Release() }() // nil once released below
	keep := func() error {
		if L.input != nil && env.saves() {
			if err := L.input.keep(env, skip, h); err != nil {
				return err
			}
		}
		if L.plainCat != nil && env.saves() {
			L.plainCat.keep(h)
		}
		return nil
	}
	if u := L.cat.upsampled(env, L.up, h.DType); u != nil {
		if err := keep(); err != nil {
			return nil, err
		}
		return L.cat.forwardUp(env, skip, u, h)
	}
	upped, err := L.up.Forward(env, h)
	if err != nil {
		return nil, err
	}
	defer upped.Release()
	if err := keep(); err != nil {
		return nil, err
	}
	h.Release()
	h = nil
	return L.cat.Forward(env, skip, upped)
}

// Backward: dlogits (N,Classes,H,W) -> every parameter's gradient +=
// (inc computes no input gradient); it consumes dlogits: the decoders from full size down to the bottleneck, then the
// encoders back up, adding each level's skip gradient to its encoder
// output's. After it, no activation of the step is left in the pool.
func (m *UNet) Backward(env *Env, dlogits *Tensor) error {
	g, err := m.outc.Backward(env, dlogits)
	if err != nil {
		return err
	}
	D := m.Config.Depth
	dskips := make([]*Tensor, D)
	defer func() {
		for _, d := range dskips {
			d.Release()
		}
	}()
	for lv := 0; lv < D; lv++ {
		L := m.levels[lv]
		dcat, err := L.dec.Backward(env, g)
		if err != nil {
			return err
		}
		if u := L.cat.upsampled(env, L.up, dcat.DType); u != nil {
			if dskips[lv], g, err = L.cat.backwardUp(env, dcat, u); err != nil {
				return err
			}
			continue
		}
		var dup *Tensor
		if dskips[lv], dup, err = L.cat.Backward(env, dcat); err != nil {
			return err
		}
		if g, err = L.up.Backward(env, dup); err != nil {
			return err
		}
	}
	for lv := D; lv >= 0; lv-- {
		enc := m.levels[lv].encoder()
		for i := len(enc) - 1; i >= 0; i-- {
			if g, err = enc[i].Backward(env, g); err != nil {
				return err
			}
		}
		if lv > 0 {
			if err := addInto(env, g, dskips[lv-1]); err != nil {
				return err
			}
			dskips[lv-1].Release()
			dskips[lv-1] = nil
		}
	}
	g.Release() // nil: inc computes no input gradient
	return nil
}

// FLOPs counts the multiply-adds of one forward pass of an h x w image as
// 2*C*OC*K*K*OH*OW per convolution (2*C*OC*4*H*W per transposed one), the
// usual convention; norms, pooling and the loss are not counted. recompute
// is the part of forward that a training step runs again in backward, in
// recomputed blocks.
func (m *UNet) FLOPs(h, w int) (forward, recompute float64) {
	count := func(l Layer, in backend.Shape4) backend.Shape4 {
		out, f := l.Out(in)
		forward += f
		if c, ok := l.(*Recomputed); ok {
			recompute += c.recomputeFLOPs(in)
		}
		return out
	}
	s := backend.Shape4{N: 1, C: m.Config.InChannels, H: h, W: w}
	skips := make([]backend.Shape4, len(m.levels))
	for lv, L := range m.levels {
		for _, l := range L.encoder() {
			s = count(l, s)
		}
		skips[lv] = s
	}
	for lv := len(m.levels) - 2; lv >= 0; lv-- {
		L := m.levels[lv]
		s = count(L.up, s)
		s.C += skips[lv].C
		s = count(L.dec, s)
	}
	count(m.outc, s)
	return forward, recompute
}

// Forget drops every reference the layers keep for backward, without
// releasing them, for a step that failed between Forward and the end of
// Backward: the caller then frees the step's buffers with
// memory.Pool.FreeSince. Gradients are left as they are.
func (m *UNet) Forget() {
	for _, l := range m.layers() {
		l.Forget()
	}
}
