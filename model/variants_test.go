package model

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
)

// vtStep runs one training step (ZeroGrad, Forward, loss, Backward) in a
// fresh peak window and returns the loss, a copy of every parameter and
// buffer after it (gradients of trainables, values of BN running stats) and
// the pool's stats.
func vtStep(t *testing.T, env *Env, m *UNet, x *Tensor, target backend.View, scale float32) (float64, map[string][]float32, memory.Stats) {
	t.Helper()
	env.Pool.ResetPeak()
	m.ZeroGrad()
	logits, err := m.Forward(env, x)
	if err != nil {
		t.Fatal(err)
	}
	loss := vtBackward(t, env, m, logits, target, scale)
	out := map[string][]float32{}
	for _, p := range m.Params() {
		if p.Trainable {
			out[p.Name+".grad"] = p.ReadGrad()
		} else {
			out[p.Name] = p.Read()
		}
	}
	return loss, out, env.Pool.Stats()
}

// vtBackward takes the cross-entropy of logits (consuming them) and runs
// the model's backward from it, returning the loss.
func vtBackward(t *testing.T, env *Env, m *UNet, logits *Tensor, target backend.View, scale float32) float64 {
	t.Helper()
	var ce CrossEntropy
	loss, err := ce.Forward(env, logits, target)
	logits.Release()
	if err != nil {
		t.Fatal(err)
	}
	dlogits, err := ce.Backward(env, scale)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(env, dlogits); err != nil {
		t.Fatal(err)
	}
	return loss
}

// vtTrain trains a new UNet of cfg (seed 11) for two steps (vtStep) after
// prepare, if set, changed it, and returns each step's loss and state and
// the pool's stats after the last.
func vtTrain(t *testing.T, cfg Config, prepare func(*UNet)) ([]float64, []map[string][]float32, memory.Stats) {
	t.Helper()
	dev := testDevice()
	m, err := New(dev, cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(m)
	}
	env := &Env{Device: dev, Training: true}
	var losses []float64
	var states []map[string][]float32
	var st memory.Stats
	for step := range 2 {
		x, target := utBatch(t, dev, uint64(step+1), 2, 3, 16, 16, 3)
		loss, state, s := vtStep(t, env, m, x, target, 1)
		x.Release()
		losses, states, st = append(losses, loss), append(states, state), s
	}
	return losses, states, st
}

// vtSameBits fails t unless two of vtTrain's runs have the same losses and
// states, bit for bit; with says how the first run differs.
func vtSameBits(t *testing.T, with string, loss, wantLoss []float64, got, want []map[string][]float32) {
	t.Helper()
	for step := range wantLoss {
		if math.Float64bits(loss[step]) != math.Float64bits(wantLoss[step]) {
			t.Errorf("step %d: loss %v %s, %v without", step, loss[step], with, wantLoss[step])
		}
		for name, w := range want[step] {
			g := got[step][name]
			for i := range w {
				if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
					t.Fatalf("step %d: %s[%d] = %v %s, %v without", step, name, i, g[i], with, w[i])
				}
			}
		}
	}
}

// TestRecomputeBitExact: recomputing every level (and a single level)
// gives the same loss, the same gradients and the same BatchNorm running
// statistics as no recompute, bit for bit, over two steps, while keeping
// fewer activation bytes at the peak.
func TestRecomputeBitExact(t *testing.T) {
	for _, v := range utVariants {
		for _, levels := range [][]int{RecomputeAll(2), {0}, {2}} {
			t.Run(fmt.Sprintf("%s/%s/%v", v.norm, v.up, levels), func(t *testing.T) {
				cfg := Config{Arch: Arch{InChannels: 3, Classes: 3, Base: 4, Depth: 2, Up: v.up, Norm: v.norm, Groups: 2}}
				plainLoss, plain, plainStats := vtTrain(t, cfg, nil)
				cfg.Recompute = levels
				loss, got, stats := vtTrain(t, cfg, nil)
				vtSameBits(t, "with recompute", loss, plainLoss, got, plain)
				a, b := stats.ByCategory[memory.Activations].Peak, plainStats.ByCategory[memory.Activations].Peak
				if a >= b {
					t.Errorf("peak activation bytes %d with recompute, %d without: no saving", a, b)
				}
			})
		}
	}
}

// convCounter counts the convolutions a backend runs forward.
type convCounter struct {
	backend.Backend
	calls int
}

func (c *convCounter) Conv(s backend.ConvShape, out, in, w, bias, ws backend.View) {
	c.calls++
	c.Backend.Conv(s, out, in, w, bias, ws)
}

