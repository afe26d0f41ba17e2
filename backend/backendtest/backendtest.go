package backendtest

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// Tolerances. A float comparison passes where |got-want| <= tol*(1+|want|),
// want being the float64 reference on the very values the backend stored
// (inputs are rounded to their storage type before the reference sees
// them). The float32 unit roundoff is u = 2^-24 ≈ 6e-8; an indexing, sign
// or formula mistake gives errors of 1e-2 and more, so every tolerance
// below is both far above what correct float32 arithmetic can produce on
// these shapes and far below what a mistake produces.
const (
	// tolExact: the result is one correctly rounded float32 operation of
	// stored values (a copy, a selection, a single add or multiply).
	tolExact = 0

	// tolElementwise: a handful of float32 operations per value (the
	// bilinear blend of four values, the affine normalisation, a softmax
	// term, Adam's update): a few u each, so 1e-5 leaves two orders of
	// magnitude for fused or reordered arithmetic (FMA, exp/log/sqrt
	// approximations accurate to a few ulps).
	tolElementwise = 1e-5

	// tolReduction: float32 sums of up to ~10^3 products of values in
	// [-1, 1] (a convolution over C*K*K = 225 inputs, a weight gradient
	// over N*OH*OW = 1104 positions, a norm's statistics). The worst-case
	// bound n*u*Σ|terms| is loose; blocked or pairwise summation as a GEMM
	// or a GPU reduction does it stays near sqrt(n)*u*Σ|terms|/(1+|want|),
	// about 1e-6 here. 1e-4 also admits Winograd- or FFT-style fp32
	// convolution algorithms, and still catches any wrong term.
	tolReduction = 1e-4

	// tolFP16 and tolBF16 are for tensors stored in 16 bits when a backend
	// computes on them directly (Stages false): the result is rounded once
	// to the storage type, half an ulp, u16 = 2^-11 and 2^-8 relative;
	// twice that leaves room for the float32 arithmetic before it.
	tolFP16 = 0x1p-10
	tolBF16 = 0x1p-7

	// tolTF32 is for fp32 convolutions whose operands a backend rounds to
	// TF32 (10 mantissa bits, u = 2^-11 per operand) on tensor cores:
	// PyTorch's own bound for TF32 convolutions, tf32_precision=0.005 in
	// its Conv2d and ConvTranspose module tests (common_nn.py; there an
	// absolute tolerance on values of unit scale, here scaled by 1+|want|
	// like the others). Sums of ~200 products of values in [-1, 1] err by
	// about 1e-3 at worst with rounded operands; an indexing mistake, a
	// lost slice or a swapped fragment errs by far more.
	tolTF32 = 5e-3
)

// tolFor is the tolerance of a result stored as dt by an operation whose
// float32 tolerance is tol.
func tolFor(dt backend.DType, tol float64) float64 {
	switch dt {
	case backend.Float16:
		return max(tol, tolFP16)
	case backend.BFloat16:
		return max(tol, tolBF16)
	}
	return tol
}

// Run checks every method of b against the references of this package,
// each case as a subtest named by operation, storage type and shape.
func Run(t *testing.T, b backend.Backend) {
	s := &suite{b: b, pool: memory.NewPool(b.Allocator(), memory.Options{}), root: t.Name() + "/"}
	t.Logf("backend %s, allocator %s", b.Name(), b.Allocator().Name())
	t.Run("Pages", s.pages)
	t.Run("Sizer", s.sizer)
	s.ops(t)
	if r, ok := b.(backend.StepRecorder); ok {
		t.Run("StepRecorder", func(t *testing.T) { s.testStepRecorder(t, r) })
	}
	t.Run("Sync", func(t *testing.T) {
		if err := b.Sync(); err != nil {
			t.Fatalf("Sync after the suite: %v", err)
		}
		if n := s.pool.Stats().ActiveBuffers; n != 0 {
			t.Errorf("%d buffers still live after the suite", n)
		}
	})
}

// suite is one Run: the backend and one pool over its allocator, from
// which every case allocates (and which every case gives back).
type suite struct {
	b    backend.Backend
	pool *memory.Pool
	root string // Run's test name and "/", cut from seeds
}

// on is s for backend b, the same pool.
func (s *suite) on(b backend.Backend) *suite { return &suite{b: b, pool: s.pool, root: s.root} }

// floatTypes are the float storage types.
var floatTypes = []backend.DType{backend.Float32, backend.Float16, backend.BFloat16}

// layerTypes are the storage types the operations of op are checked in:
// fp32, and each 16-bit type the backend computes them on directly.
func (s *suite) layerTypes(op backend.Op) []backend.DType {
	dts := []backend.DType{backend.Float32}
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		if !s.b.Stages(op, dt) {
			dts = append(dts, dt)
		}
	}
	return dts
}

