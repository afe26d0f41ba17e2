package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/memory"
)

// utModelBytes is what m's parameters (with BatchNorm running statistics)
// and gradients take in the pool, and how many buffers they are.
func utModelBytes(m *UNet) (params, grads int64, buffers int64) {
	for _, p := range m.Params() {
		b := memory.RoundSize(4 * int64(p.Len()))
		params += b
		buffers++
		if p.Trainable {
			grads += b
			buffers++
		}
	}
	return params, grads, buffers
}

// TestParamCount checks NumParams against hand counts. With widths
// w_i = Base*2^i and a 3x3 conv having 9*in*out weights:
//
//	DoubleConv(in,out) = 9*out*in + 9*out*out + norm
//	  norm: batch or group: 2 affine (weight, bias) vectors of out per norm
//	        layer, two norm layers: 4*out (BatchNorm's running mean/var are
//	        buffers, not parameters);
//	        none: the two convs get a bias instead: 2*out.
//	UpConv(in,out) = 4*in*out + out (2x2 kernel, with bias)
//	outc = w_0*classes + classes (1x1 conv with bias)
//
// Decoder level i (1..Depth) goes from w_{D-i+1} to w_{D-i}: bilinear keeps
// the channels, so its DoubleConv takes w_{D-i+1} + w_{D-i} = 3*w_{D-i};
// transpose halves them first (UpConv(w_{D-i+1}, w_{D-i})), so 2*w_{D-i}.
func TestParamCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want int
	}{
		{
			// PyTorch's count for the same architecture.
			// encoder: inc DC(3,16)      = 9*16*19   +   64 =    2800
			//          down1 DC(16,32)   = 9*32*48   +  128 =   13952
			//          down2 DC(32,64)   = 9*64*96   +  256 =   55552
			//          down3 DC(64,128)  = 9*128*192 +  512 =  221696
			//          down4 DC(128,256) = 9*256*384 + 1024 =  885760  -> 1179760
			// decoder: up1 DC(384,128)   = 9*128*512 +  512 =  590336
			//          up2 DC(192,64)    = 9*64*256  +  256 =  147712
			//          up3 DC(96,32)     = 9*32*128  +  128 =   36992
			//          up4 DC(48,16)     = 9*16*64   +   64 =    9280  ->  784320
			// outc: 16*2 + 2 = 34.  1179760 + 784320 + 34 = 1964114
			"base16/depth4/bilinear/batch",
			Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 16, Depth: 4, Up: UpBilinear, Norm: NormBatch}},
			1964114,
		},
		{
			// The defaults are the configuration above.
			"defaults", Config{}, 1964114,
		},
		{
			// GroupNorm has the same affine parameters as BatchNorm (and no
			// running statistics), so the same count.
			"base16/depth4/bilinear/group",
			Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 16, Depth: 4, Up: UpBilinear, Norm: NormGroup}},
			1964114,
		},
		{
			// Norm none: each DoubleConv has 2*out (conv biases) instead of
			// 4*out (two norms): 2*out fewer. Sum of out over the 9
			// DoubleConvs: 16 + (32+64+128+256) + (128+64+32+16) = 736.
			// 1964114 - 2*736 = 1962642
			"base16/depth4/bilinear/none",
			Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 16, Depth: 4, Up: UpBilinear, Norm: NormNone}},
			1962642,
		},
		{
			// encoder as above: 1179760
			// up1: UpConv(256,128) = 4*256*128 + 128 =  131200; DC(256,128) = 9*128*384 + 512 = 442880
			// up2: UpConv(128,64)  = 4*128*64  +  64 =   32832; DC(128,64)  = 9*64*192  + 256 = 110848
			// up3: UpConv(64,32)   = 4*64*32   +  32 =    8224; DC(64,32)   = 9*32*96   + 128 =  27776
			// up4: UpConv(32,16)   = 4*32*16   +  16 =    2064; DC(32,16)   = 9*16*48   +  64 =   6976
			//      decoder total 174320 + 588480 = 762800
			// outc 34.  1179760 + 762800 + 34 = 1942594
			"base16/depth4/transpose/batch",
			Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 16, Depth: 4, Up: UpTranspose, Norm: NormBatch}},
			1942594,
		},
		{
			// widths 4, 8, 16; groups min(8, width): 4, 8, 8 (count unaffected)
			// inc DC(1,4)    = 9*4*5   + 16 =  196
			// down1 DC(4,8)  = 9*8*12  + 32 =  896
			// down2 DC(8,16) = 9*16*24 + 64 = 3520
			// up1 UpConv(16,8) = 4*16*8 + 8 = 520; DC(16,8) = 9*8*24 + 32 = 1760
			// up2 UpConv(8,4)  = 4*8*4  + 4 = 132; DC(8,4)  = 9*4*12 + 16 =  448
			// outc 4*3 + 3 = 15
			// 196 + 896 + 3520 + 520 + 1760 + 132 + 448 + 15 = 7487
			"base4/depth2/transpose/group/in1/classes3",
			Config{Arch: Arch{InChannels: 1, Classes: 3, Base: 4, Depth: 2, Up: UpTranspose, Norm: NormGroup}},
			7487,
		},
		{
			// widths 8, 16; no norm, so conv biases: 2*out per DoubleConv
			// inc DC(3,8)   = 9*8*11  + 16 =  808
			// down1 DC(8,16) = 9*16*24 + 32 = 3488
			// up1 DC(24,8)  = 9*8*32  + 16 = 2320 (bilinear: 16 + 8 channels in)
			// outc 8*2 + 2 = 18
			// 808 + 3488 + 2320 + 18 = 6634
			"base8/depth1/bilinear/none",
			Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 8, Depth: 1, Up: UpBilinear, Norm: NormNone}},
			6634,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := testDevice()
			m, err := New(dev, tc.cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.NumParams(); got != tc.want {
				t.Errorf("NumParams() = %d, want %d", got, tc.want)
			}
			// Exactly the parameters, buffers and gradients are in the pool.
			params, grads, buffers := utModelBytes(m)
			st := dev.Pool.Stats()
			if st.ByCategory[memory.Params].Current != params || st.ByCategory[memory.Grads].Current != grads ||
				st.Allocated.Current != params+grads || st.ActiveBuffers != buffers {
				t.Errorf("dev holds params %d, grads %d, total %d in %d buffers; want %d, %d, %d in %d",
					st.ByCategory[memory.Params].Current, st.ByCategory[memory.Grads].Current,
					st.Allocated.Current, st.ActiveBuffers, params, grads, params+grads, buffers)
			}
			// Names are unique state_dict keys; only BatchNorm running
			// statistics are not trainable.
			seen := map[string]bool{}
			for _, p := range m.Params() {
				if seen[p.Name] {
					t.Errorf("duplicate parameter name %q", p.Name)
				}
				seen[p.Name] = true
				running := strings.HasSuffix(p.Name, ".running_mean") || strings.HasSuffix(p.Name, ".running_var")
				if p.Trainable == running {
					t.Errorf("%s: trainable %v", p.Name, p.Trainable)
				}
			}
			m.Free()
			if got := dev.Pool.Stats().Allocated.Current; got != 0 {
				t.Errorf("after Free %d bytes allocated, want 0", got)
			}
		})
	}
}

