package model

import "github.com/memunet/memunet/backend"

// Layer is one single-input step of a network: a convolution, a norm, a
// ReLU, a pooling or upsampling, or a block of them (Sequential,
// DoubleConv, Recomputed). A layer is shape arithmetic, allocations from
// the env's pool and backend calls; the arithmetic lives in the backend.
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
	return forwardOwned(env, s.Layers, in.Retain())
}

// forwardOwned runs layers in order over x, consuming the caller's
// reference to x: a ReLU given the only reference works in place.
func forwardOwned(env *Env, layers []Layer, x *Tensor) (*Tensor, error) {
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

// sameShape is the Out of a layer that keeps the shape and does no
// multiply-adds.
func sameShape(in backend.Shape4) (backend.Shape4, float64) { return in, 0 }
