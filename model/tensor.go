package model

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// Device is where a model lives: a backend and the pool its buffers come
// from (a pool over the backend's allocator).
type Device struct {
	Backend backend.Backend
	Pool    *memory.Pool
	// Host, if set, is the pool offloaded tensors wait in (memory.offload):
	// over the backend's backend.Offloader host memory, apart from Pool.
	Host *memory.Pool
}

// NewDevice makes a pool over b's memory.
func NewDevice(b backend.Backend, opts memory.Options) *Device {
	return &Device{Backend: b, Pool: memory.NewPool(b.Allocator(), opts)}
}

// Env is what a forward or backward pass runs with.
type Env struct {
	*Device
	// Training selects batch statistics for BatchNorm and saving tensors for
	// backward; in eval mode layers save nothing.
	Training bool
	// Precision is the storage type of the activations the layers produce and
	// of the activation gradients flowing backward (Float32 by default).
	Precision backend.DType
	// Profile, if set, adds up the time spent per layer kind.
	Profile *Profile
	// SyncSum, if set, sums a host vector over the processes of a
	// data-parallel run: BatchNorm then normalizes with the statistics of
	// the whole batch over every rank (synchronised batch norm).
	SyncSum func([]float64) error

	noSave    bool // a recomputed block's first forward, or a rebuild: compute, keep nothing
	recompute bool // a recomputed block's forward again in backward: keep BatchNorm's running stats as they are
}

// saves reports whether layers keep tensors for backward.
func (e *Env) saves() bool { return e.Training && !e.noSave }

// Tensor is an NCHW activation, or an NCDHW one (a volume's, D > 0),
// backed by a pool buffer and shared by reference count; the buffer goes
// back to the pool when the count drops to 0. The layers that treat every
// position alike (norms, ReLU, concatenation, the loss) take a volume as
// the image (N,C,D*H,W).
type Tensor struct {
	N, C, H, W int
	// D is a volume's depth; 0 for an image.
	D     int
	DType backend.DType
	buf   *memory.Buffer
	dev   *Device
	refs  int
}

// NewTensor allocates an (n,c,h,w) tensor of type dt and category cat on dev
// with one reference. Contents are undefined.
func NewTensor(dev *Device, cat memory.Category, dt backend.DType, n, c, h, w int) (*Tensor, error) {
	return NewVolume(dev, cat, dt, n, c, 0, h, w)
}

// NewVolume is NewTensor for an (n,c,d,h,w) volume; d 0 makes an image.
func NewVolume(dev *Device, cat memory.Category, dt backend.DType, n, c, d, h, w int) (*Tensor, error) {
	buf, err := dev.Pool.Alloc(cat, int64(n*c*max(d, 1)*h*w*dt.Size()))
	if err != nil {
		return nil, err
	}
	return &Tensor{N: n, C: c, D: d, H: h, W: w, DType: dt, buf: buf, dev: dev, refs: 1}, nil
}

// tensorLike allocates a tensor of t's shape with c channels, of type dt.
func tensorLike(dev *Device, dt backend.DType, t *Tensor, c int) (*Tensor, error) {
	return NewVolume(dev, memory.Activations, dt, t.N, c, t.D, t.H, t.W)
}

// View is the whole tensor, for a backend operation.
func (t *Tensor) View() backend.View {
	if t.buf == nil {
		panic("model: view of a released tensor")
	}
	return backend.View{Buf: t.buf, DT: t.DType, Len: t.Len()}
}

// Images is the view of images [lo, hi).
func (t *Tensor) Images(lo, hi int) backend.View {
	size := t.Len() / t.N
	return t.View().Slice(lo*size, hi*size)
}

// Read returns a host copy of the values as float32, whatever the storage
// (a download: for tests, checkpoints and tools, not the training loop).
func (t *Tensor) Read() []float32 { return backend.DownloadFloat32(t.dev.Backend, t.View()) }

// Write uploads host values into a float32 tensor.
func (t *Tensor) Write(vals []float32) { backend.UploadFloat32(t.dev.Backend, t.View(), vals) }

// Len is N*C*H*W (N*C*D*H*W for a volume).
func (t *Tensor) Len() int { return t.N * t.C * t.depth() * t.H * t.W }