// TestRecomputedDecoderKeepsParts: with bilinear upsampling a recomputed
// decoder keeps its skip, the level below and its conv1's output (fewer
// bytes than its concatenated input), and backward runs every convolution
// forward again but the decoders' conv1; with transposed upsampling the
// decoders keep their input and backward runs them all again. The bits
// are TestRecomputeBitExact's.
func TestRecomputedDecoderKeepsParts(t *testing.T) {
	for _, up := range []UpMode{UpBilinear, UpTranspose} {
		t.Run(string(up), func(t *testing.T) {
			counter := &convCounter{Backend: cpu.New()}
			dev := NewDevice(counter, memory.Options{})
			m, err := New(dev, Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 4, Depth: 2, Up: up}, Recompute: RecomputeAll(2)}, 1)
			if err != nil {
				t.Fatal(err)
			}
			env := &Env{Device: dev, Training: true}
			x, target := utBatch(t, dev, 1, 2, 3, 16, 16, 2)
			defer x.Release()
			before := dev.Pool.Stats().ByCategory[memory.Activations].Current
			logits, err := m.Forward(env, x)
			if err != nil {
				t.Fatal(err)
			}
			forward := counter.calls
			for lv, L := range m.levels[:2] {
				c := L.dec.(*Recomputed)
				width, catC := 4<<lv, 3*(4<<lv)
				if up == UpTranspose {
					if c.fromConv1() || L.input != nil || c.in.C != 2*width {
						t.Errorf("level %d: transposed decoder keeps %d channels (from conv1: %v), want its input's %d", lv, c.in.C, c.fromConv1(), 2*width)
					}
					continue
				}
				in := L.input
				if !c.fromConv1() || c.in.C != width || in.skip.C != width || in.below.C != 2*width || in.below.H != c.in.H/2 {
					t.Fatalf("level %d: decoder keeps %v (from conv1: %v), skip %v, below %v; want %d, %d and %d channels at half size", lv, c.in, c.fromConv1(), in.skip, in.below, width, width, 2*width)
				}
				if kept, cat := c.in.Len()+in.skip.Len()+in.below.Len(), catC*c.in.H*c.in.W*2; kept >= cat {
					t.Errorf("level %d: keeps %d values, the concatenation has %d", lv, kept, cat)
				}
			}
			vtBackward(t, env, m, logits, target, 1)
			// Every 3x3 convolution runs again but, with bilinear
			// upsampling, the decoders' conv1 (outc does not recompute).
			again, want := counter.calls-forward, forward-1
			if up == UpBilinear {
				want -= 2
			}
			if again != want {
				t.Errorf("backward ran %d convolutions forward, want %d (forward ran %d)", again, want, forward)
			}
			if n := dev.Pool.Stats().ByCategory[memory.Activations].Current; n != before {
				t.Errorf("%d activation bytes after backward, %d before forward", n, before)
			}
		})
	}
}

