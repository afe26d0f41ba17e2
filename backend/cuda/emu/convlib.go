//go:build cudaemu

package emu

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"unsafe"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/cudnn"
)

// ConvLibrary stands in for cuDNN on the emulated device, so that the CUDA
// backend's use of a convolution library (cuda.ConvLibrary: the shapes it
// gives, the buffers' roles, accumulation, the workspace from the pool,
// the algorithm policy) is tested without a GPU. Its convolutions are
// plain loops over the emulated memory, every access bounds-checked as
// the device's copies are. Its algorithms are cuDNN's by number, with made
// up times and workspaces (algoTable); the ones cuDNN documents as
// nondeterministic sum in a shuffled order here, so their bits change
// from call to call as on a GPU. Each run overwrites the workspace it was
// promised with garbage first, so a workspace that overlaps a live tensor
// shows as a wrong result.
type ConvLibrary struct {
	d *Device
	// MinWorkspace, when set, is added to every algorithm's workspace, so
	// that a test can make every algorithm too big for a budget.
	MinWorkspace int64
	// LoadBytes, when set, is device memory each algorithm takes at its
	// first Find or run and keeps, as cuDNN's kernels take when CUDA
	// loads them lazily; with FromCache, Find loads nothing, as where its
	// results came from the Find cache.
	LoadBytes int64
	FromCache bool

	mu     sync.Mutex
	runs   map[cudnn.Pass]map[int]int // algorithm runs by pass
	finds  int
	loaded map[[2]int]bool // pass and algorithm whose LoadBytes are taken
}

var _ cuda.ConvLibrary = (*ConvLibrary)(nil)

// NewConvLibrary is the stand-in on d.
func NewConvLibrary(d *Device) *ConvLibrary {
	return &ConvLibrary{d: d, runs: map[cudnn.Pass]map[int]int{}, loaded: map[[2]int]bool{}}
}

// Name names the stand-in.
func (l *ConvLibrary) Name() string { return "emulated cuDNN (memunet's test stand-in)" }

// Runs is how many times each algorithm of pass ran.
func (l *ConvLibrary) Runs(pass cudnn.Pass) map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]int{}
	for a, n := range l.runs[pass] {
		out[a] = n
	}
	return out
}

// Finds is how many times Find was called.
func (l *ConvLibrary) Finds() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finds
}

// algoRow is one of the stand-in's algorithms: its time in ms, and its
// workspace as a multiple of the convolution's input bytes (plus a fixed
// part), status 3000 (not supported) where cuDNN 9 has none.
type algoRow struct {
	algo          int
	ms            float64
	inputTimes    int64
	fixed         int64
	deterministic bool
	status        int
}

// algoTable is each pass's algorithms: a nondeterministic one fastest
// where cuDNN has one, then a large-workspace one, then ones that need
// little or none.
var algoTable = [3][]algoRow{
	cudnn.Forward: {
		{algo: 7, ms: 1, inputTimes: 3, fixed: 4096, deterministic: true},
		{algo: 1, ms: 2, fixed: 1024, deterministic: true},
		{algo: 0, ms: 3, deterministic: true},
		{algo: 3, ms: -1, deterministic: true, status: 3000},
	},
	cudnn.BackwardData: {
		{algo: 0, ms: 0.5},
		{algo: 5, ms: 1, inputTimes: 2, fixed: 2048, deterministic: true},
		{algo: 1, ms: 2, deterministic: true},
	},
	cudnn.BackwardFilter: {
		{algo: 3, ms: 0.4, fixed: 512},
		{algo: 0, ms: 0.5},
		{algo: 5, ms: 1, inputTimes: 2, fixed: 8192, deterministic: true},
		{algo: 1, ms: 2, deterministic: true},
		{algo: 4, ms: -1, deterministic: true, status: 3000},
	},
}

// dims is a convolution's sizes from s: images, channels in and out,
// and per spatial axis (2 or 3 of them) the input's, the output's and the
// filter's sides, the padding and the stride.
type dims struct {
	n, c, k                    int
	in, out, filt, pad, stride []int
}

