package train

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/optim"
)

// tinyConfig is a small, fast configuration on 16x16 synthetic images.
func tinyConfig() config.Config {
	c := config.Default()
	c.Model.Base, c.Model.Depth, c.Model.Classes = 4, 2, 4
	c.Data.Size, c.Data.Count = 16, 40
	c.Train.BatchSize, c.Train.Steps = 4, 3
	return c
}

func testTrainer(t *testing.T, c config.Config) *Trainer {
	t.Helper()
	tr, err := NewTrainer(c, Placement{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

func paramsCopy(net *model.UNet) map[string][]float32 {
	out := map[string][]float32{}
	for _, p := range net.Params() {
		out[p.Name] = p.Read()
	}
	return out
}

// TestAccumulateMatchesLargeBatch: with group norm (independent of the batch)
// 4 micro-batches of 1 give the same gradients and the same Adam update as
// one batch of 4 made of the same samples.
func TestAccumulateMatchesLargeBatch(t *testing.T) {
	c := tinyConfig()
	c.Model.Norm = "group"
	c.Model.Groups = 2
	big := testTrainer(t, c)
	c.Train.BatchSize, c.Train.Accumulate = 1, 4
	small := testTrainer(t, c)

	var grads [2]map[string][]float32
	for i, tr := range []*Trainer{big, small} {
		tr.AfterBackward = func() {
			grads[i] = map[string][]float32{}
			for _, p := range tr.Net.Params() {
				if p.Trainable {
					grads[i][p.Name] = p.ReadGrad()
				}
			}
		}
		if _, err := tr.Step(); err != nil {
			t.Fatal(err)
		}
	}
	// Float32 sums in a different order: a 1e-5 relative bound on the
	// gradient vector of each parameter, and on each updated weight.
	for name, want := range grads[0] {
		got := grads[1][name]
		var diff, norm float64
		for j := range want {
			diff += sq(float64(got[j] - want[j]))
			norm += sq(float64(want[j]))
		}
		if math.Sqrt(diff) > 1e-5*math.Sqrt(norm) {
			t.Errorf("%s: gradient differs by %.3g relative", name, math.Sqrt(diff/norm))
		}
	}
	wantW, gotW := paramsCopy(big.Net), paramsCopy(small.Net)
	for name, want := range wantW {
		for j := range want {
			if d := math.Abs(float64(gotW[name][j] - want[j])); d > 1e-5*math.Max(1e-3, math.Abs(float64(want[j]))) {
				t.Fatalf("%s[%d]: %v after 4x1 accumulation, %v after one batch of 4", name, j, gotW[name][j], want[j])
			}
		}
	}
}

func sq(x float64) float64 { return x * x }

// TestScalerSkipsInfStep: an inf in one gradient skips the step: weights,
// Adam's moments and step count are untouched, the scale halves, the skip
// is counted, nothing is clipped; the next clean step updates again.
func TestScalerSkipsInfStep(t *testing.T) {
	c := tinyConfig()
	c.Train.Precision = backend.Float16
	c.Train.ClipGradNorm = 1e9 // clips nothing, but runs: not on the skipped step
	tr := testTrainer(t, c)
	if _, err := tr.Step(); err != nil { // a clean step first, so Adam has state
		t.Fatal(err)
	}
	weights := paramsCopy(tr.Net)
	read := func(v backend.View) []float32 { return backend.DownloadFloat32(tr.Device.Backend, v) }
	var moments [][]float32
	state := tr.Opt.State()
	for _, st := range state {
		moments = append(moments, read(st.View))
	}
	step, scale := tr.Opt.Steps(), tr.Scaler.Scale

	tr.AfterBackward = func() {
		p := tr.Net.Params()[0]
		g := p.ReadGrad()
		g[3] = float32(math.Inf(1))
		backend.UploadFloat32(tr.Device.Backend, p.GradView(), g)
	}
	res, err := tr.Step()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Skipped || tr.Scaler.Skipped != 1 || res.Clipping {
		t.Fatalf("inf gradient: skipped=%v, count %d, clipping %v", res.Skipped, tr.Scaler.Skipped, res.Clipping)
	}
	if tr.Scaler.Scale != scale/2 || tr.Scaler.GrowthTracker != 0 {
		t.Errorf("scale %v tracker %d after inf, want %v and 0", tr.Scaler.Scale, tr.Scaler.GrowthTracker, scale/2)
	}
	if tr.Opt.Steps() != step {
		t.Errorf("Adam step %d after a skipped step, want %d", tr.Opt.Steps(), step)
	}
	// Trainable weights are untouched; BatchNorm's running statistics did
	// see the batch in forward, as in PyTorch.
	for _, p := range tr.Net.Params() {
		if p.Trainable && !equalBits(p.Read(), weights[p.Name]) {
			t.Errorf("%s changed by a skipped step", p.Name)
		}
	}
	for i, st := range state {
		if !equalBits(read(st.View), moments[i]) {
			t.Fatalf("Adam state %s of %s changed by a skipped step", st.Name, st.Param.Name)
		}
	}

	tr.AfterBackward = nil
	if res, err := tr.Step(); err != nil || res.Skipped {
		t.Fatalf("clean step after the skip: skipped=%v err=%v", res.Skipped, err)
	}
	if tr.Opt.Steps() != step+1 || tr.Scaler.GrowthTracker != 1 {
		t.Errorf("after a clean step: Adam step %d tracker %d, want %d and 1", tr.Opt.Steps(), tr.Scaler.GrowthTracker, step+1)
	}
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestScalerGrowth: the scale doubles after GrowthInterval clean steps in a
// row and the tracker restarts; an inf resets the tracker.
func TestScalerGrowth(t *testing.T) {
	s := &optim.GradScaler{Enabled: true, Scale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3}
	for _, tc := range []struct {
		finite  bool
		scale   float64
		tracker int
	}{
		{true, 65536, 1}, {true, 65536, 2}, {true, 131072, 0},
		{true, 131072, 1}, {false, 65536, 0}, {true, 65536, 1}, {true, 65536, 2}, {true, 131072, 0},
	} {
		s.Update(tc.finite)
		if s.Scale != tc.scale || s.GrowthTracker != tc.tracker {
			t.Fatalf("after finite=%v: scale %v tracker %d, want %v and %d", tc.finite, s.Scale, s.GrowthTracker, tc.scale, tc.tracker)
		}
	}
	if s.Skipped != 1 {
		t.Errorf("skipped %d, want 1", s.Skipped)
	}
	// Through the trainer: interval 2 doubles the scale after two steps.
	c := tinyConfig()
	c.Train.Precision = backend.Float16
	c.Train.Scaler.GrowthInterval = 2
	tr := testTrainer(t, c)
	for range 2 {
		if _, err := tr.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if tr.Scaler.Scale != 2*65536 {
		t.Errorf("scale %v after 2 clean steps with interval 2, want %v", tr.Scaler.Scale, 2*65536)
	}
}

// TestFP16UnderflowWithoutScaling: a confident, correct prediction (every
// pixel's logit margin 15) has a loss gradient per logit of about
// 3e^-15/512 = 1.8e-9, far below fp16's smallest subnormal 6e-8: stored in
// fp16 without scaling it becomes 0 and every weight gradient vanishes.
// Scaled by 65536 (1.2e-4) it survives, and after unscaling the first
// layer's gradient points where fp32's does.
func TestFP16UnderflowWithoutScaling(t *testing.T) {
	grad := func(prec backend.DType, scale float64) []float32 {
		dev := model.NewDevice(cpu.New(), memory.Options{})
		net, err := model.New(dev, model.Config{Arch: model.Arch{InChannels: 3, Classes: 4, Base: 4, Depth: 2}}, 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range net.Params() {
			vals := p.Read()
			switch p.Name {
			case "outc.conv.weight":
				for i := range vals {
					vals[i] *= 0.1
				}
			case "outc.conv.bias":
				vals[0] = 15
			}
			p.Write(vals)
		}
		if err := net.SetPrecision(prec); err != nil {
			t.Fatal(err)
		}
		env := &model.Env{Device: dev, Training: true, Precision: prec}
		x, _ := model.NewTensor(dev, memory.Activations, backend.Float32, 2, 3, 16, 16)
		vals := make([]float32, x.Len())
		for i := range vals {
			vals[i] = float32(math.Sin(float64(i)))
		}
		x.Write(vals)
		buf, err := dev.Pool.Alloc(memory.Activations, 2*16*16) // all class 0, the confident one
		if err != nil {
			t.Fatal(err)
		}
		target := backend.Whole(buf, backend.Uint8)
		dev.Backend.Upload(target, make([]byte, target.Len))
		logits, err := net.Forward(env, x)
		if err != nil {
			t.Fatal(err)
		}
		var ce model.CrossEntropy
		loss, err := ce.Forward(env, logits, target)
		logits.Release()
		if err != nil || loss > 1e-5 {
			t.Fatalf("loss %v (%v): want a confident, correct prediction", loss, err)
		}
		d, err := ce.Backward(env, float32(scale))
		if err != nil {
			t.Fatal(err)
		}
		if err := net.Backward(env, d); err != nil {
			t.Fatal(err)
		}
		s := &optim.GradScaler{Enabled: scale != 1, Scale: scale}
		if !s.Unscale(dev.Backend, net.Params()) {
			t.Fatal("non-finite gradient")
		}
		for _, p := range net.Params() {
			if p.Name == "inc.double_conv.0.weight" {
				return p.ReadGrad()
			}
		}
		panic("no first layer")
	}
	ref := grad(backend.Float32, 1)
	if nonzero(ref) == 0 {
		t.Fatal("fp32 gradient is all zero; the test case is wrong")
	}
	if n := nonzero(grad(backend.Float16, 1)); n != 0 {
		t.Errorf("unscaled fp16: %d of %d first-layer gradients survived; expected underflow to 0", n, len(ref))
	}
	scaled := grad(backend.Float16, 65536)
	if n := nonzero(scaled); n < len(ref)*9/10 {
		t.Errorf("scaled fp16: only %d of %d first-layer gradients non-zero", n, len(ref))
	}
	var dot, a, b float64
	for i := range ref {
		dot += float64(ref[i]) * float64(scaled[i])
		a += sq(float64(ref[i]))
		b += sq(float64(scaled[i]))
	}
	if cos := dot / math.Sqrt(a*b); cos < 0.95 {
		t.Errorf("scaled fp16 gradient has cosine %.4f with fp32's", cos)
	}
}

func nonzero(xs []float32) int {
	n := 0
	for _, x := range xs {
		if x != 0 {
			n++
		}
	}
	return n
}

// TestOutOfMemoryNamesTheFix: a capacity below what the step needs fails
// with the PyTorch-style message plus the options that would fit, and the
// pool holds only the persistent state afterwards; with empty_cache: oom the
// step is retried once (and fails again the same way here, since nothing
// else holds memory).
func TestOutOfMemoryNamesTheFix(t *testing.T) {
	c := tinyConfig()
	c.Memory.Allocator = "caching" // a step that runs out; an arena runs out while building (below)
	c.Data.Size = 128              // a step of many pages, so that one page less does not fit it
	row, err := PlanConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []config.EmptyCache{config.EmptyNever, config.EmptyOOM} {
		c.Memory.Capacity = config.ByteSize(row.PeakReservedBytes - 4096)
		c.Memory.EmptyCache = mode
		tr := testTrainer(t, c)
		persistent := tr.Pool().Stats().Allocated.Current
		_, err := tr.Step()
		var oom *memory.OutOfMemoryError
		if !errors.As(err, &oom) {
			t.Fatalf("%s: want an out-of-memory error, got %v", mode, err)
		}
		for _, want := range []string{"tried to allocate", "total capacity of", "during a training step", "plan recommends the", "predicted peak"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: message lacks %q: %s", mode, want, err)
			}
		}
		if got := tr.Pool().Stats().Allocated.Current; got != persistent {
			t.Errorf("%s: %d bytes allocated after the failed step, want %d", mode, got, persistent)
		}
	}
	// The arena is taken whole while building: too little memory for it
	// fails there, naming it and the variant that fits.
	c.Memory.Allocator, c.Memory.EmptyCache = "arena", config.EmptyNever
	c.Memory.Capacity = 0
	arena, err := PlanConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Memory.Capacity = config.ByteSize(arena.ArenaBytes - 4096)
	_, err = NewTrainer(c, Placement{})
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) || !oom.Arena {
		t.Fatalf("arena: want an out-of-memory error for the arena, got %v", err)
	}
	for _, want := range []string{"(the arena, in which the plan placed every buffer of the run)", "during building the model", "plan recommends the"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("arena: message lacks %q: %s", want, err)
		}
	}
}

// TestEmptyCacheStep: with empty_cache: step, the cache is empty after
// every step (emptying it again gives nothing back; reserved is allocated,
// or on paged memory the pages live buffers touch); with never, the cache
// keeps the step's blocks.
func TestEmptyCacheStep(t *testing.T) {
	for _, paged := range []bool{false, true} {
		for _, mode := range []config.EmptyCache{config.EmptyNever, config.EmptyStep} {
			c := tinyConfig()
			c.Memory.EmptyCache, c.Memory.Allocator = mode, "caching"
			c.Data.Size = 96 // a step's activations span several 2 MiB pages
			b := backend.Backend(cpu.New())
			if !paged {
				b = unpagedCPU{b}
			}
			tr, err := NewTrainer(c, Placement{Backend: b})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Step(); err != nil {
				t.Fatal(err)
			}
			st := tr.Pool().Stats()
			if paged != (st.PageBytes > 0) {
				t.Fatalf("paged %v: the pool's pages are %d bytes", paged, st.PageBytes)
			}
			tr.Pool().EmptyCache()
			emptied := tr.Pool().Stats()
			if kept := st.Reserved.Current - emptied.Reserved.Current; (mode == config.EmptyStep) != (kept == 0) {
				t.Errorf("paged %v, %s: emptying the cache after a step gave back %d bytes", paged, mode, kept)
			}
			cached := emptied.Reserved.Current - emptied.Allocated.Current
			if !paged && cached != 0 || paged && (cached < 0 || emptied.Reserved.Current%st.PageBytes != 0) {
				t.Errorf("paged %v, %s: %d cached bytes of %d reserved after emptying the cache", paged, mode, cached, emptied.Reserved.Current)
			}
			tr.Close()
		}
	}
}

// unpagedCPU is the CPU backend over host memory taken in segments.
type unpagedCPU struct{ backend.Backend }

func (unpagedCPU) Allocator() memory.Allocator { return segmentHost{cpu.HostAllocator{}} }

// segmentHost hides the host allocator's pages.
type segmentHost struct{ memory.Allocator }

// TestPhaseMemory: every step reports the three phases; forward's peak holds
// activations, the optimizer phase none beyond the input batch, and the
// step's peak is the largest phase peak.
func TestPhaseMemory(t *testing.T) {
	tr := testTrainer(t, tinyConfig())
	res, err := tr.Step()
	if err != nil {
		t.Fatal(err)
	}
	var maxPeak int64
	for _, ph := range []string{PhaseForward, PhaseBackward, PhaseOptimizer} {
		pm, ok := res.Phases[ph]
		if !ok {
			t.Fatalf("phase %s missing", ph)
		}
		var sum int64
		for _, v := range pm.PeakByCategory {
			sum += v
		}
		if sum != pm.PeakAllocatedBytes {
			t.Errorf("%s: categories add up to %d, peak %d", ph, sum, pm.PeakAllocatedBytes)
		}
		maxPeak = max(maxPeak, pm.PeakAllocatedBytes)
	}
	if res.Peak != maxPeak {
		t.Errorf("step peak %d, largest phase peak %d", res.Peak, maxPeak)
	}
	inputs := tr.images.Len()*4 + tr.masks.Bytes()
	if a := res.Phases[PhaseOptimizer].PeakByCategory["activations"]; a > int64(inputs)+1024 {
		t.Errorf("optimizer phase holds %d activation bytes, the input batch is %d", a, inputs)
	}
}
