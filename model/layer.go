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
// reference to x: a ReLU given the only reference works in place. A
// norm followed by a ReLU runs as one backend operation where it can
// (reluFuser), with the bits, allocations and kept tensors of the two.
func forwardOwned(env *Env, layers []Layer, x *Tensor) (*Tensor, error) {
	for i := 0; i < len(layers); i++ {
		var y *Tensor
		var err error
		if f, r := fusedReLU(env, layers, i, x.DType); f != nil {
			y, err = f.forwardReLU(env, x, r)
			i++
		} else {
			y, err = layers[i].Forward(env, x)
		}
		x.Release()
		if err != nil {
			return nil, err
		}
		x = y
	}
	return x, nil
}

// reluFuser is a layer that runs the ReLU after it in the same backend
// operation, forward and backward (a batch norm): each method does what
// the layer's own and the ReLU's would, with the same results.
type reluFuser interface {
	// fusesReLU reports whether it can for tensors of dt.
	fusesReLU(env *Env, dt backend.DType) bool
	forwardReLU(env *Env, in *Tensor, r *ReLU) (*Tensor, error)
	backwardReLU(env *Env, dout *Tensor, r *ReLU) (*Tensor, error)
}

// fusedReLU is layers[i] and the ReLU after it where they run fused on
// tensors of dt (nil otherwise).
func fusedReLU(env *Env, layers []Layer, i int, dt backend.DType) (reluFuser, *ReLU) {
	if i < 0 || i+1 >= len(layers) {
		return nil, nil
	}
	f, ok := layers[i].(reluFuser)
	r, isReLU := layers[i+1].(*ReLU)
	if !ok || !isReLU || !f.fusesReLU(env, dt) {
		return nil, nil
	}
	return f, r
}

// Backward runs the layers' backward in reverse order, consuming dout (a
// ReLU and the norm before it fused, as forwardOwned runs them).
func (s *Sequential) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	g := dout
	for i := len(s.Layers) - 1; i >= 0; i-- {
		var err error
		var f reluFuser
		var r *ReLU
		if g != nil { // nil after a layer that computes no input gradient
			f, r = fusedReLU(env, s.Layers, i-1, g.DType)
		}
		if f != nil {
			g, err = f.backwardReLU(env, g, r)
			i--
		} else {
			g, err = s.Layers[i].Backward(env, g)
		}
		if err != nil {
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
