package model

import "errors"

// The tensors backward rebuilds instead of keeping them from forward, each
// an inputSource; recompute.go decides which layer uses which.

// inputSource rebuilds a layer's input in backward from less than the
// input: a recomputed decoder's from the tensors it keeps (decoderInput), a
// plain convolution's from the norms before it (replay of normAgain,
// decoderCat).
type inputSource interface {
	// holds reports whether it keeps what rebuild needs for this step (a
	// recomputed block asks; the convolutions' sources always do).
	holds() bool
	// rebuild returns the input (one reference, the caller's) and lets go
	// of what it kept.
	rebuild(env *Env) (*Tensor, error)
	// forget drops what it kept without releasing it (see Layer.Forget).
	forget()
}

// normAgain is a norm's output again, from what the norm keeps for its own
// backward (its input and statistics): the same bits, one pass.
type normAgain struct{ norm norm }

func (s normAgain) holds() bool                       { return true }
func (s normAgain) rebuild(env *Env) (*Tensor, error) { return s.norm.reapply(env) }
func (s normAgain) forget()                           {}

// replay is a tensor inside a DoubleConv rebuilt in backward: from gives
// the output of the part after (nil: the block's input), and the parts
// between it and to (nil: the block's output) run again, keeping nothing.
// With from a normAgain of norm1 and to conv2, it is conv2's input,
// relu1(norm1(x)): the convolution then keeps nothing and the ReLU a mask,
// instead of the block's middle activation; the ReLU runs in place.
type replay struct {
	from      inputSource
	block     *DoubleConv
	after, to Layer
}

// normOutput is the replay from norm's kept input to the input of to.
func (b *DoubleConv) normOutput(norm norm, to Layer) replay {
	return replay{from: normAgain{norm}, block: b, after: norm, to: to}
}

func (s replay) holds() bool { return s.from.holds() }

func (s replay) rebuild(env *Env) (*Tensor, error) {
	x, err := s.from.rebuild(env)
	if err != nil {
		return nil, err
	}
	quiet := *env
	quiet.noSave = true
	return forwardOwned(&quiet, s.block.span(s.after, s.to), x)
}

func (s replay) forget() { s.from.forget() }

// decoderInput is a recomputed decoder's input, concat(skip, up(below)),
// kept as its two parts, the skip and the level below's output, with
// bilinear upsampling: the decoder then keeps its conv1's output beside
// them, 1 + 1/2 + 1 times the level's width in bytes where the
// concatenation is 3, and backward rebuilds the input with one upsampling
// and one copy instead of running that convolution, the block's widest,
// again. With transposed upsampling the concatenation is only 2 (and the
// level below is kept by the transposed convolution anyway), so the parts
// would weigh what it does and the rebuild's transient would raise the
// peak: those decoders keep their input.
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

func (d *decoderInput) forget() {
	d.skip, d.below = nil, nil
	for _, o := range []*offloaded{d.skipHost, d.belowHost} {
		if o != nil {
			o.free() // host buffers are not freed with the step's device ones
		}
	}
	d.skipHost, d.belowHost = nil, nil
}

// joinParts is a decoder's input from its parts: below upsampled (below is
// consumed), then skip, taken from skipOf only now so that the two are
// not rebuilt at once, copied beside it; where the upsampling writes into
// the concatenation (joinUp), skip is rebuilt first, below held meanwhile
// (a quarter of its upsampled size).
func joinParts(env *Env, up Layer, cat *Concat, below *Tensor, skipOf func() (*Tensor, error)) (*Tensor, error) {
	quiet := *env
	quiet.noSave = true
	if u := cat.upsampled(env, up, below.DType); u != nil {
		defer below.Release()
		skip, err := skipOf()
		if err != nil {
			return nil, err
		}
		defer skip.Release()
		return cat.forwardUp(&quiet, skip, u, below)
	}
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

// decoderCat is a plain decoder's input, concat(skip, up(below)), rebuilt
// in backward from its two parts: its conv1 then keeps nothing where it
// kept the concatenation, three times the level's width, for one
// upsampling, two normalizations and a copy. The skip comes again from
// the norm closing the encoder block at its level (not recomputed, as the
// decoder is not); the level below likewise or, where that block is
// recomputed, is kept from forward. The parts are freed as soon as they
// are copied, before the convolution's backward takes its own memory.
type decoderCat struct {
	skip  replay
	below catPart
	up    Layer
	cat   *Concat
}

// catPart is the level below: rebuilt from the norm closing its block (the
// same bits), or, with keeps, the tensor kept from forward.
type catPart struct {
	from  replay
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