// TestKeepingLessBitExact: what the layers no longer keep trains as
// keeping it, bit for bit, in fp32 and bf16, with a lower activation peak:
// the ReLUs that keep a mask instead of their output (the encoders' last;
// the bottleneck's and the decoders' below full size, with bilinear
// upsampling or with a norm a transposed convolution rebuilds its input
// from), the second convolutions that rebuild their input from the norm
// before them (normOutput, with a norm) and the decoders' first below full
// size that rebuild the concatenation (decoderCat, with a norm and bilinear
// upsampling).
//
// With some levels recomputed (depth 3, batch norm), the kept parts and
// the rebuilt ones mix: the bits are the same and the peak no larger.
func TestKeepingLessBitExact(t *testing.T) {
	type tc struct {
		norm  NormKind
		up    UpMode
		dt    backend.DType
		depth int
		ck    []int
	}
	var cases []tc
	for _, v := range utVariants {
		for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
			cases = append(cases, tc{v.norm, v.up, dt, 2, nil})
		}
	}
	for _, ck := range [][]int{{1}, {3}, {0, 3}, {2, 3}} {
		cases = append(cases, tc{NormBatch, UpBilinear, backend.Float32, 3, ck})
	}
	for _, c := range cases {
		v, dt := c, c.dt
		t.Run(fmt.Sprintf("%s/%s/%s/depth%d/ck%v", v.norm, v.up, dt, v.depth, v.ck), func(t *testing.T) {
			cfg := Config{Arch: Arch{InChannels: 3, Classes: 3, Base: 4, Depth: v.depth, Up: v.up, Norm: v.norm, Groups: 2}, Recompute: v.ck}
			run := func(masks bool) (float64, map[string][]float32, memory.Stats, int) {
				dev := testDevice()
				m, err := New(dev, cfg, 11)
				if err != nil {
					t.Fatal(err)
				}
				if dt != backend.Float32 {
					if err := m.SetPrecision(dt); err != nil {
						t.Fatal(err)
					}
				}
				masked, rebuilt, cats := 0, 0, 0
				for _, L := range m.levels {
					if L.plainCat != nil {
						cats++
					}
					if !masks && L.decBody != nil {
						L.plainCat = nil
						L.decBody.conv1.Source = nil
						if uc, ok := L.up.(*UpConv); ok {
							uc.Source = nil
						}
					}
					for _, b := range []*DoubleConv{L.encBody, L.decBody} {
						if b == nil {
							continue
						}
						if !masks {
							b.relu2.Mask, b.conv2.Source, b.relu1.Mask = false, nil, false
						}
						if b.relu2.Mask {
							masked++
						}
						if b.conv2.Source != nil {
							rebuilt++
						}
					}
				}
				wantCats := 0 // the decoders below full size
				if v.norm != NormNone && v.up == UpBilinear {
					wantCats = v.depth - 1
				}
				if want := map[NormKind]int{NormBatch: 5, NormGroup: 5, NormNone: 0}[v.norm]; masks && v.ck == nil && (rebuilt != want || cats != wantCats) {
					t.Errorf("%d second and %d first convolutions rebuild their input, want %d and %d", rebuilt, cats, want, wantCats)
				}
				env := &Env{Device: dev, Training: true, Precision: dt}
				x, target := utBatch(t, dev, 3, 2, 3, 16, 16, 3)
				defer x.Release()
				loss, state, st := vtStep(t, env, m, x, target, 1)
				return loss, state, st, masked
			}
			plainLoss, plain, plainStats, _ := run(false)
			loss, got, stats, masked := run(true)
			want := 4 // the encoders', the bottleneck's and the decoder's below full size
			if v.up == UpTranspose && v.norm == NormNone {
				want = 2 // the transposed convolutions keep their input
			}
			if v.ck == nil && masked != want {
				t.Errorf("%d ReLUs keep a mask, want %d", masked, want)
			}
			if math.Float64bits(loss) != math.Float64bits(plainLoss) {
				t.Errorf("loss %v with masks, %v without", loss, plainLoss)
			}
			for name, want := range plain {
				for i := range want {
					if math.Float32bits(got[name][i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s[%d] = %v with masks, %v without", name, i, got[name][i], want[i])
					}
				}
			}
			a, b := stats.ByCategory[memory.Activations].Peak, plainStats.ByCategory[memory.Activations].Peak
			if a > b || a == b && v.ck == nil {
				t.Errorf("activation peak %d bytes keeping less, %d keeping all", a, b)
			}
		})
	}
}

// TestRecomputeRunningStatsUpdatedOnce: after one step the running mean of
// a recomputed BatchNorm equals 0.9*0 + 0.1*batch mean, i.e. it was
// updated once, and NumBatchesTracked is 1.
func TestRecomputeRunningStatsUpdatedOnce(t *testing.T) {
	dev := testDevice()
	m, err := New(dev, Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 4, Depth: 1}, Recompute: RecomputeAll(1)}, 3)
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Device: dev, Training: true}
	x, target := utBatch(t, dev, 5, 2, 3, 8, 8, 2)
	vtStep(t, env, m, x, target, 1)
	bn := m.levels[0].encBody.norm1.(*BatchNorm2d)
	if bn.NumBatchesTracked != 1 {
		t.Errorf("NumBatchesTracked = %d after one recomputed step, want 1", bn.NumBatchesTracked)
	}
}

