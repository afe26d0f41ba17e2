package cuda

import (
	"fmt"
	"sync"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda/cudnn"
	"github.com/memunet/memunet/memory"
)

// ConvLibrary computes convolutions on the backend's device in place of
// memunet's kernels: cuDNN (cuda.conv, through backend/cuda/cudnn), or the
// emulator's stand-in in tests. Its calls run on the compute stream, in
// issue order with the backend's launches; pointers are device addresses.
type ConvLibrary interface {
	// Name names the library for the banner and summary.json.
	Name() string
	// Find runs every algorithm of pass on a convolution of shape s at
	// precision (tf32, fp32, fp16 or bf16) and returns their results.
	Find(pass cudnn.Pass, s cudnn.Shape, precision string) ([]cudnn.Result, error)
	// Run computes pass of that convolution with algorithm algo.
	Run(pass cudnn.Pass, s cudnn.Shape, precision string, a cudnn.Algorithm, b cudnn.Buffers) error
}

// convLibrary is the backend's library, if any, and what it does for each
// convolution shape.
type convLibrary struct {
	mu       sync.Mutex
	opened   ConvLibrary // OpenConvLibrary's, kept for the process
	lib      ConvLibrary // UseConvLibrary's: opened, or nil
	policy   cudnn.Policy
	required bool // cuda.conv: cudnn: a shape the policy cannot serve is an error
	convs    map[libKey]*libConv
	order    []*libConv // as first asked for, for ConvChoices
	// found keeps Find's results of lib for the process, so that a plan
	// and the run after it (another UseConvLibrary) choose from the same
	// times: Find's vary from call to call.
	found map[findKey][]cudnn.Result
}

// findKey is one pass of one library convolution.
type findKey struct {
	shape     string
	precision string
	pass      cudnn.Pass
}

// libKey is a convolution as the backend is asked for it: a convolution
// or a transposed one (the other shape zero), at a precision.
type libKey struct {
	conv      backend.ConvShape
	up        backend.UpConvShape
	precision string
}

// libConv is what the library does for one convolution: each pass's
// algorithm and the workspace the most demanding one takes, and, for a
// 16-bit weight gradient, where the library writes it before the backend
// adds it to the fp32 gradient.
type libConv struct {
	name      string // the shape, for errors and ConvChoices
	shape     cudnn.Shape
	precision string
	chosen    [3]cudnn.Result // by cudnn.Pass
	workspace int64           // bytes: the most any chosen algorithm takes
	staging   int64           // bytes of a 16-bit weight gradient, after the workspace (0 in fp32)
	ran       [3]bool         // by pass: it has run (libRun counts its first run's memory)
	// why is not nil where the library does not compute this convolution
	// (memunet's kernels do, under cuda.conv: auto).
	why error
}

// stagingAt is the staged weight gradient's offset in the workspace:
// after the library's own, aligned as cuMemAlloc aligns.
func (c *libConv) stagingAt() int64 { return (c.workspace + 255) &^ 255 }

// floats is the workspace in float32 values (ConvWorkspace's unit).
func (c *libConv) floats() int {
	if c.staging == 0 {
		return int((c.workspace + 3) / 4)
	}
	return int((c.stagingAt() + c.staging + 3) / 4)
}

// ContextRunner is a Driver whose device's context must be current on
// the calling OS thread for a library's calls (the CUDA driver's: cuDNN
// works in the context that is current).
type ContextRunner interface {
	OnContext(f func() error) error
}

// OnContext runs f with the device's context current on its OS thread
// (ContextRunner), or as it is where the driver needs none.
func (b *Backend) OnContext(f func() error) error {
	if c, ok := b.drv.(ContextRunner); ok {
		return c.OnContext(f)
	}
	return f()
}