func dimsOf(s cudnn.Shape) (dims, error) {
	out, err := s.Output()
	if err != nil {
		return dims{}, fmt.Errorf("emulated cuDNN: %w", err)
	}
	d := dims{n: s.Input[0], c: s.Input[1], k: s.Filter[0], in: s.Input[2:], out: out[2:], filt: s.Filter[2:]}
	for i := range d.in {
		d.pad, d.stride = append(d.pad, s.PadAt(i)), append(d.stride, s.StrideAt(i))
	}
	return d, nil
}

func prod(xs []int) int {
	p := 1
	for _, x := range xs {
		p *= x
	}
	return p
}

func (d dims) inSize() int     { return d.n * d.c * prod(d.in) }
func (d dims) outSize() int    { return d.n * d.k * prod(d.out) }
func (d dims) filterSize() int { return d.k * d.c * prod(d.filt) }

// unravel writes flat index i of a grid of sides into idx, last axis fastest.
func unravel(i int, sides, idx []int) {
	for a := len(sides) - 1; a >= 0; a-- {
		idx[a] = i % sides[a]
		i /= sides[a]
	}
}

// tap is, for output position o and filter position r (each per axis),
// the input position's flat index within an image plane, or -1 where it
// falls in the padding.
func (d dims) tap(o, r []int) int {
	at := 0
	for a := range d.in {
		x := o[a]*d.stride[a] - d.pad[a] + r[a]
		if x < 0 || x >= d.in[a] {
			return -1
		}
		at = at*d.in[a] + x
	}
	return at
}

// forEachTap calls f for every (output position, filter position) pair
// whose input position lies inside the image: the flat indices of the
// three within their planes.
func (d dims) forEachTap(f func(o, r, i int)) {
	no, nr := prod(d.out), prod(d.filt)
	oi, ri := make([]int, len(d.in)), make([]int, len(d.in))
	for o := range no {
		unravel(o, d.out, oi)
		for r := range nr {
			unravel(r, d.filt, ri)
			if i := d.tap(oi, ri); i >= 0 {
				f(o, r, i)
			}
		}
	}
}

// dtypeOf is precision's storage type.
func dtypeOf(precision string) (backend.DType, error) {
	switch precision {
	case "tf32", "fp32":
		return backend.Float32, nil
	case "fp16":
		return backend.Float16, nil
	case "bf16":
		return backend.BFloat16, nil
	}
	return 0, fmt.Errorf("emulated cuDNN: precision %q", precision)
}

// Find gives pass's rows of algoTable for s.
func (l *ConvLibrary) Find(pass cudnn.Pass, s cudnn.Shape, precision string) ([]cudnn.Result, error) {
	d, err := dimsOf(s)
	if err != nil {
		return nil, err
	}
	dt, err := dtypeOf(precision)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.finds++
	l.mu.Unlock()
	var out []cudnn.Result
	for _, a := range algoTable[pass] {
		if a.status == 0 && !l.FromCache {
			if err := l.load(pass, a.algo); err != nil {
				return nil, err
			}
		}
		r := cudnn.Result{Algo: a.algo, Name: cudnn.AlgoName(pass, a.algo), Status: a.status, TimeMS: a.ms,
			Deterministic: a.deterministic, MathType: findMath(precision)}
		if a.status == 0 {
			r.WorkspaceBytes = l.workspace(a, d, dt)
		}
		if precision == "fp32" {
			// As cuDNN's Find: each algorithm under the descriptor's math
			// type (FMA) and the default one, which takes TF32 and is faster.
			tf32 := r
			tf32.MathType, tf32.TimeMS = cudnn.MathDefault, r.TimeMS/2
			out = append(out, tf32)
		}
		out = append(out, r)
	}
	return out, nil
}

// findMath is the math type of precision's descriptor (cudnn's
// precisions): FMA for exact fp32, the default for tf32, tensor ops for
// 16 bits.
func findMath(precision string) int {
	switch precision {
	case "fp32":
		return cudnn.MathFMA
	case "tf32":
		return cudnn.MathDefault
	}
	return cudnn.MathTensorOp
}

