package model

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/memunet/memunet/backend"
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
	pool    *MaxPool2 // nil at level 0
	encBody *Sequential
	enc     Layer // encBody, or encBody recomputed
	// The decoder, none at the bottleneck (level Depth).
	up      Layer // *Upsample2 or *UpConv, from the level below
	cat     Concat
	decBody *Sequential
	dec     Layer // decBody, or decBody recomputed
	// input rebuilds dec's input in backward where dec is recomputed
	// (with bilinear upsampling; else nil).
	input *decoderInput
	// plainCat rebuilds it for dec's first convolution where dec is not
	// recomputed (bilinear upsampling, blocks with norms; else nil).
	plainCat *decoderCat
}

// decoderInput is a recomputed decoder's input, concat(skip, up(below)),
// kept as its two parts, the skip and the level below's output, with
// bilinear upsampling: the decoder then keeps its first convolution's
// output beside them, 1 + 1/2 + 1 times the level's width in bytes where
// the concatenation is 3, and backward rebuilds the input with one
// upsampling and one copy instead of running that convolution, the block's
// widest, again. With transposed upsampling the concatenation is only 2
// (and the level below is kept by the transposed convolution anyway), so
// the parts would weigh what it does and the rebuild's transient would
// raise the peak: those decoders keep their input.
type decoderInput struct {
	up          Layer
	cat         *Concat
	skip, below *Tensor
	// skip and below, waiting in host memory (memory.offload), instead.
	skipHost, belowHost *offloaded
}

// keep takes references to the step's skip and level below; with
// offloading (Env.Host) it copies to the host pool those that no layer
// keeps on the device anyway.
func (d *decoderInput) keep(env *Env, skip, below *Tensor) error {
	if d.holds() {
		panic("model: a decoder's input kept twice in one step")
	}
	var err error
	if d.skip, d.skipHost, err = keepOrOffload(env, skip); err != nil {
		return err
	}
	d.below, d.belowHost, err = keepOrOffload(env, below)
	return err
}

// keepOrOffload takes a reference to t or, with offloading, copies it to
// the host pool, unless a layer keeps it (it has other references): those
// layers are deeper decoders' and encoders', whose backward comes after
// this decoder's, so t stays on the device until then whatever is done.
func keepOrOffload(env *Env, t *Tensor) (*Tensor, *offloaded, error) {
	if env.Host == nil || t.refs > 1 {
		return t.Retain(), nil, nil
	}
	o, err := offload(env, t)
	return nil, o, err
}

func (d *decoderInput) holds() bool { return d.skip != nil || d.skipHost != nil }

func (d *decoderInput) rebuild(env *Env) (*Tensor, error) {
	skip, below := d.skip, d.below
	var errSkip, errBelow error
	// Each restore frees its host copy, failing or not.
	if d.skipHost != nil {
		skip, errSkip = d.skipHost.restore(env)
	}
	if d.belowHost != nil {
		below, errBelow = d.belowHost.restore(env)
	}
	d.skip, d.below, d.skipHost, d.belowHost = nil, nil, nil, nil
	defer skip.Release()
	if err := errors.Join(errSkip, errBelow); err != nil {
		below.Release()
		return nil, err
	}
	return joinParts(env, d.up, d.cat, below, func() (*Tensor, error) { return skip.Retain(), nil })
}

// joinParts is a decoder's input from its parts: below upsampled (below is
// consumed), then skip, taken from skipOf only now so that the two are
// not rebuilt at once, copied beside it.
func joinParts(env *Env, up Layer, cat *Concat, below *Tensor, skipOf func() (*Tensor, error)) (*Tensor, error) {
	quiet := *env
	quiet.noSave = true
	upped, err := up.Forward(&quiet, below)
	below.Release()
	if err != nil {
		return nil, err
	}
	defer upped.Release()
	skip, err := skipOf()
	if err != nil {
		return nil, err
	}
	defer skip.Release()
	return cat.Forward(&quiet, skip, upped)
}

func (d *decoderInput) forget() {
	d.skip, d.below = nil, nil
	for _, o := range []*offloaded{d.skipHost, d.belowHost} {
		if o != nil {
			o.free() // host buffers are not freed with the step's device ones
		}
	}
	d.skipHost, d.belowHost = nil, nil
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
}

