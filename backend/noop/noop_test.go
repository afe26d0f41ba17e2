package noop_test

import (
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/memory"
)

func TestNameAndAllocator(t *testing.T) {
	n := noop.New(cpu.New())
	if got := n.Name(); got != "noop(cpu)" {
		t.Errorf("Name() = %q, want noop(cpu)", got)
	}
	if _, ok := n.Allocator().(memory.Virtual); !ok {
		t.Errorf("Allocator() is %T, want memory.Virtual", n.Allocator())
	}
	if err := n.Sync(); err != nil {
		t.Errorf("Sync() = %v", err)
	}
}

// TestSizerIsTarget: the planner sizes workspaces as its target does, or
// the planned peak would not be the real one.
func TestSizerIsTarget(t *testing.T) {
	target := cpu.New()
	n := noop.New(target)
	for _, s := range []backend.ConvShape{
		{N: 1, C: 1, H: 1, W: 1, OC: 1, K: 1},
		{N: 2, C: 3, H: 5, W: 7, OC: 5, K: 3, Pad: 1},
		{N: 4, C: 64, H: 96, W: 96, OC: 64, K: 3, Pad: 1},
		{N: 8, C: 256, H: 24, W: 24, OC: 128, K: 1},
		{N: 2, C: 1, H: 2, W: 3, OC: 3, K: 5, Pad: 2},
		{N: 2, C: 32, D: 64, H: 64, W: 64, OC: 32, K: 3, Pad: 1, KD: 3, PadD: 1},
		{N: 2, C: 16, D: 8, H: 24, W: 24, OC: 8, K: 1, KD: 1},
		{N: 1, C: 8, D: 16, H: 32, W: 32, OC: 16, K: 3, Pad: 1, KD: 1},
		{N: 1, C: 8, D: 16, H: 32, W: 32, OC: 16, K: 3, Pad: 1, KD: 3, PadD: 1, DT: backend.Float16},
	} {
		if got, want := n.ConvWorkspace(s), target.ConvWorkspace(s); got != want {
			t.Errorf("ConvWorkspace(%+v) = %d, target's %d", s, got, want)
		}
	}
	for _, s := range []backend.UpConvShape{
		{N: 1, C: 1, H: 1, W: 1, OC: 1},
		{N: 4, C: 128, H: 48, W: 48, OC: 64},
		{N: 3, C: 5, H: 2, W: 1, OC: 3},
		{N: 2, C: 64, D: 16, H: 16, W: 16, OC: 32, KD: 2},
		{N: 1, C: 8, D: 5, H: 9, W: 9, OC: 4, KD: 1, DT: backend.BFloat16},
	} {
		if got, want := n.UpConvWorkspace(s), target.UpConvWorkspace(s); got != want {
			t.Errorf("UpConvWorkspace(%+v) = %d, target's %d", s, got, want)
		}
	}
	for _, op := range backend.Ops {
		for _, dt := range []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Uint8} {
			if got, want := n.Stages(op, dt), target.Stages(op, dt); got != want {
				t.Errorf("Stages(%s, %s) = %v, target's %v", op, dt, got, want)
			}
		}
	}
	for _, m := range backend.Methods {
		if got, want := n.Supports(m), target.Supports(m); got != want {
			t.Errorf("Supports(%s) = %v, target's %v", m, got, want)
		}
	}
}