// TestParamNames pins a few state_dict keys and shapes of the default
// configuration (and the transposed-conv one) to PyTorch's layout.
func TestParamNames(t *testing.T) {
	for _, tc := range []struct {
		up   UpMode
		want map[string][]int
	}{
		{UpBilinear, map[string][]int{
			"inc.double_conv.0.weight":                  {16, 3, 3, 3},
			"inc.double_conv.1.running_var":             {16},
			"down4.maxpool_conv.1.double_conv.3.weight": {256, 256, 3, 3},
			"up1.conv.double_conv.0.weight":             {128, 384, 3, 3},
			"up4.conv.double_conv.4.bias":               {16},
			"outc.conv.weight":                          {2, 16, 1, 1},
			"outc.conv.bias":                            {2},
		}},
		{UpTranspose, map[string][]int{
			"up1.up.weight":                 {256, 128, 2, 2},
			"up1.up.bias":                   {128},
			"up1.conv.double_conv.0.weight": {128, 256, 3, 3},
		}},
	} {
		dev := testDevice()
		m, err := New(dev, Config{Arch: Arch{Up: tc.up}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]int{}
		for _, p := range m.Params() {
			got[p.Name] = p.Shape
		}
		for name, shape := range tc.want {
			if s, ok := got[name]; !ok || !utEqualInts(s, shape) {
				t.Errorf("%s: %s has shape %v (present %v), want %v", tc.up, name, s, ok, shape)
			}
		}
		m.Free()
	}
}

func utEqualInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// utBatch makes a reproducible (n,c,h,w) image batch on dev and targets
// (a Uint8 view on dev) with some pixels ignored.
func utBatch(t *testing.T, dev *Device, seed uint64, n, c, h, w, classes int) (*Tensor, backend.View) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x756e6574))
	x, err := NewTensor(dev, memory.Activations, backend.Float32, n, c, h, w)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, x.Len())
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	x.Write(vals)
	target := make([]uint8, n*h*w)
	for i := range target {
		target[i] = uint8(rng.IntN(classes))
		if rng.IntN(10) == 0 {
			target[i] = IgnoreIndex
		}
	}
	return x, testTarget(dev, target)
}