// New builds a UNet on dev with Kaiming-normal weights (fan_in, ReLU gain)
// from a PCG generator seeded with seed, zero biases, unit norm weights. The
// weights are drawn on the host and uploaded; a virtual pool (planning) has
// no memory to put them in, so there they are not drawn at all, and a plan
// of a network far larger than the host takes no host memory.
func New(dev *Device, cfg Config, seed uint64) (*UNet, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
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

// build makes the layers in state_dict order (inc, down1..Depth,
// up1..Depth from the bottleneck up, outc), naming the parameters as
// PyTorch's UNet does.
func (m *UNet) build() error {
	cfg, dev := m.Config, m.dev
	width := func(lv int) int { return cfg.Base << lv }
	m.levels = make([]*level, cfg.Depth+1)
	for lv := range m.levels {
		L := &level{}
		m.levels[lv] = L
		name, in := "inc.double_conv", cfg.InChannels
		if lv > 0 {
			L.pool = &MaxPool2{}
			name, in = fmt.Sprintf("down%d.maxpool_conv.1.double_conv", lv), width(lv-1)
		}
		var err error
		if L.encBody, err = newDoubleConv(dev, cfg, name, in, width(lv)); err != nil {
			return err
		}
		if lv == 0 {
			L.encBody.Layers[0].(*Conv2d).NoInputGrad = true // fed by the data
		}
		m.params = append(m.params, L.encBody.Params()...)
	}
	for lv := cfg.Depth - 1; lv >= 0; lv-- {
		L, i := m.levels[lv], cfg.Depth-lv // up1 is the first decoder, at level Depth-1
		from, skip := width(lv+1), width(lv)
		cat := from + skip
		if cfg.Up == UpTranspose {
			uc, err := NewUpConv(dev, fmt.Sprintf("up%d.up", i), from, from/2)
			if err != nil {
				return err
			}
			L.up = uc
			m.params = append(m.params, uc.Params()...)
			cat = from/2 + skip
		} else {
			L.up = &Upsample2{}
		}
		var err error
		if L.decBody, err = newDoubleConv(dev, cfg, fmt.Sprintf("up%d.conv.double_conv", i), cat, skip); err != nil {
			return err
		}
		m.params = append(m.params, L.decBody.Params()...)
	}
	var err error
	if m.outc, err = NewConv2d(dev, "outc.conv", width(0), cfg.Classes, 1, 0, true); err != nil {
		return err
	}
	m.params = append(m.params, m.outc.Params()...)
	// An encoder's last ReLU keeps only a mask: no later layer keeps its
	// output (max pooling keeps positions, the concatenation a copy). The
	// blocks an upsampling reads are SetRecompute's; outc keeps its input.
	for _, L := range m.levels[:cfg.Depth] {
		lastReLU(L.encBody).Mask = true
	}
	m.SetRecompute(cfg.Recompute)
	return nil
}

// lastReLU is a DoubleConv's closing ReLU.
func lastReLU(b *Sequential) *ReLU { return b.Layers[len(b.Layers)-1].(*ReLU) }

// newDoubleConv is (conv3x3 -> norm -> ReLU) x 2, the submodules numbered as
// in PyTorch's nn.Sequential; the convolutions have a bias only without a
// norm.
func newDoubleConv(dev *Device, cfg Config, name string, inC, outC int) (*Sequential, error) {
	b := &Sequential{}
	idx := 0
	for _, c := range []int{inC, outC} {
		conv, err := NewConv2d(dev, fmt.Sprintf("%s.%d", name, idx), c, outC, 3, 1, cfg.Norm == NormNone)
		if err != nil {
			return nil, err
		}
		b.Layers = append(b.Layers, conv)
		idx++
		var norm Layer
		switch cfg.Norm {
		case NormBatch:
			norm, err = NewBatchNorm2d(dev, fmt.Sprintf("%s.%d", name, idx), outC)
		case NormGroup:
			norm, err = NewGroupNorm(dev, fmt.Sprintf("%s.%d", name, idx), min(cfg.Groups, outC), outC)
		}
		if err != nil {
			return nil, err
		}
		if norm != nil {
			b.Layers = append(b.Layers, norm)
			idx++
		}
		b.Layers = append(b.Layers, &ReLU{})
		idx++
	}
	return b, nil
}

// rebuildMiddle sets whether a DoubleConv with a norm rebuilds its middle
// activation (the first ReLU's output, the second convolution's input) in
// backward from the first norm's kept input (normOutput), the ReLU keeping
// a mask, or keeps it: a recomputed block keeps it, as its recomputation
// runs just before its backward, and there the ReLU's mask would only add.
func rebuildMiddle(b *Sequential, on bool) {
	norm, ok := b.Layers[1].(reapplier)
	if !ok {
		return
	}
	relu, conv := b.Layers[2].(*ReLU), b.Layers[3].(*Conv2d)
	relu.Mask, conv.Source = on, nil
	if on {
		conv.Source = normOutput{norm: norm, relu: relu}
	}
}

// reapplier is a norm that can normalize its kept input again (for
// normOutput).
type reapplier interface {
	reapply(env *Env) (*Tensor, error)
}

// normOutput is a DoubleConv's second convolution's input, relu(norm(x)),
// rebuilt in backward from what the norm keeps for its own backward (x and
// its statistics): in training the convolution keeps nothing and the ReLU
// between them a mask, instead of the block's middle activation. The
// rebuild runs the norm as its forward did (the kept statistics: the same
// bits) and the ReLU in place, one pass each.
type normOutput struct {
	norm reapplier
	relu *ReLU
}

func (s normOutput) holds() bool { return true }

func (s normOutput) rebuild(env *Env) (*Tensor, error) {
	y, err := s.norm.reapply(env)
	if err != nil {
		return nil, err
	}
	quiet := *env
	quiet.noSave = true
	a, err := s.relu.Forward(&quiet, y)
	y.Release()
	return a, err
}

func (s normOutput) forget() {}

// SetRecompute makes the DoubleConv blocks at the given levels recompute
// (see Config.Recompute; the encoder block and, below the bottleneck, the
// decoder block of each) and no others. Call it between steps, not inside
// one.
func (m *UNet) SetRecompute(levels []int) {
	on := map[int]bool{}
	for _, l := range levels {
		on[l] = true
	}
	m.Config.Recompute = append([]int(nil), levels...)
	for lv, L := range m.levels {
		rebuildMiddle(L.encBody, !on[lv])
		if L.decBody != nil {
			rebuildMiddle(L.decBody, !on[lv])
		}
		L.enc, L.dec, L.input = L.encBody, nil, nil
		if on[lv] {
			L.enc = &Recomputed{Block: L.encBody}
		}
		_, bilinear := L.up.(*Upsample2)
		switch _, firstKeeps := L.decBody.first().(inputKeeper); {
		case L.decBody == nil:
		case on[lv] && bilinear && firstKeeps:
			L.input = &decoderInput{up: L.up, cat: &L.cat}
			L.dec = &Recomputed{Block: L.decBody, Source: L.input}
		case on[lv]:
			L.dec = &Recomputed{Block: L.decBody}
		default:
			L.dec = L.decBody
		}
	}
	// What each decoder's upsampling and first convolution rebuild in
	// backward rather than keep. The block below's last ReLU keeps a mask
	// where nothing keeps that block's output: bilinear upsampling keeps
	// nothing, and a transposed convolution rebuilds its input from the
	// block's closing norm where the block is not recomputed. A plain
	// bilinear decoder's first convolution rebuilds its concatenation from
	// its two parts: each from the norm closing the block it comes from, or,
	// where that block is recomputed (its norm keeps nothing until its
	// recomputation, after this backward), kept itself. Not at full size:
	// that decoder's backward comes first, and its first convolution's
	// backward, holding the concatenation and its gradient, is the step's
	// peak, so rebuilding it would only cost the time (the largest).
	for lv, L := range m.levels[:len(m.levels)-1] {
		below := m.levels[lv+1].encBody // the bottleneck, or the decoder below
		if lv+1 < len(m.levels)-1 {
			below = m.levels[lv+1].decBody
		}
		belowOut, belowNorm := closingOutput(below)
		skipOut, skipNorm := closingOutput(L.encBody)
		first := L.decBody.first().(*Conv2d)
		first.Source, L.plainCat = nil, nil
		switch up := L.up.(type) {
		case *Upsample2:
			lastReLU(below).Mask = true
			if skipNorm && belowNorm && !on[lv] && lv > 0 {
				L.plainCat = &decoderCat{skip: skipOut, below: catPart{from: belowOut, keeps: on[lv+1]}, up: L.up, cat: &L.cat}
				first.Source = L.plainCat
			}
		case *UpConv:
			rebuilt := belowNorm && !on[lv+1]
			up.Source, lastReLU(below).Mask = nil, rebuilt
			if rebuilt {
				up.Source = belowOut
			}
		}
	}
}

// closingOutput is a DoubleConv's output as normOutput rebuilds it from its
// closing norm, if it has one.
func closingOutput(b *Sequential) (normOutput, bool) {
	n := len(b.Layers)
	norm, ok := b.Layers[n-2].(reapplier)
	if !ok {
		return normOutput{}, false
	}
	return normOutput{norm: norm, relu: b.Layers[n-1].(*ReLU)}, true
}

// decoderCat is a plain decoder's input, concat(skip, up(below)), rebuilt
// in backward from its two parts: its first convolution then keeps nothing
// where it kept the concatenation, three times the level's width, for one
// upsampling, two normalizations and a copy. The skip comes again from
// the norm closing the encoder block at its level (not recomputed, as
// the decoder is not); the level below likewise or, where that block is
// recomputed, is kept from forward. The parts are freed as soon as they
// are copied, before the convolution's backward takes its own memory.
type decoderCat struct {
	skip  normOutput
	below catPart
	up    Layer
	cat   *Concat
}

// catPart is the level below: rebuilt from the norm closing its block (the
// same bits), or, with keeps, the tensor kept from forward.
type catPart struct {
	from  normOutput
	keeps bool
	kept  *Tensor
}

func (p *catPart) get(env *Env) (*Tensor, error) {
	if !p.keeps {
		return p.from.rebuild(env)
	}
	t := p.kept
	p.kept = nil
	if t == nil {
		panic("model: a decoder's level below was not kept")
	}
	return t, nil
}

// keep takes a reference to the level below where the decoder keeps it.
func (d *decoderCat) keep(below *Tensor) {
	if !d.below.keeps {
		return
	}
	if d.below.kept != nil {
		panic("model: a decoder's level below kept twice in one step")
	}
	d.below.kept = below.Retain()
}

func (d *decoderCat) holds() bool { return true }

func (d *decoderCat) rebuild(env *Env) (*Tensor, error) {
	below, err := d.below.get(env)
	if err != nil {
		return nil, err
	}
	return joinParts(env, d.up, d.cat, below, func() (*Tensor, error) { return d.skip.rebuild(env) })
}

func (d *decoderCat) forget() { d.below.kept = nil }

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
		upped, err := L.up.Forward(env, h)
		if err == nil && L.input != nil && env.saves() {
			if err = L.input.keep(env, skips[lv], h); err != nil {
				upped.Release()
			}
		}
		if err == nil && L.plainCat != nil && env.saves() {
			L.plainCat.keep(h)
		}
		h.Release()
		if err != nil {
			return nil, err
		}
		cat, err := L.cat.Forward(env, skips[lv], upped)
		upped.Release()
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

// Backward accumulates every parameter's gradient from dlogits, which it
// consumes: the decoders from full size down to the bottleneck, then the
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
	bns := m.BatchNorms()
	counts := make([]int64, len(bns))
	for i, bn := range bns {
		counts[i] = bn.NumBatchesTracked
	}
	return func() {
		i := 0
		for _, p := range m.params {
			if !p.Trainable {
				p.Write(saved[i])
				i++
			}
		}
		for i, bn := range bns {
			bn.NumBatchesTracked = counts[i]
		}
	}
}

// BatchNorms lists the network's BatchNorm2d layers in state_dict order
// (none unless Config.Norm is batch), for saving and restoring their
// NumBatchesTracked, which is not a Param. The state_dict key of a layer's
// count is its Weight's name with ".weight" replaced by ".num_batches_tracked".
func (m *UNet) BatchNorms() []*BatchNorm2d {
	var out []*BatchNorm2d
	for _, l := range m.layers() {
		if c, ok := l.(*Recomputed); ok {
			l = c.Block
		}
		if s, ok := l.(*Sequential); ok {
			for _, in := range s.Layers {
				if bn, ok := in.(*BatchNorm2d); ok {
					out = append(out, bn)
				}
			}
		}
	}
	return out
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