// depth is a volume's depth, 1 for an image.
func (t *Tensor) depth() int { return max(t.D, 1) }

// Shape is [N,C,H,W]; a volume's as the image [N,C,D*H,W].
func (t *Tensor) Shape() [4]int { return [4]int{t.N, t.C, t.depth() * t.H, t.W} }

// shape4 is the image's shape; a volume's as the image (N,C,D*H,W).
func (t *Tensor) shape4() backend.Shape4 {
	return backend.Shape4{N: t.N, C: t.C, H: t.depth() * t.H, W: t.W}
}

// shape5 is the volume's shape (D 1 for an image).
func (t *Tensor) shape5() backend.Shape5 {
	return backend.Shape5{N: t.N, C: t.C, D: t.depth(), H: t.H, W: t.W}
}

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
		t.dev.Pool.MustFree(t.buf)
		t.buf = nil
	}
}

// Refs is the current reference count.
func (t *Tensor) Refs() int { return t.refs }

func (t *Tensor) String() string {
	if t.D > 0 {
		return fmt.Sprintf("Tensor(%d,%d,%d,%d,%d %s)", t.N, t.C, t.D, t.H, t.W, t.DType)
	}
	return fmt.Sprintf("Tensor(%d,%d,%d,%d %s)", t.N, t.C, t.H, t.W, t.DType)
}

func mustSameShape(op string, a, b *Tensor) {
	if a.N != b.N || a.C != b.C || a.D != b.D || a.H != b.H || a.W != b.W {
		panic(fmt.Sprintf("model: %s: shape %v does not match %v", op, a, b))
	}
}

// newActivation allocates an (n,c,h,w) activation (or activation gradient)
// in the env's precision.
func (env *Env) newActivation(n, c, h, w int) (*Tensor, error) { return env.newVolume(n, c, 0, h, w) }

// newVolume allocates an (n,c,d,h,w) activation in the env's precision;
// d 0 makes an image.
func (env *Env) newVolume(n, c, d, h, w int) (*Tensor, error) {
	return NewVolume(env.Device, memory.Activations, env.Precision, n, c, d, h, w)
}

// gradTensorLike returns a tensor to write din into: dout itself when the
// caller holds its only reference (the backward then works in place), else a
// new tensor of the same shape.
func gradTensorLike(env *Env, dout *Tensor) (*Tensor, error) {
	if dout.Refs() == 1 {
		return dout, nil
	}
	return tensorLike(env.Device, dout.DType, dout, dout.C)
}

// activationLike allocates an activation of t's shape with c channels in
// the env's precision.
func (env *Env) activationLike(t *Tensor, c int) (*Tensor, error) {
	return tensorLike(env.Device, env.Precision, t, c)
}

// allocView allocates n values of type dt for cat; free it with the pool.
func allocView(dev *Device, cat memory.Category, dt backend.DType, n int) (backend.View, error) {
	buf, err := dev.Pool.Alloc(cat, int64(n*dt.Size()))
	if err != nil {
		return backend.View{}, err
	}
	return backend.View{Buf: buf, DT: dt, Len: n}, nil
}

// frame gathers the transient buffers of one backend call of family op:
// fp32 staging of 16-bit tensors where the backend Stages them for op
// (inputs converted in, outputs converted back at finish), and workspace.
// Staging is the layer's decision, not the backend's, because it is
// memory: each staged tensor is a workspace allocation the planner must
// see. The first allocation failure
// is kept in err and later calls return the zero View, so a caller checks
// err once before its backend call; finish then converts the outputs
// (unless err is set) and frees everything, last allocated first.
type frame struct {
	env     *Env
	op      backend.Op
	mixed   bool              // stage every 16-bit tensor (uniform; a caller mixing types itself)
	commits [][2]backend.View // staged output, its tensor's view
	frees   []*memory.Buffer
	err     error
}

func (env *Env) frame(op backend.Op) *frame { return &frame{env: env, op: op} }

// staged reports whether t goes to the backend through fp32 staging.
func (f *frame) staged(t *Tensor) bool {
	return t.DType != backend.Float32 && (f.mixed || f.env.Backend.Stages(f.op, t.DType))
}