var utVariants = []struct {
	norm NormKind
	up   UpMode
}{
	{NormBatch, UpBilinear}, {NormBatch, UpTranspose},
	{NormGroup, UpBilinear}, {NormGroup, UpTranspose},
	{NormNone, UpBilinear}, {NormNone, UpTranspose},
}

// TestStepMemory runs three training steps (ZeroGrad, Forward, loss Forward
// and Backward, Backward) of a small UNet, with a new peak window each
// step. After every step the pool must hold exactly the parameters and
// gradients (plus the input batch and targets when they live on the same device): no
// activation or workspace buffer survives the step. Each step's peak, its
// split by category and its allocation count must be identical, and after
// the first step every block comes from the cache (reserved does not grow).
func TestStepMemory(t *testing.T) {
	type variant struct {
		name        string
		norm        NormKind
		up          UpMode
		inModelPool bool
	}
	var variants []variant
	for _, v := range utVariants {
		variants = append(variants, variant{string(v.norm) + "/" + string(v.up), v.norm, v.up, false})
	}
	variants = append(variants, variant{"batch/bilinear/input-in-model-dev", NormBatch, UpBilinear, true})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dev := testDevice()
			m, err := New(dev, Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 4, Depth: 2, Up: v.up, Norm: v.norm}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			params, grads, buffers := utModelBytes(m)
			// By default the batch lives on a device of its own, as a data loader's
			// staging buffer would, so the model's pool must come back to
			// params+grads exactly, with 0 activation bytes.
			dataDev := testDevice()
			if v.inModelPool {
				dataDev = dev
			}
			x, target := utBatch(t, dataDev, 1, 2, 3, 16, 16, 2)
			defer x.Release()
			var held, heldBuffers int64
			if v.inModelPool {
				held, heldBuffers = memory.RoundSize(4*int64(x.Len()))+memory.RoundSize(int64(target.Len)), 2
			}
			env := &Env{Device: dev, Training: true}

			var stats []memory.Stats
			var losses []float64
			var firstGrads [][]float32
			for step := range 3 {
				allocsBefore := dev.Pool.Stats().NumAllocs
				dev.Pool.ResetPeak()
				m.ZeroGrad()
				logits, err := m.Forward(env, x)
				if err != nil {
					t.Fatal(err)
				}
				var ce CrossEntropy
				loss, err := ce.Forward(env, logits, target)
				if err != nil {
					t.Fatal(err)
				}
				logits.Release()
				dlogits, err := ce.Backward(env, 1)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Backward(env, dlogits); err != nil {
					t.Fatal(err)
				}
				st := dev.Pool.Stats()
				if st.Allocated.Current != params+grads+held || st.ActiveBuffers != buffers+heldBuffers {
					t.Errorf("step %d: %d bytes in %d buffers allocated, want params %d + grads %d + input %d = %d in %d",
						step, st.Allocated.Current, st.ActiveBuffers, params, grads, held, params+grads+held, buffers+heldBuffers)
				}
				for c, want := range map[memory.Category]int64{
					memory.Params: params, memory.Grads: grads, memory.Optimizer: 0,
					memory.Activations: held, memory.Workspace: 0,
				} {
					if got := st.ByCategory[c].Current; got != want {
						t.Errorf("step %d: %s holds %d bytes, want %d", step, c, got, want)
					}
				}
				if x.Refs() != 1 {
					t.Errorf("step %d: input has %d references, want 1", step, x.Refs())
				}
				if st.Allocated.Peak <= params+grads+held {
					t.Errorf("step %d: peak %d is not above the resting %d", step, st.Allocated.Peak, params+grads+held)
				}
				if math.IsNaN(loss) || loss <= 0 {
					t.Errorf("step %d: loss %v", step, loss)
				}
				st.NumAllocs -= allocsBefore // per step
				stats = append(stats, st)
				losses = append(losses, loss)
				var gs [][]float32
				for _, p := range m.Params() {
					gs = append(gs, p.ReadGrad())
				}
				if step == 0 {
					firstGrads = gs
				} else {
					for i, g := range gs {
						gcEqual(t, m.Params()[i].Name+" grad vs step 0", g, firstGrads[i])
					}
				}
			}
			t.Logf("per-step peak %d bytes (params %d, grads %d), at peak by category %v",
				stats[0].Allocated.Peak, params, grads, stats[0].AtPeak)
			for i, st := range stats[1:] {
				step := i + 1
				if st.Allocated.Peak != stats[0].Allocated.Peak {
					t.Errorf("step %d: peak %d bytes, step 0: %d", step, st.Allocated.Peak, stats[0].Allocated.Peak)
				}
				if st.AtPeak != stats[0].AtPeak {
					t.Errorf("step %d: split at peak %v, step 0: %v", step, st.AtPeak, stats[0].AtPeak)
				}
				for _, c := range memory.Categories() {
					if st.ByCategory[c].Peak != stats[0].ByCategory[c].Peak {
						t.Errorf("step %d: %s peak %d, step 0: %d", step, c, st.ByCategory[c].Peak, stats[0].ByCategory[c].Peak)
					}
				}
				if st.NumAllocs != stats[0].NumAllocs {
					t.Errorf("step %d: %d allocations, step 0: %d", step, st.NumAllocs, stats[0].NumAllocs)
				}
				if st.Reserved.Peak != stats[0].Reserved.Current {
					t.Errorf("step %d: reserved peaked at %d, above the %d reserved after step 0", step, st.Reserved.Peak, stats[0].Reserved.Current)
				}
				// Training-mode BatchNorm uses batch statistics, so with
				// unchanged weights the loss is the same every step.
				if losses[step] != losses[0] {
					t.Errorf("step %d: loss %v, step 0: %v", step, losses[step], losses[0])
				}
			}
		})
	}
}