// TestMixedPrecision: with fp16 or bf16 activations and weight copies the
// gradients stay close to fp32's, saved activations take half the bytes, and
// nothing leaks.
func TestMixedPrecision(t *testing.T) {
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		for _, v := range utVariants {
			t.Run(fmt.Sprintf("%s/%s/%s", dt, v.norm, v.up), func(t *testing.T) {
				cfg := Config{Arch: Arch{InChannels: 3, Classes: 3, Base: 4, Depth: 2, Up: v.up, Norm: v.norm, Groups: 2}}
				run := func(prec backend.DType) (float64, map[string][]float32, memory.Stats, int64) {
					dev := testDevice()
					m, err := New(dev, cfg, 11)
					if err != nil {
						t.Fatal(err)
					}
					if err := m.SetPrecision(prec); err != nil {
						t.Fatal(err)
					}
					env := &Env{Device: dev, Training: true, Precision: prec}
					x, target := utBatch(t, dev, 1, 2, 3, 16, 16, 3)
					base := dev.Pool.Stats().Allocated.Current
					loss, g, st := vtStep(t, env, m, x, target, 1)
					if got := dev.Pool.Stats().Allocated.Current; got != base {
						t.Errorf("%s: %d bytes left after the step, want %d", prec, got, base)
					}
					return loss, g, st, base
				}
				loss32, g32, st32, _ := run(backend.Float32)
				loss16, g16, st16, _ := run(dt)
				// fp16 keeps 11 bits of mantissa, bf16 8: the loss and the
				// gradient direction stay close but not equal.
				tol := map[backend.DType]float64{backend.Float16: 5e-3, backend.BFloat16: 3e-2}[dt]
				if math.Abs(loss16-loss32) > tol*math.Abs(loss32) {
					t.Errorf("loss %v in %s, %v in fp32", loss16, dt, loss32)
				}
				for name, want := range g32 {
					got := g16[name]
					var dot, n1, n2 float64
					for i := range want {
						dot += float64(got[i]) * float64(want[i])
						n1 += float64(got[i]) * float64(got[i])
						n2 += float64(want[i]) * float64(want[i])
					}
					if n2 == 0 {
						continue
					}
					if cos := dot / math.Sqrt(n1*n2); cos < 1-10*tol {
						t.Errorf("%s: cosine %v between %s and fp32 gradients", name, cos, dt)
					}
				}
				a16 := st16.ByCategory[memory.Activations].Peak
				a32 := st32.ByCategory[memory.Activations].Peak
				// The input batch (fp32) and its targets are in both; the rest
				// halves, up to the 1-byte max-pool indices and 512-byte
				// rounding.
				in := int64(2*3*16*16*4 + 2*16*16)
				if r := float64(a16-in) / float64(a32-in); r > 0.56 {
					t.Errorf("activation peak %d in %s vs %d in fp32: ratio %.3f, want <= 0.56", a16, dt, a32, r)
				}
			})
		}
	}
}

// TestFailedStepCleanup: a step that runs out of memory in the middle is
// abandoned with Forget and FreeSince, leaving exactly params and grads, and
// the next step (with room) gives the same result as a fresh model.
func TestFailedStepCleanup(t *testing.T) {
	cfg := Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 4, Depth: 2}, Recompute: []int{1}}
	probe := testDevice()
	m0, _ := New(probe, cfg, 1)
	x0, t0 := utBatch(t, probe, 1, 2, 3, 16, 16, 2)
	_, want, st := vtStep(t, &Env{Device: probe, Training: true}, m0, x0, t0, 1)
	peak := st.Allocated.Peak

	for _, capacity := range []int64{peak - 512*20, peak - 8192, peak - 512} {
		dev := segmentDevice(memory.Options{Capacity: peak + 1<<20})
		m, err := New(dev, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		x, target := utBatch(t, dev, 1, 2, 3, 16, 16, 2)
		before := dev.Pool.Stats().Allocated.Current
		env := &Env{Device: dev, Training: true}
		// Fill the pool so that only capacity bytes are usable by the step.
		pad, err := dev.Pool.Alloc(memory.Workspace, peak+1<<20-capacity)
		if err != nil {
			t.Fatal(err)
		}
		mark := dev.Pool.Mark()
		restore := m.SaveBuffers()
		m.ZeroGrad()
		var failed error
		logits, err := m.Forward(env, x)
		if err == nil {
			var ce CrossEntropy
			_, err = ce.Forward(env, logits, target)
			logits.Release()
			if err == nil {
				var d *Tensor
				if d, err = ce.Backward(env, 1); err == nil {
					err = m.Backward(env, d)
				}
			}
		}
		failed = err
		var oom *memory.OutOfMemoryError
		if !errors.As(failed, &oom) {
			t.Fatalf("capacity %d: want an out-of-memory error, got %v", capacity, failed)
		}
		m.Forget()
		dev.Pool.FreeSince(mark, memory.Activations, memory.Workspace)
		restore()
		if got := dev.Pool.Stats().Allocated.Current; got != before+pad.Size() {
			t.Fatalf("capacity %d: %d bytes allocated after cleanup, want %d", capacity, got, before+pad.Size())
		}
		dev.Pool.MustFree(pad)
		_, got, _ := vtStep(t, env, m, x, target, 1)
		for name, w := range want {
			for i := range w {
				if got[name][i] != w[i] {
					t.Fatalf("capacity %d: after cleanup %s[%d] = %v, want %v", capacity, name, i, got[name][i], w[i])
				}
			}
		}
	}
}
