package backendtest_test

import (
	"sync"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/backendtest"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
)

// TestHalfNative runs the suite on the CPU backend's fp32 operations
// dressed as a backend that takes 16-bit tensors directly (Stages false),
// staging them itself: the suite's fp16 and bf16 cases are checked against
// that plain implementation as well as against the CPU's own 16-bit paths
// (which TestConformance runs).
func TestHalfNative(t *testing.T) {
	backendtest.Run(t, &halfNative{pool: memory.NewPool(cpu.HostAllocator{}, memory.Options{})})
}

// halfNative stages every 16-bit view of a layer operation through fp32
// scratch of its own (converting inputs in before, outputs back after) and
// runs the CPU backend's fp32 operation.
type halfNative struct {
	cpu.CPU
	mu   sync.Mutex
	pool *memory.Pool
}

func (h *halfNative) Name() string                          { return "cpu(half-native)" }
func (h *halfNative) Stages(backend.Op, backend.DType) bool { return false }

// staging is one operation's fp32 copies of 16-bit views.
type staging struct {
	h    *halfNative
	outs [][2]backend.View // fp32 copy, the 16-bit view
	bufs []*memory.Buffer
	seen map[backend.View]backend.View
}

func (h *halfNative) stage() *staging {
	h.mu.Lock()
	return &staging{h: h, seen: map[backend.View]backend.View{}}
}

// in is v as fp32 (v itself if it is not 16-bit); the same view staged
// twice gets the same copy, so in-place use stays in place.
func (s *staging) in(v backend.View) backend.View {
	if v.None() || !v.DT.Half() {
		return v
	}
	if c, ok := s.seen[v]; ok {
		return c
	}
	buf, err := s.h.pool.Alloc(memory.Workspace, int64(4*v.Len))
	if err != nil {
		panic(err)
	}
	s.bufs = append(s.bufs, buf)
	c := backend.Whole(buf, backend.Float32)
	s.h.CPU.Convert(c, v)
	s.seen[v] = c
	return c
}

// out is in, converted back into v when the operation is done.
func (s *staging) out(v backend.View) backend.View {
	c := s.in(v)
	if c != v {
		s.outs = append(s.outs, [2]backend.View{c, v})
	}
	return c
}

func (s *staging) done() {
	for _, o := range s.outs {
		s.h.CPU.Convert(o[1], o[0])
	}
	for _, b := range s.bufs {
		s.h.pool.MustFree(b)
	}
	s.h.mu.Unlock()
}

func (h *halfNative) Conv(sh backend.ConvShape, out, in, w, bias, ws backend.View) {
	s := h.stage()
	defer s.done()
	sh.DT = backend.Float32 // staged
	h.CPU.Conv(sh, s.out(out), s.in(in), s.in(w), bias, ws)
}

func (h *halfNative) ConvBack(sh backend.ConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	s := h.stage()
	defer s.done()
	sh.DT = backend.Float32 // staged
	h.CPU.ConvBack(sh, s.out(din), dw, dbias, s.in(dout), s.in(in), s.in(w), ws)
}

func (h *halfNative) UpConv(sh backend.UpConvShape, out, in, w, bias, ws backend.View) {
	s := h.stage()
	defer s.done()
	sh.DT = backend.Float32 // staged
	h.CPU.UpConv(sh, s.out(out), s.in(in), s.in(w), bias, ws)
}

func (h *halfNative) UpConvBack(sh backend.UpConvShape, din, dw, dbias, dout, in, w, ws backend.View) {
	s := h.stage()
	defer s.done()
	sh.DT = backend.Float32 // staged
	h.CPU.UpConvBack(sh, s.out(din), dw, dbias, s.in(dout), s.in(in), s.in(w), ws)
}

func (h *halfNative) BatchNorm(a backend.NormArgs, out, in, stats backend.View, reuse, update bool) {
	s := h.stage()
	defer s.done()
	h.CPU.BatchNorm(a, s.out(out), s.in(in), stats, reuse, update)
}

func (h *halfNative) BatchNormEval(a backend.NormArgs, out, in backend.View) {
	s := h.stage()
	defer s.done()
	h.CPU.BatchNormEval(a, s.out(out), s.in(in))
}

func (h *halfNative) BatchNormBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats backend.View) {
	s := h.stage()
	defer s.done()
	h.CPU.BatchNormBack(a, s.out(din), dgamma, dbeta, s.in(dout), s.in(in), stats)
}

func (h *halfNative) GroupNorm(a backend.NormArgs, out, in, stats backend.View, reuse bool) {
	s := h.stage()
	defer s.done()
	h.CPU.GroupNorm(a, s.out(out), s.in(in), stats, reuse)
}

func (h *halfNative) GroupNormBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats backend.View) {
	s := h.stage()
	defer s.done()
	h.CPU.GroupNormBack(a, s.out(din), dgamma, dbeta, s.in(dout), s.in(in), stats)
}

func (h *halfNative) MaxPool2(sh backend.Shape4, out, argmax, in backend.View) {
	s := h.stage()
	defer s.done()
	h.CPU.MaxPool2(sh, s.out(out), argmax, s.in(in))
}

func (h *halfNative) MaxPool2Back(sh backend.Shape4, din, dout, argmax backend.View) {
	s := h.stage()
	defer s.done()
	h.CPU.MaxPool2Back(sh, s.out(din), s.in(dout), argmax)
}

func (h *halfNative) Upsample2(sh backend.Shape4, out, in backend.View) {
	s := h.stage()
	defer s.done()
	h.CPU.Upsample2(sh, s.out(out), s.in(in))
}

func (h *halfNative) Upsample2Back(sh backend.Shape4, din, dout backend.View) {
	s := h.stage()
	defer s.done()
	h.CPU.Upsample2Back(sh, s.out(din), s.in(dout))
}

func (h *halfNative) Add(out, a, b backend.View) {
	s := h.stage()
	defer s.done()
	h.CPU.Add(s.out(out), s.in(a), s.in(b))
}

func (h *halfNative) CrossEntropy(sh backend.Shape4, logits, target backend.View) (float64, int, error) {
	s := h.stage()
	defer s.done()
	return h.CPU.CrossEntropy(sh, s.in(logits), target)
}

func (h *halfNative) CrossEntropyBack(sh backend.Shape4, dlogits, logits, target backend.View, k float32) {
	s := h.stage()
	defer s.done()
	h.CPU.CrossEntropyBack(sh, s.out(dlogits), s.in(logits), target, k)
}

func (h *halfNative) LossSums(sh backend.Shape4, logits, target backend.View, gamma float32, sums []float64) error {
	s := h.stage()
	defer s.done()
	return h.CPU.LossSums(sh, s.in(logits), target, gamma, sums)
}

func (h *halfNative) LossBack(sh backend.Shape4, dlogits, logits, target backend.View, gamma float32, coef []float32) {
	s := h.stage()
	defer s.done()
	h.CPU.LossBack(sh, s.out(dlogits), s.in(logits), target, gamma, coef)
}
