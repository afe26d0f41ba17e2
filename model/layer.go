package model

import "github.com/memunet/memunet/backend"

// Layer is one single-input step of a network: a convolution, a norm, a
// ReLU, a pooling or upsampling, or a block of them (Sequential,
// Recomputed). A layer is shape arithmetic, allocations from the env's
// pool and backend calls; the arithmetic lives in the backend.
type Layer interface {
	// Forward returns the output, of which the caller owns one reference;
	// the caller keeps its reference to in. In training a layer takes its
	// own references to what its backward needs.
	Forward(env *Env, in *Tensor) (*Tensor, error)
	// Backward consumes dout, releases what Forward kept, accumulates the
	// parameter gradients (+=) and returns din, owned by the caller (nil for
	// a layer that computes none).
	Backward(env *Env, dout *Tensor) (*Tensor, error)
	// Params lists the layer's parameters and buffers in state_dict order.
	Params() []*Param
	// Out is the output shape for an input of shape in and the forward
	// pass's multiply-add FLOPs (2 per multiply-add; convolutions only).
	Out(in backend.Shape4) (out backend.Shape4, flops float64)
	// Forget drops the references kept for backward without releasing them:
	// after a failed step the caller frees the step's buffers wholesale
	// (memory.Pool.FreeSince).
	Forget()
}

// Sequential runs its layers in order forward and in reverse backward.
type Sequential struct {
	Layers []Layer
}

// Forward runs the layers in order; the caller keeps its reference to in.
func (s *Sequential) Forward(env *Env, in *Tensor) (*Tensor, error) {
	x := in.Retain()
	for _, l := range s.Layers {
		y, err := l.Forward(env, x)
		x.Release()
		if err != nil {
			return nil, err
		}
		x = y
	}
	return x, nil
}

// Backward runs the layers' backward in reverse order, consuming dout.
func (s *Sequential) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	g := dout
	for i := len(s.Layers) - 1; i >= 0; i-- {
		var err error
		if g, err = s.Layers[i].Backward(env, g); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Params lists the layers' parameters in order.
func (s *Sequential) Params() []*Param {
	var ps []*Param
	for _, l := range s.Layers {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// Out chains the layers' shapes and adds their FLOPs.
func (s *Sequential) Out(in backend.Shape4) (backend.Shape4, float64) {
	var total float64
	for _, l := range s.Layers {
		var f float64
		in, f = l.Out(in)
		total += f
	}
	return in, total
}

// Forget forgets every layer's saved references.
func (s *Sequential) Forget() {
	for _, l := range s.Layers {
		l.Forget()
	}
}

// Recomputed is recompute (gradient checkpointing, the config's
// model.checkpoint) of one block: in training its forward keeps only the
// block's input (the block's layers keep nothing; BatchNorm still updates
// its running statistics, once, and keeps its batch statistics for the
// recomputation), and its backward first runs the block's forward again
// from that input, with the same batch statistics and without touching the
// running statistics, so its gradients equal the plain block's bit for
// bit.
//
// With a Source that holds the step's ingredients (a decoder, whose input is
// the concatenation of its skip and the upsampled level below), the block
// keeps its first layer's output instead of its input, and backward rebuilds
// the input from the Source (one upsampling and one copy) for that layer's
// backward, recomputing from the second layer on: the block's widest
// convolution is not run again. The gradients are the same bits.
type Recomputed struct {
	Block  *Sequential
	Source inputSource // nil: keep the input
	in     *Tensor     // the block's input or, fromFirst, its first layer's output
	host   *offloaded  // in, waiting in host memory (Env.Host), instead
}

// fromFirst reports whether this step keeps the first layer's output and
// the Source rebuilds the input: the Source holds the step's parts from
// before the block's forward until its backward rebuilds them.
func (c *Recomputed) fromFirst() bool { return c.Source != nil && c.Source.holds() }

// inputSource rebuilds a layer's input in backward from less than the
// input: a recomputed decoder's from the tensors it keeps (decoderInput),
// a plain convolution's from the norms before it (normOutput, decoderCat).
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

// inputKeeper is a layer whose backward needs only its input (a
// convolution): a recomputed block hands it the rebuilt input instead of
// running its forward again.
type inputKeeper interface{ keepInput(in *Tensor) }

// Forward runs the block keeping only in, or its first layer's output (in
// training).
func (c *Recomputed) Forward(env *Env, in *Tensor) (*Tensor, error) {
	if !env.saves() {
		return c.Block.Forward(env, in)
	}
	quiet := *env
	quiet.noSave = true
	keep, block := in.Retain(), c.Block
	if c.fromFirst() {
		first, err := block.Layers[0].Forward(&quiet, in)
		keep.Release()
		if err != nil {
			return nil, err
		}
		keep, block = first, c.rest()
	}
	defer keep.Release()
	out, err := block.Forward(&quiet, keep)
	if err != nil {
		return nil, err
	}
	if env.Host != nil {
		if c.host, err = offload(env, keep); err != nil {
			out.Release()
			return nil, err
		}
		return out, nil
	}
	c.in = keep.Retain()
	return out, nil
}

// first is the block's first layer, nil if it has none (or no block).
func (s *Sequential) first() Layer {
	if s == nil || len(s.Layers) == 0 {
		return nil
	}
	return s.Layers[0]
}

// rest is the block after its first layer.
func (c *Recomputed) rest() *Sequential { return &Sequential{Layers: c.Block.Layers[1:]} }

// Backward recomputes the block's forward from what it kept, then runs its
// backward; it consumes dout.
func (c *Recomputed) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	if c.host != nil {
		in, err := c.host.restore(env)
		c.host = nil
		if err != nil {
			dout.Release()
			return nil, err
		}
		c.in = in
	}
	if c.in != nil {
		again := *env
		again.recompute = true
		block := c.Block
		if c.fromFirst() {
			x, err := c.Source.rebuild(env)
			if err != nil {
				c.in.Release()
				c.in = nil
				dout.Release()
				return nil, err
			}
			c.Block.Layers[0].(inputKeeper).keepInput(x)
			x.Release()
			block = c.rest()
		}
		out, err := block.Forward(&again, c.in)
		c.in.Release()
		c.in = nil
		if err != nil {
			dout.Release()
			return nil, err
		}
		out.Release() // the block's last layer keeps what its backward needs itself
	}
	return c.Block.Backward(env, dout)
}

// recomputeFLOPs is the part of the block's forward FLOPs for an input of
// shape in that backward runs again: all of them, or all but the first
// layer's with a Source (whose bilinear upsampling and copy have none).
func (c *Recomputed) recomputeFLOPs(in backend.Shape4) float64 {
	_, f := c.Block.Out(in)
	if c.Source != nil {
		_, first := c.Block.Layers[0].Out(in)
		f -= first
	}
	return f
}

// Params are the block's.
func (c *Recomputed) Params() []*Param { return c.Block.Params() }

// Out is the block's.
func (c *Recomputed) Out(in backend.Shape4) (backend.Shape4, float64) { return c.Block.Out(in) }

// Forget forgets what it kept (its Source's too) and the block's
// references.
func (c *Recomputed) Forget() {
	c.in = nil
	if c.host != nil {
		c.host.free() // the step's device buffers are freed wholesale; host ones are not
		c.host = nil
	}
	if c.Source != nil {
		c.Source.forget()
	}
	c.Block.Forget()
}

// sameShape is the Out of a layer that keeps the shape and does no
// multiply-adds.
func sameShape(in backend.Shape4) (backend.Shape4, float64) { return in, 0 }
