package model

import (
	"fmt"

	"github.com/memunet/memunet/memory"
	"gorgonia.org/tensor"
)

// Env is what a forward or backward pass runs with.
type Env struct {
	Pool *memory.Pool
	// Training selects batch statistics for BatchNorm and saving tensors for
	// backward; in eval mode layers save nothing.
	Training bool
}

// Tensor is an NCHW float32 activation backed by a pool buffer and shared by
// reference count; the buffer goes back to the pool when the count drops to 0.
type Tensor struct {
	N, C, H, W int
	buf        *memory.Buffer
	pool       *memory.Pool
	refs       int
}

// NewTensor allocates an (n,c,h,w) tensor of the given category with one
// reference. Contents are undefined.
func NewTensor(pool *memory.Pool, cat memory.Category, n, c, h, w int) (*Tensor, error) {
	buf, err := pool.AllocFloat32(cat, n*c*h*w)
	if err != nil {
		return nil, err
	}
	return &Tensor{N: n, C: c, H: h, W: w, buf: buf, pool: pool, refs: 1}, nil
}

// Data is the tensor's values in NCHW order.
func (t *Tensor) Data() []float32 { return t.buf.Float32() }

// Len is N*C*H*W.
func (t *Tensor) Len() int { return t.N * t.C * t.H * t.W }

// Shape is [N,C,H,W].
func (t *Tensor) Shape() [4]int { return [4]int{t.N, t.C, t.H, t.W} }

// Dense views the tensor as a gorgonia *tensor.Dense sharing its memory.
func (t *Tensor) Dense() *tensor.Dense { return t.buf.Dense(t.N, t.C, t.H, t.W) }

// Retain adds a reference and returns t.
func (t *Tensor) Retain() *Tensor {
	if t.refs <= 0 {
		panic("model: retain of a released tensor")
	}
	t.refs++
	return t
}

// Release drops a reference; the last one frees the buffer. Release of nil is a no-op.
func (t *Tensor) Release() {
	if t == nil {
		return
	}
	if t.refs <= 0 {
		panic("model: release of a released tensor")
	}
	t.refs--
	if t.refs == 0 {
		t.pool.MustFree(t.buf)
		t.buf = nil
	}
}

// Refs is the current reference count.
func (t *Tensor) Refs() int { return t.refs }

func (t *Tensor) String() string { return fmt.Sprintf("Tensor(%d,%d,%d,%d)", t.N, t.C, t.H, t.W) }

func mustSameShape(op string, a, b *Tensor) {
	if a.N != b.N || a.C != b.C || a.H != b.H || a.W != b.W {
		panic(fmt.Sprintf("model: %s: shape %v does not match %v", op, a.Shape(), b.Shape()))
	}
}

// workspace allocates n float32 of scratch; free it with env.Pool.MustFree.
func workspace(env *Env, n int) (*memory.Buffer, []float32, error) {
	buf, err := env.Pool.AllocFloat32(memory.Workspace, n)
	if err != nil {
		return nil, nil, err
	}
	return buf, buf.Float32(), nil
}
