package model

import "github.com/memunet/memunet/backend"

// Layer is one single-input step of a network: a convolution, a norm, a
// ReLU, a pooling or upsampling, or a block of them (Sequential,
// Checkpointed). A layer is shape arithmetic, allocations from the env's
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

// Checkpointed is gradient checkpointing of one block: in training its
// forward keeps only the block's input (the block's layers keep nothing;
// BatchNorm still updates its running statistics, once, and keeps its batch
// statistics for the recomputation), and its backward first runs the block's
// forward again from that input, with the same batch statistics and without
// touching the running statistics, so its gradients equal the plain block's
// bit for bit.
type Checkpointed struct {
	Block Layer
	in    *Tensor
	host  *offloaded // in, waiting in host memory (Env.Host), instead
}

// Forward runs the block keeping only in (in training).
func (c *Checkpointed) Forward(env *Env, in *Tensor) (*Tensor, error) {
	if !env.saves() {
		return c.Block.Forward(env, in)
	}
	quiet := *env
	quiet.noSave = true
	out, err := c.Block.Forward(&quiet, in)
	if err != nil {
		return nil, err
	}
	if env.Host != nil {
		if c.host, err = offload(env, in); err != nil {
			out.Release()
			return nil, err
		}
		return out, nil
	}
	c.in = in.Retain()
	return out, nil
}

// Backward recomputes the block's forward from the kept input, then runs its
// backward; it consumes dout.
func (c *Checkpointed) Backward(env *Env, dout *Tensor) (*Tensor, error) {
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
		out, err := c.Block.Forward(&again, c.in)
		c.in.Release()
		c.in = nil
		if err != nil {
			dout.Release()
			return nil, err
		}
		out.Release() // the block's last layer keeps its own reference for backward
	}
	return c.Block.Backward(env, dout)
}

// Params are the block's.
func (c *Checkpointed) Params() []*Param { return c.Block.Params() }

// Out is the block's.
func (c *Checkpointed) Out(in backend.Shape4) (backend.Shape4, float64) { return c.Block.Out(in) }

// Forget forgets the kept input and the block's references.
func (c *Checkpointed) Forget() {
	c.in = nil
	if c.host != nil {
		c.host.free() // the step's device buffers are freed wholesale; host ones are not
		c.host = nil
	}
	c.Block.Forget()
}

// sameShape is the Out of a layer that keeps the shape and does no
// multiply-adds.
func sameShape(in backend.Shape4) (backend.Shape4, float64) { return in, 0 }