// OpenConvLibrary opens the backend's convolution library once for the
// process: open runs with the device's context current, and the device
// memory opening took (cuDNN's handle and what it loads) is counted in the
// context's overhead, as memunet's own modules are. Later calls return
// the library the first opened.
func (b *Backend) OpenConvLibrary(open func() (ConvLibrary, error)) (ConvLibrary, error) {
	b.lib.mu.Lock()
	defer b.lib.mu.Unlock()
	if b.lib.opened != nil {
		return b.lib.opened, nil
	}
	var lib ConvLibrary
	err := b.countingOverhead(func() error {
		return b.OnContext(func() error {
			var err error
			lib, err = open()
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	b.lib.opened = lib
	return lib, nil
}

// countingOverhead runs f and adds the device memory in use after it
// beyond what was before to the context's overhead: what a library keeps
// once f returns (its handle, the kernels its Find loaded), not the
// buffers it allocated and gave back.
func (b *Backend) countingOverhead(f func() error) error {
	before, _, err := b.DeviceMemory()
	if err != nil {
		return err
	}
	err = f()
	if after, _, merr := b.DeviceMemory(); merr == nil && after > before {
		b.overheadBytes.Add(after - before)
	}
	return err
}

// UseConvLibrary makes lib compute the convolutions from now on, 2D and
// 3D (tensors of 2^31 values or more stay memunet's): for each
// shape, at its first ConvWorkspace or call, the backend runs lib's Find
// for its three passes and policy chooses each one's algorithm. With
// required (cuda.conv: cudnn) a shape for which the policy admits no
// algorithm is the backend's error, which Sync and every later call
// return; without (auto) memunet's kernels compute it, and ConvChoices
// says why.
//
// A nil lib makes memunet's kernels compute every convolution again.
func (b *Backend) UseConvLibrary(lib ConvLibrary, policy cudnn.Policy, required bool) {
	l := &b.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	if lib == l.lib && policy == l.policy && required == l.required && l.convs != nil {
		return
	}
	if lib != l.lib {
		l.found = map[findKey][]cudnn.Result{}
	}
	l.lib, l.policy, l.required = lib, policy, required
	l.convs, l.order = map[libKey]*libConv{}, nil
}

// ConvLibrary is the library UseConvLibrary gave, nil if none.
func (b *Backend) ConvLibrary() ConvLibrary {
	b.lib.mu.Lock()
	defer b.lib.mu.Unlock()
	return b.lib.lib
}

// LibraryChoice is one convolution the library was asked for: its
// shape, and each pass's algorithm or why memunet's kernels compute it.
type LibraryChoice struct {
	Shape     string `json:"shape"`
	Precision string `json:"precision"`
	// Algorithms are the forward, backward data and backward filter
	// algorithms chosen (empty with Fallback).
	Algorithms []cudnn.Choice `json:"algorithms,omitempty"`
	// WorkspaceBytes is the most the chosen algorithms take.
	WorkspaceBytes int64 `json:"workspace_bytes"`
	// Fallback says why memunet's kernels compute it ("" where the library does).
	Fallback string `json:"fallback,omitempty"`
}

// ConvChoices lists the convolutions the library was asked for so far,
// in that order.
func (b *Backend) ConvChoices() []LibraryChoice {
	b.lib.mu.Lock()
	defer b.lib.mu.Unlock()
	out := make([]LibraryChoice, 0, len(b.lib.order))
	for _, c := range b.lib.order {
		ch := LibraryChoice{Shape: c.name, Precision: c.precision, WorkspaceBytes: c.workspace}
		if c.why != nil {
			ch.Fallback = c.why.Error()
		} else {
			for p, r := range c.chosen {
				ch.Algorithms = append(ch.Algorithms, cudnn.Choice{Layer: c.name, Pass: cudnn.Pass(p), Result: r})
			}
		}
		out = append(out, ch)
	}
	return out
}

// RoundsWeightGrads reports whether a 16-bit convolution's weight
// gradient may be rounded to 16 bits before the backend adds it to the
// fp32 one: where a library computes the convolutions (cuDNN's weight
// gradient is of the tensors' type, as in PyTorch's autocast; memunet's
// kernels sum into the fp32 gradient directly).
func (b *Backend) RoundsWeightGrads() bool { return b.ConvLibrary() != nil }

// precision is the library's name for dt's convolutions: fp32 ones are
// tf32 where cuda.tf32 lets them round their operands.
func (b *Backend) precision(dt backend.DType) string {
	switch {
	case dt == backend.Float16:
		return "fp16"
	case dt == backend.BFloat16:
		return "bf16"
	case b.tf32.Load():
		return "tf32"
	}
	return "fp32"
}

// libConvOf is the library's plan for convolution s, nil where memunet's
// kernels compute it.
func (b *Backend) libConvOf(s backend.ConvShape) *libConv {
	if !fits32(s.InSize(), s.OutSize(), s.WeightSize()) {
		return nil
	}
	return b.libPlan(libKey{conv: s, precision: b.precision(s.DT)}, s.DT, s.WeightSize(), func() (string, cudnn.Shape) {
		if s.Is3D() {
			return fmt.Sprintf("conv %dx%dx%d %d->%d on %dx%dx%dx%d (pad %d,%d)", s.KDepth(), s.K, s.K, s.C, s.OC, s.N, s.Depth(), s.H, s.W,
				s.PadD, s.Pad), cudnn.ConvShapeOf(s)
		}
		return fmt.Sprintf("conv %dx%d %d->%d on %dx%dx%d (pad %d)", s.K, s.K, s.C, s.OC, s.N, s.H, s.W, s.Pad), cudnn.ConvShapeOf(s)
	})
}

// libUpConvOf is libConvOf for the transposed convolution, which is the
// backward data pass of the convolution from its output (N,OC,2H,2W) to
// its input (N,C,H,W) with its weights (C,OC,2,2) at stride 2 (in 3D
// (N,OC,KD*D,2H,2W) to (N,C,D,H,W), weights (C,OC,KD,2,2), stride
// KD,2,2), as PyTorch computes it: its forward is that pass, its input
// gradient that convolution's forward, its weight gradient that one's.
func (b *Backend) libUpConvOf(s backend.UpConvShape) *libConv {
	if !fits32(s.InSize(), s.OutSize(), s.WeightSize()) {
		return nil
	}
	return b.libPlan(libKey{up: s, precision: b.precision(s.DT)}, s.DT, s.WeightSize(), func() (string, cudnn.Shape) {
		if s.Is3D() {
			kd := s.KDepth()
			return fmt.Sprintf("up-conv %dx2x2 %d->%d on %dx%dx%dx%d", kd, s.C, s.OC, s.N, s.Depth(), s.H, s.W),
				cudnn.Shape{Input: []int{s.N, s.OC, kd * s.Depth(), 2 * s.H, 2 * s.W}, Filter: []int{s.C, s.OC, kd, 2, 2},
					Strides: []int{kd, 2, 2}}
		}
		return fmt.Sprintf("up-conv 2x2 %d->%d on %dx%dx%d", s.C, s.OC, s.N, s.H, s.W),
			cudnn.Shape{Input: []int{s.N, s.OC, 2 * s.H, 2 * s.W}, Filter: []int{s.C, s.OC, 2, 2}, Stride: 2}
	})
}

// libPlan finds and chooses key's algorithms once (describe names it and
// gives the library's shape); nil without a library or where it does not
// compute key.
func (b *Backend) libPlan(key libKey, dt backend.DType, weights int, describe func() (string, cudnn.Shape)) *libConv {
	l := &b.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lib == nil {
		return nil
	}
	c, ok := l.convs[key]
	if !ok {
		c = &libConv{precision: key.precision}
		c.name, c.shape = describe()
		c.why = b.choose(c)
		if dt.Half() {
			c.staging = int64(weights * dt.Size())
		}
		l.convs[key] = c
		l.order = append(l.order, c)
		if c.why != nil && l.required {
			b.refuse(fmt.Errorf("cuda.conv: cudnn: %w", c.why))
		}
	}
	if c.why != nil {
		return nil
	}
	return c
}

// choose runs the library's Find for each of c's passes (once a process:
// found) and the policy's choice of them; the error is why it cannot
// (b.lib.mu held).
func (b *Backend) choose(c *libConv) error {
	for p := cudnn.Forward; p <= cudnn.BackwardFilter; p++ {
		key := findKey{fmt.Sprint(c.shape), c.precision, p}
		results, ok := b.lib.found[key]
		if !ok {
			err := b.countingOverhead(func() error {
				var err error
				results, err = b.lib.lib.Find(p, c.shape, c.precision)
				return err
			})
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			b.lib.found[key] = results
		}
		r, err := b.lib.policy.Choose(cudnn.Entry{Layer: c.name, Pass: p, Precision: c.precision, Shape: c.shape, Results: results})
		if err != nil {
			return err
		}
		c.chosen[p] = r
		c.workspace = max(c.workspace, r.WorkspaceBytes)
	}
	return nil
}

// refuse makes err the backend's error, which Sync and every later call
// return, unless it has one: a convolution the configuration's provider
// cannot compute stops the run as a device fault does, before any of it.
func (b *Backend) refuse(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = &FaultError{Device: b.drv.Name(), Op: "planning the convolutions", Err: err}
	}
}

// libRun runs pass of c on x, w and y (Buffers' roles) with ws as its
// workspace; a library call counts as one launch.
func (b *Backend) libRun(c *libConv, pass cudnn.Pass, x, w, y devicePtr, ws backend.View, accumulate bool) {
	if b.failed() != nil {
		return
	}
	space := b.libSpace(ws, c)
	b.order(x, w, y, space)
	run := func() error {
		return b.lib.lib.Run(pass, c.shape, c.precision, c.chosen[pass].Algorithm(), cudnn.Buffers{X: x.addr, W: w.addr, Y: y.addr,
			Workspace: space.addr, WorkspaceBytes: c.workspace, Accumulate: accumulate})
	}
	var err error
	if c.ran[pass] {
		err = run()
	} else {
		// A library loads an algorithm's kernels at its first run (CUDA's
		// lazy loading; Find loaded them where it ran, but not where its
		// results came from the cache): the context's, not the pool's.
		err = b.countingOverhead(run)
		c.ran[pass] = true
	}
	call := libCalls[pass]
	if err == nil {
		b.launched.Add(1)
		if b.syncLaunches.Load() {
			err = b.drv.Sync()
		}
	}
	b.fail(call+" ("+c.name+")", err)
}

// libCalls are cuDNN's calls by pass, for errors.
var libCalls = [3]string{"cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter"}

// libSpace is ws as c's workspace, after checking it holds c's need.
func (b *Backend) libSpace(ws backend.View, c *libConv) devicePtr {
	need := c.floats()
	if need == 0 {
		return devicePtr{}
	}
	if ws.Len < need {
		panic(fmt.Sprintf("backend/cuda: workspace %v for %s, which needs %s", ws, c.name, memory.FormatBytes(int64(4*need))))
	}
	return ptr(ws, backend.Float32)
}

// libWeightGrad adds c's weight gradient of dy over x to dw (fp32): the
// library accumulates an fp32 one itself; a 16-bit one it writes into
// the workspace's staging, which the backend then adds to dw.
func (b *Backend) libWeightGrad(c *libConv, dt backend.DType, dw, x, dy devicePtr, ws backend.View, n int) {
	if c.staging == 0 {
		b.libRun(c, cudnn.BackwardFilter, x, dw, dy, ws, true)
		return
	}
	space := b.libSpace(ws, c)
	stage := devicePtr{space.addr + uintptr(c.stagingAt()), c.staging}
	b.libRun(c, cudnn.BackwardFilter, x, stage, dy, ws, false)
	b.launch(KAccumulate, n, dw, stage, dt, n)
}

// addBias adds bias (fp32, per channel; none: nothing) to out, N images
// of C channels of hw values of dt: a library's convolution has none.
func (b *Backend) addBias(out, bias backend.View, dt backend.DType, n, c, hw int) {
	if bias.None() {
		return
	}
	checkLen(bias, c)
	b.launch(KBiasAdd, (n*c*hw+7)/8, ptr(out, dt), ptr(bias, backend.Float32), dt, n, c, hw)
}