// TestEvalSavesNothing: in eval mode Forward leaves only its output
// allocated beyond the parameters (no layer saves anything, nothing holds the
// input), and does not touch BatchNorm's running statistics. For norms
// without running statistics eval computes what training computes.
func TestEvalSavesNothing(t *testing.T) {
	for _, v := range utVariants {
		t.Run(string(v.norm)+"/"+string(v.up), func(t *testing.T) {
			dev := testDevice()
			m, err := New(dev, Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 4, Depth: 2, Up: v.up, Norm: v.norm}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			params, grads, _ := utModelBytes(m)
			x, target := utBatch(t, testDevice(), 2, 2, 3, 16, 16, 2)
			defer x.Release()

			eval := func(when string) []float32 {
				t.Helper()
				snapshot := func() (out [][]float32) {
					for _, p := range m.Params() {
						out = append(out, p.Read())
					}
					return out
				}
				before := snapshot()
				logits, err := m.Forward(&Env{Device: dev}, x)
				if err != nil {
					t.Fatal(err)
				}
				out := memory.RoundSize(4 * int64(logits.Len()))
				st := dev.Pool.Stats()
				if st.Allocated.Current != params+grads+out || st.ByCategory[memory.Activations].Current != out ||
					st.ByCategory[memory.Workspace].Current != 0 {
					t.Errorf("%s: after eval forward %d bytes allocated (%d activations, %d workspace), want params+grads %d + logits %d",
						when, st.Allocated.Current, st.ByCategory[memory.Activations].Current,
						st.ByCategory[memory.Workspace].Current, params+grads, out)
				}
				if x.Refs() != 1 || logits.Refs() != 1 {
					t.Errorf("%s: input has %d references, logits %d; want 1 and 1", when, x.Refs(), logits.Refs())
				}
				for i, p := range m.Params() {
					gcEqual(t, when+": "+p.Name+" after eval", p.Read(), before[i])
				}
				res := logits.Read()
				logits.Release()
				if got := dev.Pool.Stats().Allocated.Current; got != params+grads {
					t.Errorf("%s: %d bytes allocated after releasing the logits, want %d", when, got, params+grads)
				}
				return res
			}
			first := eval("fresh model")

			env := &Env{Device: dev, Training: true}
			logits, err := m.Forward(env, x)
			if err != nil {
				t.Fatal(err)
			}
			if v.norm != NormBatch {
				gcEqual(t, "training vs eval logits", logits.Read(), first)
			}
			var ce CrossEntropy
			if _, err := ce.Forward(env, logits, target); err != nil {
				t.Fatal(err)
			}
			logits.Release()
			dl, err := ce.Backward(env, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(env, dl); err != nil {
				t.Fatal(err)
			}
			// After a training step (BatchNorm's running statistics moved).
			eval("after a training step")
		})
	}
}

// TestInputNotDivisible: an image whose height or width is not a multiple
// of 2^depth is refused with an error naming the problem, before anything is
// allocated or retained.
func TestInputNotDivisible(t *testing.T) {
	dev := testDevice()
	m, err := New(dev, Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 4, Depth: 2}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	for _, hw := range [][2]int{{18, 16}, {16, 18}, {6, 6}, {2, 4}} {
		x, err := NewTensor(dev, memory.Activations, backend.Float32, 1, 3, hw[0], hw[1])
		if err != nil {
			t.Fatal(err)
		}
		before := dev.Pool.Stats()
		for _, training := range []bool{true, false} {
			logits, err := m.Forward(&Env{Device: dev, Training: training}, x)
			if err == nil || !strings.Contains(err.Error(), "not divisible") {
				t.Errorf("%dx%d (training %v): err = %v, want one saying not divisible", hw[0], hw[1], training, err)
			}
			if logits != nil {
				t.Errorf("%dx%d: got logits with an error", hw[0], hw[1])
			}
		}
		if after := dev.Pool.Stats(); after.Allocated.Current != before.Allocated.Current || after.NumAllocs != before.NumAllocs || x.Refs() != 1 {
			t.Errorf("%dx%d: a refused forward allocated or retained something", hw[0], hw[1])
		}
		x.Release()
	}
	if err := m.CheckInput(3, 16, 20); err != nil {
		t.Errorf("16x20 with depth 2: %v", err)
	}
	if err := m.CheckInput(4, 16, 16); err == nil || !strings.Contains(err.Error(), "channels") {
		t.Errorf("4 channels into a 3-channel model: err = %v", err)
	}
}

// TestFLOPs checks the count for a depth-1 network by hand: 8x8 input,
// base 2, bilinear: inc DC(3,2): 2*9*(3*2+2*2)*64; down1 DC(2,4) at 4x4:
// 2*9*(2*4+4*4)*16; up1 DC(6,2) at 8x8: 2*9*(6*2+2*2)*64; outc 2*2*2*64.
func TestFLOPs(t *testing.T) {
	dev := NewDevice(noop.New(cpu.New()), memory.Options{})
	m, err := New(dev, Config{Arch: Arch{InChannels: 3, Classes: 2, Base: 2, Depth: 1}, Recompute: []int{1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	fwd, rec := m.FLOPs(8, 8)
	want := 2*9*(3*2+2*2)*64.0 + 2*9*(2*4+4*4)*16 + 2*9*(6*2+2*2)*64 + 2*2*2*64
	if fwd != want {
		t.Errorf("forward FLOPs %v, want %v", fwd, want)
	}
	if wantRec := 2 * 9 * (2*4 + 4*4) * 16.0; rec != wantRec {
		t.Errorf("recompute FLOPs %v, want %v (the recomputed level-1 block)", rec, wantRec)
	}
}