// TestOpsOnVirtualBuffers calls every operation on views of a virtual pool,
// sized as a real call would be: none may panic or touch memory.
func TestOpsOnVirtualBuffers(t *testing.T) {
	b := noop.New(cpu.New())
	pool := memory.NewPool(b.Allocator(), memory.Options{})
	if !pool.Virtual() {
		t.Fatal("a pool over the planner's allocator is not virtual")
	}
	view := func(dt backend.DType, n int) backend.View {
		buf, err := pool.Alloc(memory.Activations, int64(n*dt.Size()))
		if err != nil {
			t.Fatal(err)
		}
		return backend.Whole(buf, dt)
	}
	f32 := func(n int) backend.View { return view(backend.Float32, n) }

	// Transfer.
	x := f32(12)
	b.Upload(x, make([]byte, x.Bytes()))
	got := []byte{1, 2, 3, 4}
	b.Download(got, x.Slice(2, 3))
	if got[0] != 0 || got[1] != 0 || got[2] != 0 || got[3] != 0 {
		t.Errorf("Download from virtual memory gave % x, want zeros", got)
	}
	h := view(backend.Float16, 12)
	b.Convert(h, x)
	b.Convert(x, h)
	b.Fill(x, 1)
	b.Fill(h, 0)

	// Layers.
	cs := backend.ConvShape{N: 2, C: 3, H: 5, W: 7, OC: 4, K: 3, Pad: 1}
	in, out, w, bias := f32(cs.InSize()), f32(cs.OutSize()), f32(cs.WeightSize()), f32(cs.OC)
	ws := f32(b.ConvWorkspace(cs))
	b.Conv(cs, out, in, w, bias, ws)
	b.Conv(cs, out, in, w, backend.View{}, ws)
	b.ConvBack(cs, f32(cs.InSize()), f32(cs.WeightSize()), f32(cs.OC), out, in, w, ws)
	b.ConvBack(cs, backend.View{}, f32(cs.WeightSize()), backend.View{}, out, in, w, ws)
	us := backend.UpConvShape{N: 2, C: 3, H: 5, W: 7, OC: 4}
	uin, uout, uw := f32(us.InSize()), f32(us.OutSize()), f32(us.WeightSize())
	uws := f32(b.UpConvWorkspace(us))
	b.UpConv(us, uout, uin, uw, f32(us.OC), uws)
	b.UpConvBack(us, f32(us.InSize()), f32(us.WeightSize()), f32(us.OC), uout, uin, uw, uws)
	cs3 := backend.ConvShape{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 4, K: 3, Pad: 1, KD: 3, PadD: 1}
	in3, out3, w3 := f32(cs3.InSize()), f32(cs3.OutSize()), f32(cs3.WeightSize())
	ws3 := f32(b.ConvWorkspace(cs3))
	b.Conv(cs3, out3, in3, w3, f32(cs3.OC), ws3)
	b.ConvBack(cs3, f32(cs3.InSize()), f32(cs3.WeightSize()), f32(cs3.OC), out3, in3, w3, ws3)
	us3 := backend.UpConvShape{N: 2, C: 3, D: 3, H: 5, W: 7, OC: 4, KD: 2}
	uin3, uout3, uw3 := f32(us3.InSize()), f32(us3.OutSize()), f32(us3.WeightSize())
	uws3 := f32(b.UpConvWorkspace(us3))
	b.UpConv(us3, uout3, uin3, uw3, f32(us3.OC), uws3)
	b.UpConvBack(us3, f32(us3.InSize()), f32(us3.WeightSize()), f32(us3.OC), uout3, uin3, uw3, uws3)
	s5, k5 := backend.Shape5{N: 2, C: 3, D: 3, H: 5, W: 7}, backend.Scale3{D: 2, H: 2, W: 2}
	vol, pooled5 := f32(s5.Len()), f32(s5.Pooled(k5).Len())
	am5 := view(backend.Uint8, s5.Pooled(k5).Len())
	b.MaxPool3(s5, k5, pooled5, am5, vol)
	b.MaxPool3Back(s5, k5, vol, pooled5, am5)
	b.Upsample3(s5, k5, f32(s5.Scaled(k5).Len()), vol)
	b.Upsample3Back(s5, k5, vol, f32(s5.Scaled(k5).Len()))

	s4 := backend.Shape4{N: 2, C: 4, H: 5, W: 7}
	a := backend.NormArgs{Shape4: s4, Groups: 2, Eps: 1e-5, Momentum: 0.1,
		Gamma: f32(4), Beta: f32(4), RunningMean: f32(4), RunningVar: f32(4)}
	act, act2 := f32(s4.Len()), f32(s4.Len())
	b.BatchNorm(a, act2, act, f32(a.StatsLen(false)), false, true)
	b.BatchNormEval(a, act2, act)
	b.BatchNormBack(a, act2, f32(4), f32(4), act2, act, f32(a.StatsLen(false)))
	b.GroupNorm(a, act2, act, f32(a.StatsLen(true)), false)
	b.GroupNormBack(a, act2, f32(4), f32(4), act2, act, f32(a.StatsLen(true)))
	b.ReLU(act2, act)
	b.ReLUBack(act2, act2, act)
	pooled := s4.N * s4.C * (s4.H / 2) * (s4.W / 2)
	am := view(backend.Uint8, pooled)
	b.MaxPool2(s4, f32(pooled), am, act)
	b.MaxPool2Back(s4, act2, f32(pooled), am)
	b.Upsample2(s4, f32(4*s4.Len()), act)
	b.Upsample2Back(s4, act2, f32(4*s4.Len()))
	cat := f32(2 * s4.Len())
	b.Concat(s4.N, cat, act, act2)
	b.Split(s4.N, act, act2, cat)
	b.Add(act, act, act2)
	target := view(backend.Uint8, s4.N*s4.H*s4.W)
	if sum, count, err := b.CrossEntropy(s4, act, target); sum != 0 || count != 0 || err != nil {
		t.Errorf("CrossEntropy = %v, %d, %v; want 0, 0, nil", sum, count, err)
	}
	b.CrossEntropyBack(s4, act2, act, target, 0.5)

	// Metrics and optimizer.
	counts := make([]int64, s4.C*s4.C)
	b.Confusion(s4, counts, act, target)
	b.Argmax(s4, target, act)
	p := f32(10)
	b.Adam(backend.AdamStep{StepSize: 1e-3, SqrtBC2: 1, Beta1: 0.9, Beta2: 0.999, OneMinusBeta1: 0.1, OneMinusBeta2: 0.001, Eps: 1e-8}, p, f32(10), f32(10), f32(10))
	if !b.UnscaleCheck([]backend.View{p}, 0.5) {
		t.Error("UnscaleCheck = false: a planned step must never be skipped")
	}
	if err := b.Sync(); err != nil {
		t.Errorf("Sync() = %v", err)
	}
	if s := pool.Stats(); s.Allocated.Current == 0 || s.NumAllocs == 0 {
		t.Errorf("the virtual pool accounted nothing: %+v", s)
	}
}