// uniform is the storage type a convolution's shape gives (ConvShape.DT)
// for weights w and tensors ts (nil skipped): their own where they are all
// of one type the backend takes as it is; else Float32, and f stages every
// 16-bit one (a call mixing types, as the first convolution's reading the
// fp32 data).
func (f *frame) uniform(w *Param, ts ...*Tensor) backend.DType {
	dt := backend.Float32
	if w != nil && w.work != nil {
		dt = w.workType
	}
	for _, t := range ts {
		if t != nil && t.DType != dt {
			f.mixed = true
		}
	}
	if f.mixed || f.env.Backend.Stages(f.op, dt) {
		return backend.Float32
	}
	return dt
}

// view is t as the backend reads it: t itself, or an fp32 copy.
func (f *frame) view(t *Tensor) backend.View { return f.images(t, 0, t.N) }

// writer is where the backend writes t: t itself, or fp32 staging
// converted into t at finish.
func (f *frame) writer(t *Tensor) backend.View { return f.imagesOut(t, 0, t.N) }

// images is view of images [lo, hi) of t only.
func (f *frame) images(t *Tensor, lo, hi int) backend.View { return f.stage(t, lo, hi, false) }

// imagesOut is writer of images [lo, hi) of t only.
func (f *frame) imagesOut(t *Tensor, lo, hi int) backend.View { return f.stage(t, lo, hi, true) }

// stage is images [lo, hi) of t as the backend takes them: the tensor's own
// view, or fp32 scratch converted from it (an input) or into it at finish
// (an output).
func (f *frame) stage(t *Tensor, lo, hi int, output bool) backend.View {
	if f.err != nil {
		return backend.View{}
	}
	v := t.Images(lo, hi)
	if !f.staged(t) {
		return v
	}
	vals := f.scratch(v.Len)
	switch {
	case f.err != nil:
	case output:
		f.commits = append(f.commits, [2]backend.View{vals, v})
	default:
		stop := f.env.Profile.begin(KindConvert)
		f.env.Backend.Convert(vals, v)
		stop()
	}
	return vals
}

// scratch is n float32 values of workspace.
func (f *frame) scratch(n int) backend.View {
	if f.err != nil {
		return backend.View{}
	}
	v, err := allocView(f.env.Device, memory.Workspace, backend.Float32, n)
	if err != nil {
		f.err = err
		return backend.View{}
	}
	f.frees = append(f.frees, v.Buf)
	return v
}

// weights returns p's values as the backend reads them: the fp32 master, or
// the 16-bit working copy (itself, or staged to fp32).
func (f *frame) weights(p *Param) backend.View {
	if p == nil || f.err != nil {
		return backend.View{}
	}
	if p.work == nil {
		return p.View()
	}
	w := p.WorkView()
	if !f.mixed && !f.env.Backend.Stages(f.op, w.DT) {
		return w
	}
	vals := f.scratch(p.Len())
	if f.err == nil {
		stop := f.env.Profile.begin(KindConvert)
		f.env.Backend.Convert(vals, w)
		stop()
	}
	return vals
}

// finish commits the outputs (if nothing failed), frees every transient
// buffer in reverse order and returns the first error.
func (f *frame) finish() error {
	if f.err == nil {
		for _, c := range f.commits {
			stop := f.env.Profile.begin(KindConvert)
			f.env.Backend.Convert(c[1], c[0])
			stop()
		}
	}
	for i := len(f.frees) - 1; i >= 0; i-- {
		f.env.Pool.MustFree(f.frees[i])
	}
	return f.err
}

// batches runs op over images [lo, hi): the whole batch in one call when
// the backend takes ts as they are, else one image at a time, each with a
// frame of its own, so that only one image of each tensor is staged at a
// time. Nil tensors in ts are skipped. It stops at the first allocation
// failure, including one already in f.
func (env *Env) batches(f *frame, n int, op func(g *frame, lo, hi int), ts ...*Tensor) error {
	if f.err != nil {
		return f.err
	}
	staged := false
	for _, t := range ts {
		staged = staged || t != nil && f.staged(t)
	}
	if !staged {
		op(f, 0, n)
		return nil
	}
	for i := 0; i < n; i++ {
		g := env.frame(f.op)
		g.mixed = f.mixed
		op(g, i, i+1)
		if err := g.finish(); err != nil {
			return err
		}
	}
	return nil
}
