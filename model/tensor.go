package model

import (
	"fmt"

	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model/kernels"
	"gorgonia.org/tensor"
)

// DType is how a tensor stores its values. Arithmetic is always float32;
// 16-bit tensors are converted on the way in and out of each kernel.
type DType uint8

const (
	Float32  DType = iota // IEEE binary32
	Float16               // IEEE binary16 bits in a uint16
	BFloat16              // bfloat16 bits (the upper half of a float32)
)

// Size is the bytes per value.
func (d DType) Size() int {
	if d == Float32 {
		return 4
	}
	return 2
}

func (d DType) String() string {
	switch d {
	case Float32:
		return "fp32"
	case Float16:
		return "fp16"
	case BFloat16:
		return "bf16"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Env is what a forward or backward pass runs with.
type Env struct {
	Pool *memory.Pool
	// Training selects batch statistics for BatchNorm and saving tensors for
	// backward; in eval mode layers save nothing.
	Training bool
	// Precision is the storage type of the activations the layers produce and
	// of the activation gradients flowing backward (Float32 by default).
	Precision DType
	// Profile, if set, adds up the time spent per layer kind.
	Profile *Profile

	noSave    bool // a checkpointed block's first forward: compute, keep nothing
	recompute bool // a checkpointed block's forward again in backward: keep BatchNorm's running stats as they are
}

// dry reports a dry run: the pool is virtual, so layers allocate and free
// exactly as in a real step but compute nothing (memunet plan).
func (e *Env) dry() bool { return e.Pool.Virtual() }

// forEach is kernels.ParallelFor, skipped in a dry run.
func (e *Env) forEach(n, minChunk int, body func(lo, hi int)) {
	if !e.dry() {
		kernels.ParallelFor(n, minChunk, body)
	}
}

// saves reports whether layers keep tensors for backward.
func (e *Env) saves() bool { return e.Training && !e.noSave }

// Tensor is an NCHW activation backed by a pool buffer and shared by
// reference count; the buffer goes back to the pool when the count drops to 0.
type Tensor struct {
	N, C, H, W int
	DType      DType
	buf        *memory.Buffer
	pool       *memory.Pool
	refs       int
}

// NewTensor allocates an (n,c,h,w) float32 tensor of the given category with
// one reference. Contents are undefined.
func NewTensor(pool *memory.Pool, cat memory.Category, n, c, h, w int) (*Tensor, error) {
	return NewTensorOf(pool, cat, Float32, n, c, h, w)
}

// NewTensorOf is NewTensor with a storage type.
func NewTensorOf(pool *memory.Pool, cat memory.Category, dt DType, n, c, h, w int) (*Tensor, error) {
	buf, err := pool.AllocBytes(cat, n*c*h*w*dt.Size())
	if err != nil {
		return nil, err
	}
	return &Tensor{N: n, C: c, H: h, W: w, DType: dt, buf: buf, pool: pool, refs: 1}, nil
}

// Data is a float32 tensor's values in NCHW order; it panics for 16-bit tensors.
func (t *Tensor) Data() []float32 {
	if t.DType != Float32 {
		panic(fmt.Sprintf("model: Data of a %s tensor; use Bits or Float32", t.DType))
	}
	return t.buf.Float32()
}

// Bits is a 16-bit tensor's raw values; it panics for float32 tensors.
func (t *Tensor) Bits() []uint16 {
	if t.DType == Float32 {
		panic("model: Bits of an fp32 tensor; use Data")
	}
	return t.buf.Uint16()
}

// Float32 returns a newly made float32 copy of the values, whatever the
// storage (for tests and metrics; not from the pool).
func (t *Tensor) Float32() []float32 {
	out := make([]float32, t.Len())
	toFloat32(out, t)
	return out
}

// Len is N*C*H*W.
func (t *Tensor) Len() int { return t.N * t.C * t.H * t.W }

// Shape is [N,C,H,W].
func (t *Tensor) Shape() [4]int { return [4]int{t.N, t.C, t.H, t.W} }

// Dense views a float32 tensor as a gorgonia *tensor.Dense sharing its memory.
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

func (t *Tensor) String() string {
	return fmt.Sprintf("Tensor(%d,%d,%d,%d %s)", t.N, t.C, t.H, t.W, t.DType)
}

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

// newActivation allocates an (n,c,h,w) activation (or activation gradient)
// in the env's precision.
func (env *Env) newActivation(n, c, h, w int) (*Tensor, error) {
	return NewTensorOf(env.Pool, memory.Activations, env.Precision, n, c, h, w)
}

func toFloat32(dst []float32, t *Tensor) {
	if t.DType == Float32 {
		copy(dst, t.Data())
		return
	}
	convertToFloat32(dst, t.Bits(), t.DType)
}

func fromFloat32(t *Tensor, src []float32) {
	if t.DType == Float32 {
		copy(t.Data(), src)
		return
	}
	convertFromFloat32(t.Bits(), src, t.DType)
}

func convertToFloat32(dst []float32, src []uint16, dt DType) {
	if dt == Float16 {
		kernels.F16ToF32Slice(dst, src)
	} else {
		kernels.BF16ToF32Slice(dst, src)
	}
}

func convertFromFloat32(dst []uint16, src []float32, dt DType) {
	if dt == Float16 {
		kernels.F32ToF16Slice(dst, src)
	} else {
		kernels.F32ToBF16Slice(dst, src)
	}
}

// frame gathers the transient float32 buffers of one kernel call: views of
// 16-bit inputs, staging for 16-bit outputs, and scratch. The first
// allocation failure is kept in err and later calls return nil, so a caller
// checks err once before running its kernel; finish then converts the
// outputs (unless err is set) and frees everything.
type frame struct {
	env     *Env
	commits []func()
	frees   []func()
	err     error
}

func (env *Env) frame() *frame { return &frame{env: env} }

func (f *frame) view(t *Tensor) []float32 { return f.viewRange(t, 0, t.Len()) }

func (f *frame) writer(t *Tensor) []float32 { return f.writerRange(t, 0, t.Len()) }

// viewRange is view of the values [lo,hi) of t only (one image, say).
func (f *frame) viewRange(t *Tensor, lo, hi int) []float32 {
	if f.err != nil {
		return nil
	}
	if t.DType == Float32 {
		if f.env.dry() {
			return nil
		}
		return t.Data()[lo:hi]
	}
	vals := f.scratch(hi - lo) // nil in a dry run
	if vals != nil {
		stop := f.env.Profile.begin(KindConvert)
		convertToFloat32(vals, t.Bits()[lo:hi], t.DType)
		stop()
	}
	return vals
}

// writerRange is writer of the values [lo,hi) of t only.
func (f *frame) writerRange(t *Tensor, lo, hi int) []float32 {
	if f.err != nil {
		return nil
	}
	if t.DType == Float32 {
		if f.env.dry() {
			return nil
		}
		return t.Data()[lo:hi]
	}
	vals := f.scratch(hi - lo) // nil in a dry run
	if vals != nil {
		f.commits = append(f.commits, func() {
			defer f.env.Profile.begin(KindConvert)()
			convertFromFloat32(t.Bits()[lo:hi], vals, t.DType)
		})
	}
	return vals
}

// ready reports that every buffer was had and there is something to compute.
func (f *frame) ready() bool { return f.err == nil && !f.env.dry() }

func (f *frame) scratch(n int) []float32 {
	if f.err != nil {
		return nil
	}
	buf, vals, err := workspace(f.env, n)
	if err != nil {
		f.err = err
		return nil
	}
	f.frees = append(f.frees, func() { f.env.Pool.MustFree(buf) })
	return vals
}

// weights returns p's values as the kernels should use them: the fp32
// master, or the 16-bit working copy converted to float32 scratch.
func (f *frame) weights(p *Param) []float32 {
	if p == nil {
		return nil
	}
	if p.work == nil || f.err != nil {
		if f.err != nil {
			return nil
		}
		return p.Data()
	}
	vals := f.scratch(p.Len())
	if vals != nil {
		stop := f.env.Profile.begin(KindConvert)
		p.workToFloat32(vals)
		stop()
	}
	return vals
}

// finish commits the outputs (if nothing failed), frees every transient
// buffer in reverse order and returns the first error.
func (f *frame) finish() error {
	if f.err == nil {
		for _, c := range f.commits {
			c()
		}
	}
	for i := len(f.frees) - 1; i >= 0; i-- {
		f.frees[i]()
	}
	return f.err
}