// run runs f as subtest name of t, with a check seeded by the subtest's
// name below Run (the same inputs for every backend and every run).
func (s *suite) run(t *testing.T, name string, f func(c *check)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		c := &check{T: t, b: s.b, pool: s.pool}
		rel := strings.TrimPrefix(t.Name(), s.root)
		h := fnv.New64a()
		h.Write([]byte(rel))
		c.rng = rand.New(rand.NewPCG(h.Sum64(), 0x6d656d756e6574))
		t.Cleanup(c.finish)
		f(c)
	})
}

// check is one case: its random source and the buffers it allocated, each
// with guard values around its view that no operation may touch.
type check struct {
	*testing.T
	b    backend.Backend
	pool *memory.Pool
	rng  *rand.Rand
	bufs []*guarded
}

// guarded is a buffer holding one view between guard values.
type guarded struct {
	whole    backend.View // the buffer, as values of the view's type
	view     backend.View // what the case uses
	pre, suf []byte       // the guard bytes before and after the view
}

// finish checks that Sync succeeds and no guard was written, and frees the
// buffers.
func (c *check) finish() {
	if err := c.b.Sync(); err != nil {
		c.Errorf("Sync: %v", err)
	}
	for _, g := range c.bufs {
		all := backend.DownloadBytes(c.b, g.whole)
		size := g.view.DT.Size()
		lo, hi := g.view.Off*size, (g.view.Off+g.view.Len)*size
		if !equalBytes(all[:lo], g.pre) || !equalBytes(all[hi:], g.suf) {
			c.Errorf("a write outside %v: the guard values of its buffer changed", g.view)
		}
	}
	for _, g := range c.bufs {
		if err := c.pool.Free(g.whole.Buf); err != nil {
			c.Errorf("free: %v", err)
		}
	}
	c.bufs = nil
}

// alloc returns a view of n values of dt at an offset of 0 to 3 values in
// a pool buffer with 1 to 3 values after it, all random bytes (guards
// outside the view, unspecified contents inside).
func (c *check) alloc(dt backend.DType, n int) backend.View {
	c.Helper()
	pre, suf := c.rng.IntN(4), 1+c.rng.IntN(3)
	size := dt.Size()
	buf, err := c.pool.Alloc(memory.Activations, int64((pre+n+suf)*size))
	if err != nil {
		c.Fatalf("alloc of %d %s values: %v", n, dt, err)
	}
	whole := backend.Whole(buf, dt)
	init := make([]byte, whole.Bytes())
	for i := range init {
		init[i] = byte(c.rng.Uint32())
	}
	c.b.Upload(whole, init)
	g := &guarded{whole: whole, view: whole.Slice(pre, pre+n)}
	g.pre = init[:pre*size]
	g.suf = init[(pre+n)*size:]
	c.bufs = append(c.bufs, g)
	return g.view
}

// garbage is the bit pattern an output is prefilled with: a NaN for float
// types (so a value the operation does not write, or reads before writing,
// shows), 0xee for bytes (neither a class nor a window position).
func garbage(dt backend.DType) []byte {
	switch dt {
	case backend.Float32:
		return []byte{0xad, 0x0b, 0xc0, 0x7f} // 0x7fc00bad
	case backend.Float16:
		return []byte{0xad, 0x7e} // 0x7ead
	case backend.BFloat16:
		return []byte{0xad, 0x7f} // 0x7fad
	}
	return []byte{0xee}
}

// output is a view of n values of dt prefilled with garbage.
func (c *check) output(dt backend.DType, n int) backend.View {
	c.Helper()
	v := c.alloc(dt, n)
	c.b.Upload(v, repeatBytes(garbage(dt), n))
	return v
}

// input is a view holding x stored as dt. x is rounded to dt in place, so
// that the caller's reference sees the values the backend reads.
func (c *check) input(dt backend.DType, x []float32) backend.View {
	c.Helper()
	roundTo(dt, x)
	v := c.alloc(dt, len(x))
	c.b.Upload(v, encode(dt, x))
	return v
}

// inputBytes is a Uint8 view holding x.
func (c *check) inputBytes(x []byte) backend.View {
	c.Helper()
	v := c.alloc(backend.Uint8, len(x))
	c.b.Upload(v, x)
	return v
}

// inputBits is a view of a 16-bit type holding the bit patterns x.
func (c *check) inputBits(dt backend.DType, x []uint16) backend.View {
	c.Helper()
	v := c.alloc(dt, len(x))
	c.b.Upload(v, encode16(x))
	return v
}

// get downloads a float view as float32 values (16-bit values widened).
func (c *check) get(v backend.View) []float32 { return backend.DownloadFloat32(c.b, v) }

// getBytes downloads a view's bytes.
func (c *check) getBytes(v backend.View) []byte { return backend.DownloadBytes(c.b, v) }

// uniform is n values uniform in [lo, hi), never all zero.
func (c *check) uniform(n int, lo, hi float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(lo + (hi-lo)*c.rng.Float64())
	}
	if n > 0 && allZero(x) {
		x[0] = float32(hi)
	}
	return x
}