// workspace is what algorithm a takes for d.
func (l *ConvLibrary) workspace(a algoRow, d dims, dt backend.DType) int64 {
	return a.inputTimes*int64(d.inSize()*dt.Size()) + a.fixed + l.MinWorkspace
}

// Run computes pass on the emulated memory with algorithm a. An exact
// fp32 run under another math type than FMA is refused (cuDNN would run
// it on TF32).
func (l *ConvLibrary) Run(pass cudnn.Pass, s cudnn.Shape, precision string, a cudnn.Algorithm, b cudnn.Buffers) error {
	d, err := dimsOf(s)
	if err != nil {
		return err
	}
	dt, err := dtypeOf(precision)
	if err != nil {
		return err
	}
	if precision == "fp32" && a.MathType != cudnn.MathFMA {
		return fmt.Errorf("emulated cuDNN: an exact fp32 %s with math type %d would round to TF32", pass, a.MathType)
	}
	algo := a.Algo
	var row *algoRow
	for i, a := range algoTable[pass] {
		if a.algo == algo && a.status == 0 {
			row = &algoTable[pass][i]
		}
	}
	if row == nil {
		return fmt.Errorf("emulated cuDNN: %s has no algorithm %d: CUDNN_STATUS_NOT_SUPPORTED", pass, algo)
	}
	if err := l.load(pass, algo); err != nil {
		return err
	}
	if need := l.workspace(*row, d, dt); b.WorkspaceBytes < need {
		return fmt.Errorf("emulated cuDNN: %s %s needs %d bytes of workspace, given %d: CUDNN_STATUS_BAD_PARAM",
			pass, cudnn.AlgoName(pass, algo), need, b.WorkspaceBytes)
	}
	if b.WorkspaceBytes > 0 {
		ws, err := l.d.computeMem("cudnn workspace", b.Workspace, b.WorkspaceBytes)
		if err != nil {
			return err
		}
		for i := range ws {
			ws[i] = byte(0xA5 ^ i)
		}
	}
	x, err := l.tensor(b.X, d.inSize(), dt)
	if err != nil {
		return err
	}
	w, err := l.tensor(b.W, d.filterSize(), dt)
	if err != nil {
		return err
	}
	y, err := l.tensor(b.Y, d.outSize(), dt)
	if err != nil {
		return err
	}
	shuffle := !row.deterministic
	l.mu.Lock()
	if l.runs[pass] == nil {
		l.runs[pass] = map[int]int{}
	}
	l.runs[pass][algo]++
	l.mu.Unlock()
	var order func(n int) []int
	if shuffle { // seeded afresh by the process: another order every run
		rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		order = func(n int) []int { return rng.Perm(n) }
	}
	switch pass {
	case cudnn.Forward:
		d.forward(y, x, w, b.Accumulate, order)
	case cudnn.BackwardData:
		d.backwardData(x, y, w, b.Accumulate, order)
	default:
		d.backwardFilter(w, x, y, b.Accumulate, order)
	}
	return nil
}

// load takes LoadBytes of device memory for pass's algorithm algo, once.
func (l *ConvLibrary) load(pass cudnn.Pass, algo int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.LoadBytes == 0 || l.loaded[[2]int{int(pass), algo}] {
		return nil
	}
	if _, err := l.d.Alloc(l.LoadBytes); err != nil {
		return fmt.Errorf("emulated cuDNN: loading %s %s: %w", pass, cudnn.AlgoName(pass, algo), err)
	}
	l.loaded[[2]int{int(pass), algo}] = true
	return nil
}

// tensor is n values of dt at p, read and written as float32.
type tensor struct {
	bytes []byte
	dt    backend.DType
}

func (l *ConvLibrary) tensor(p uintptr, n int, dt backend.DType) (tensor, error) {
	m, err := l.d.computeMem("cudnn tensor", p, int64(n*dt.Size()))
	return tensor{m, dt}, err
}

