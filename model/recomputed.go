package model

import "github.com/memunet/memunet/backend"

// Recomputed is one block under recompute (gradient checkpointing, the
// config's model.checkpoint): in training its forward keeps only the
// block's input (the block's parts keep nothing; BatchNorm still updates
// its running statistics, once, and keeps its batch statistics for the
// recomputation), and its backward first runs the block's forward again
// from that input, with the same batch statistics and without touching the
// running statistics, so its gradients equal the plain block's bit for bit.
//
// With a Source that holds the step's ingredients (a decoder, whose input is
// the concatenation of its skip and the upsampled level below), the block
// keeps conv1's output instead of its input, and backward rebuilds the input
// from the Source (one upsampling and one copy) for conv1's backward,
// recomputing the parts after it: the block's widest convolution is not run
// again. The gradients are the same bits.
type Recomputed struct {
	Block  *DoubleConv
	Source inputSource // nil: keep the input
	in     *Tensor     // the block's input or, fromConv1, conv1's output
	host   *offloaded  // in, waiting in host memory (Env.Host), instead
}

// fromConv1 reports whether this step keeps conv1's output and the Source
// rebuilds the input: the Source holds the step's parts from before the
// block's forward until its backward rebuilds them.
func (c *Recomputed) fromConv1() bool { return c.Source != nil && c.Source.holds() }

// Forward: in (N,C,H,W) -> out (N,OC,H,W), the block's, keeping only in, or
// conv1's output (N,OC,H,W), in training.
func (c *Recomputed) Forward(env *Env, in *Tensor) (*Tensor, error) {
	if !env.saves() {
		return c.Block.Forward(env, in)
	}
	quiet := *env
	quiet.noSave = true
	keep, rest := in.Retain(), c.Block.parts.Layers
	if c.fromConv1() {
		first, err := (&Sequential{Layers: c.Block.through(c.Block.conv1)}).Forward(&quiet, in)
		keep.Release()
		if err != nil {
			return nil, err
		}
		keep, rest = first, c.Block.span(c.Block.conv1, nil)
	}
	defer keep.Release()
	out, err := (&Sequential{Layers: rest}).Forward(&quiet, keep)
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

// Backward: dout (N,OC,H,W) -> din (N,C,H,W). It recomputes the block's
// forward from what it kept, then runs the block's backward; it consumes
// dout.
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
		if err := c.recompute(env); err != nil {
			dout.Release()
			return nil, err
		}
	}
	return c.Block.Backward(env, dout)
}

// recompute runs the block's forward again from what it kept, its parts
// keeping what their backward needs, and lets go of what it kept.
func (c *Recomputed) recompute(env *Env) error {
	again := *env
	again.recompute = true
	rest := c.Block.parts.Layers
	if c.fromConv1() {
		if err := c.rebuildConv1Input(env, &again); err != nil {
			c.in.Release()
			c.in = nil
			return err
		}
		rest = c.Block.span(c.Block.conv1, nil)
	}
	out, err := (&Sequential{Layers: rest}).Forward(&again, c.in)
	c.in.Release()
	c.in = nil
	if err != nil {
		return err
	}
	out.Release() // the block's last part keeps what its backward needs itself
	return nil
}

// rebuildConv1Input gives conv1 its input again: the block's input from the
// Source, through the parts before conv1 (none in the UNet), which run again
// keeping what they need.
func (c *Recomputed) rebuildConv1Input(env, again *Env) error {
	x, err := c.Source.rebuild(env)
	if err != nil {
		return err
	}
	if x, err = forwardOwned(again, c.Block.span(nil, c.Block.conv1), x); err != nil {
		return err
	}
	c.Block.conv1.keepInput(x)
	x.Release()
	return nil
}

// recomputeFLOPs is the part of the block's forward FLOPs for an input of
// shape in that backward runs again: all of them, or all but conv1's with a
// Source (whose bilinear upsampling and copy have none).
func (c *Recomputed) recomputeFLOPs(in backend.Shape4) float64 {
	_, f := c.Block.Out(in)
	if c.Source != nil {
		s, _ := (&Sequential{Layers: c.Block.span(nil, c.Block.conv1)}).Out(in)
		_, first := c.Block.conv1.Out(s)
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