// signed is n values uniform in [-1, 1).
func (c *check) signed(n int) []float32 { return c.uniform(n, -1, 1) }

// near compares got with want elementwise: |got-want| <= tol*(1+|want|);
// a NaN want needs a NaN, an infinite want the same infinity. It logs the
// worst relative error and reports up to five mismatches.
func (c *check) near(what string, got []float32, want []float64, tol float64) {
	c.Helper()
	if len(got) != len(want) {
		c.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, bad := 0.0, 0
	for i, w := range want {
		g := float64(got[i])
		var ok bool
		var e float64
		switch {
		case math.IsNaN(w):
			ok = math.IsNaN(g)
		case math.IsInf(w, 0):
			ok = g == w
		case math.IsNaN(g) || math.IsInf(g, 0):
			ok, e = false, math.Inf(1)
		default:
			e = math.Abs(g-w) / (1 + math.Abs(w))
			ok = e <= tol
		}
		if e > worst {
			worst = e
		}
		if !ok {
			bad++
			if bad <= 5 {
				c.Errorf("%s[%d] = %v, want %v (error %.3g, tol %.3g)", what, i, got[i], w, e, tol)
			}
		}
	}
	if bad > 5 {
		c.Errorf("%s: %d of %d values out of tolerance", what, bad, len(want))
	}
	c.Logf("%s: worst error %.3g (tol %.3g) over %d values", what, worst, tol, len(want))
}

// same compares got with want exactly as values: equal floats (+0 == -0),
// NaN for NaN.
func (c *check) same(what string, got, want []float32) {
	c.Helper()
	if len(got) != len(want) {
		c.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if got[i] == want[i] || got[i] != got[i] && want[i] != want[i] {
			continue
		}
		bad++
		if bad <= 5 {
			c.Errorf("%s[%d] = %v, want %v exactly", what, i, got[i], want[i])
		}
	}
	if bad > 5 {
		c.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
}

// sameBytes compares byte strings exactly, naming the first differing
// values of size bytes.
func (c *check) sameBytes(what string, got, want []byte, size int) {
	c.Helper()
	if len(got) != len(want) {
		c.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := 0; i < len(want); i += size {
		if equalBytes(got[i:i+size], want[i:i+size]) {
			continue
		}
		bad++
		if bad <= 5 {
			c.Errorf("%s[%d] = % x, want % x", what, i/size, got[i:i+size], want[i:i+size])
		}
	}
	if bad > 5 {
		c.Errorf("%s: %d of %d values differ", what, bad, len(want)/size)
	}
}

// unchanged checks that v still holds the bytes it was given.
func (c *check) unchanged(what string, v backend.View, was []byte) {
	c.Helper()
	c.sameBytes(what+" (must be unchanged)", c.getBytes(v), was, v.DT.Size())
}

// roundTo rounds x to the values dt stores, in place.
func roundTo(dt backend.DType, x []float32) {
	for i, v := range x {
		switch dt {
		case backend.Float16:
			x[i] = backend.F16ToF32(backend.F32ToF16(v))
		case backend.BFloat16:
			x[i] = backend.BF16ToF32(backend.F32ToBF16(v))
		}
	}
}

// encode is x as little-endian values of dt (rounded to nearest even).
func encode(dt backend.DType, x []float32) []byte {
	b := make([]byte, len(x)*dt.Size())
	for i, v := range x {
		switch dt {
		case backend.Float32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		case backend.Float16:
			binary.LittleEndian.PutUint16(b[2*i:], backend.F32ToF16(v))
		case backend.BFloat16:
			binary.LittleEndian.PutUint16(b[2*i:], backend.F32ToBF16(v))
		default:
			panic(fmt.Sprintf("backendtest: no float encoding for %s", dt))
		}
	}
	return b
}

func encode16(x []uint16) []byte {
	b := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
	return b
}

func decode16(b []byte) []uint16 {
	x := make([]uint16, len(b)/2)
	for i := range x {
		x[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return x
}

func encode32(x []uint32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

func decode32(b []byte) []uint32 {
	x := make([]uint32, len(b)/4)
	for i := range x {
		x[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return x
}

func repeatBytes(p []byte, n int) []byte {
	b := make([]byte, 0, n*len(p))
	for range n {
		b = append(b, p...)
	}
	return b
}

func equalBytes(a, b []byte) bool { return string(a) == string(b) }

func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// f64 widens x (nil stays nil).
func f64(x []float32) []float64 {
	if x == nil {
		return nil
	}
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// widen is the float32 value of a 16-bit pattern of dt.
func widen(dt backend.DType, h uint16) float32 {
	if dt == backend.Float16 {
		return backend.F16ToF32(h)
	}
	return backend.BF16ToF32(h)
}

// narrow is the 16-bit pattern of dt nearest f.
func narrow(dt backend.DType, f float32) uint16 {
	if dt == backend.Float16 {
		return backend.F32ToF16(f)
	}
	return backend.F32ToBF16(f)
}