func (t tensor) at(i int) float32 {
	switch t.dt {
	case backend.Float16:
		return backend.F16ToF32(*(*uint16)(unsafe.Pointer(&t.bytes[2*i])))
	case backend.BFloat16:
		return backend.BF16ToF32(*(*uint16)(unsafe.Pointer(&t.bytes[2*i])))
	}
	return *(*float32)(unsafe.Pointer(&t.bytes[4*i]))
}

func (t tensor) set(i int, v float32) {
	switch t.dt {
	case backend.Float16:
		*(*uint16)(unsafe.Pointer(&t.bytes[2*i])) = backend.F32ToF16(v)
	case backend.BFloat16:
		*(*uint16)(unsafe.Pointer(&t.bytes[2*i])) = backend.F32ToBF16(v)
	default:
		*(*float32)(unsafe.Pointer(&t.bytes[4*i])) = v
	}
}

// sum adds terms in order (order(len) shuffles it: a nondeterministic
// algorithm's atomic adds), in fp32 as the GPU's algorithms do.
func sum(terms []float32, order func(int) []int) float32 {
	var acc float32
	if order == nil {
		for _, t := range terms {
			acc += t
		}
		return acc
	}
	for _, i := range order(len(terms)) {
		acc += terms[i]
	}
	return acc
}

// store writes v to out[i], added to what it holds with accumulate.
func store(out tensor, i int, v float32, accumulate bool) {
	if accumulate {
		v += out.at(i)
	}
	out.set(i, v)
}

// The three passes gather each written value's terms (in the order the
// taps come, or shuffled: order), then sum them. Planes: in (n,c), out
// (n,k), filter (k,c); spatial positions flat within a plane.

// gather writes each of size values of out: the sum of the terms
// products adds to it.
func gather(out tensor, size int, accumulate bool, order func(int) []int, products func(add func(at int, v float32))) {
	terms := make([][]float32, size)
	products(func(at int, v float32) { terms[at] = append(terms[at], v) })
	for at, ts := range terms {
		store(out, at, sum(ts, order), accumulate)
	}
}

// forEachPlane calls f for every image n, output channel k and input
// channel c, with the flat index offsets of their input, output and
// filter planes.
func (d dims) forEachPlane(f func(in, out, filt int)) {
	ni, no, nr := prod(d.in), prod(d.out), prod(d.filt)
	for n := range d.n {
		for k := range d.k {
			for c := range d.c {
				f((n*d.c+c)*ni, (n*d.k+k)*no, (k*d.c+c)*nr)
			}
		}
	}
}

// forward: y (n,k,out...) = x (n,c,in...) correlated with w (k,c,filt...).
func (d dims) forward(y, x, w tensor, accumulate bool, order func(int) []int) {
	gather(y, d.outSize(), accumulate, order, func(add func(int, float32)) {
		d.forEachPlane(func(in, out, filt int) {
			d.forEachTap(func(o, r, i int) { add(out+o, x.at(in+i)*w.at(filt+r)) })
		})
	})
}

// backwardData: dx (n,c,in...) from dy (n,k,out...) and w (k,c,filt...).
func (d dims) backwardData(dx, dy, w tensor, accumulate bool, order func(int) []int) {
	gather(dx, d.inSize(), accumulate, order, func(add func(int, float32)) {
		d.forEachPlane(func(in, out, filt int) {
			d.forEachTap(func(o, r, i int) { add(in+i, dy.at(out+o)*w.at(filt+r)) })
		})
	})
}

// backwardFilter: dw (k,c,filt...) from x (n,c,in...) and dy (n,k,out...).
func (d dims) backwardFilter(dw, x, dy tensor, accumulate bool, order func(int) []int) {
	gather(dw, d.filterSize(), accumulate, order, func(add func(int, float32)) {
		d.forEachPlane(func(in, out, filt int) {
			d.forEachTap(func(o, r, i int) { add(filt+r, dy.at(out+o)*x.at(in+i)) })
		})
	})
}
