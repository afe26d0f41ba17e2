package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// twin is one tensor of a case twice: as the operation takes it on the
// 16-bit side (a 16-bit activation or gradient, or an fp32 parameter,
// statistic or index) and as the staged side does (fp32 copies of the
// 16-bit tensors), with the same values.
type twin struct{ half, wide backend.View }

// halfSide and wideSide pick a twin's view for one side of a comparison.
func halfSide(tw twin) backend.View { return tw.half }
func wideSide(tw twin) backend.View { return tw.wide }

// halfCase makes a case's tensors in one storage type.
type halfCase struct {
	t    *testing.T
	c    CPU
	pool *memory.Pool
	rng  *rand.Rand
	dt   backend.DType
	outs []twin
}

func (h *halfCase) alloc(dt backend.DType, n int) backend.View {
	buf, err := h.pool.Alloc(memory.Workspace, int64(max(n, 1)*dt.Size()))
	if err != nil {
		h.t.Fatal(err)
	}
	return backend.View{Buf: buf, DT: dt, Len: n}
}

// act is an activation or gradient of n random values (normal, shifted by
// offset), exact in the storage type; an output too if out.
func (h *halfCase) act(n int, offset float64, out bool) twin {
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(offset + h.rng.NormFloat64())
	}
	tw := twin{half: h.alloc(h.dt, n), wide: h.alloc(backend.Float32, n)}
	h.c.Convert(tw.half, h.fp32(vals))
	h.c.Convert(tw.wide, tw.half)
	if out {
		h.outs = append(h.outs, tw)
	}
	return tw
}

// param is an fp32 tensor of n values in [lo, hi), one view for both sides
// unless out (then two, compared after).
func (h *halfCase) param(n int, lo, hi float64, out bool) twin {
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(lo + (hi-lo)*h.rng.Float64())
	}
	tw := twin{half: h.fp32(vals)}
	tw.wide = tw.half
	if out {
		tw.wide = h.fp32(vals)
		h.outs = append(h.outs, tw)
	}
	return tw
}

func (h *halfCase) fp32(vals []float32) backend.View {
	v := h.alloc(backend.Float32, len(vals))
	backend.UploadFloat32(h.c, v, vals)
	return v
}

// check compares every output: the 16-bit side's bits with the staged
// side's rounded once, fp32 outputs bit for bit.
func (h *halfCase) check(name string) {
	h.t.Helper()
	for i, tw := range h.outs {
		want := tw.wide
		if tw.half.DT != backend.Float32 {
			want = h.alloc(tw.half.DT, tw.half.Len)
			h.c.Convert(want, tw.wide)
		}
		got, exp := backend.DownloadBytes(h.c, tw.half), backend.DownloadBytes(h.c, want)
		for j := range got {
			if got[j] != exp[j] {
				h.t.Errorf("%s: output %d (%v) differs from staging at byte %d", name, i, tw.half, j)
				break
			}
		}
	}
}

// TestHalfOpsMatchStaging checks that every family the CPU takes 16-bit
// tensors for directly (Stages false) gives the bits the layers' staging
// gave: the fp32 operation on widened copies, its outputs rounded once. The
// shapes have planes of several blocks and odd lengths, rows wider than a
// block, and one value per plane; Add and the norms' backward run in place
// too.
func TestHalfOpsMatchStaging(t *testing.T) {
	c := New()
	shapes := []backend.Shape4{
		{N: 2, C: 3, H: 37, W: 41},    // 1517-value planes: a block and a tail
		{N: 1, C: 2, H: 64, W: 64},    // whole blocks
		{N: 3, C: 4, H: 5, W: 7},      // less than a block
		{N: 1, C: 2, H: 3, W: 2051},   // rows wider than two blocks
		{N: 2, C: 2, H: 1, W: 1},      // one value per plane
		{N: 1, C: 16, H: 16, W: 16},   // a UNet level
		{N: 2, C: 1, H: 129, W: 1023}, // odd everything
	}
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		for _, op := range []backend.Op{backend.OpNorm, backend.OpPool, backend.OpUpsample, backend.OpAdd, backend.OpLoss} {
			if c.Stages(op, dt) {
				t.Fatalf("Stages(%s, %s) is true: this test checks the families the CPU takes directly", op, dt)
			}
		}
		for _, s := range shapes {
			name := fmt.Sprintf("%s/N%dC%dH%dW%d", dt, s.N, s.C, s.H, s.W)
			t.Run(name, func(t *testing.T) {
				pool := memory.NewPool(HostAllocator{}, memory.Options{})
				rng := rand.New(rand.NewPCG(uint64(s.Len()), uint64(dt)))
				newCase := func() *halfCase { return &halfCase{t: t, c: c, pool: pool, rng: rng, dt: dt} }
				// run calls op once on each side.
				run := func(h *halfCase, name string, op func(side func(twin) backend.View)) {
					op(halfSide)
					op(wideSide)
					h.check(name)
				}
				n := s.Len()
				normArgs := func(h *halfCase, groups int) (backend.NormArgs, [4]twin) {
					a := backend.NormArgs{Shape4: s, Groups: groups, Eps: 1e-5, Momentum: 0.1}
					g, b := h.param(s.C, -1.5, 1.5, false), h.param(s.C, -1, 1, false)
					rm, rv := h.param(s.C, -1, 1, true), h.param(s.C, 0.5, 2, true)
					return a, [4]twin{g, b, rm, rv}
				}
				withParams := func(a backend.NormArgs, p [4]twin, side func(twin) backend.View) backend.NormArgs {
					a.Gamma, a.Beta, a.RunningMean, a.RunningVar = side(p[0]), side(p[1]), side(p[2]), side(p[3])
					return a
				}
				for _, reuse := range []bool{false, true} {
					h := newCase()
					a, p := normArgs(h, 0)
					in, out := h.act(n, 3, false), h.act(n, 0, true)
					stats := h.param(2*s.C, 0.5, 1, reuse) // reused: fixed statistics
					if !reuse {
						stats = h.param(2*s.C, 0, 0, true)
					}
					run(h, fmt.Sprintf("BatchNorm reuse=%v", reuse), func(side func(twin) backend.View) {
						c.BatchNorm(withParams(a, p, side), side(out), side(in), side(stats), reuse, !reuse)
					})
				}
				{
					h := newCase()
					a, p := normArgs(h, 0)
					in, out := h.act(n, -2, false), h.act(n, 0, true)
					run(h, "BatchNormEval", func(side func(twin) backend.View) {
						c.BatchNormEval(withParams(a, p, side), side(out), side(in))
					})
				}
				for _, inPlace := range []bool{false, true} {
					h := newCase()
					a, p := normArgs(h, 0)
					in, stats := h.act(n, 1, false), h.param(2*s.C, 0.5, 1.5, false)
					dout := h.act(n, 0, inPlace)
					din := dout
					if !inPlace {
						din = h.act(n, 0, true)
					}
					dg, db := h.param(s.C, -1, 1, true), h.param(s.C, -1, 1, true)
					run(h, fmt.Sprintf("BatchNormBack in place=%v", inPlace), func(side func(twin) backend.View) {
						c.BatchNormBack(withParams(a, p, side), side(din), side(dg), side(db), side(dout), side(in), side(stats))
					})
				}
				for _, groups := range []int{1, s.C} {
					h := newCase()
					a, p := normArgs(h, groups)
					in, out := h.act(n, 2, false), h.act(n, 0, true)
					stats := h.param(2*s.N*groups, 0, 0, true)
					run(h, fmt.Sprintf("GroupNorm groups=%d", groups), func(side func(twin) backend.View) {
						c.GroupNorm(withParams(a, p, side), side(out), side(in), side(stats), false)
					})
					h = newCase()
					a, p = normArgs(h, groups)
					in, stats = h.act(n, 1, false), h.param(2*s.N*groups, 0.5, 1.5, false)
					dout := h.act(n, 0, true) // in place
					dg, db := h.param(s.C, -1, 1, true), h.param(s.C, -1, 1, true)
					run(h, fmt.Sprintf("GroupNormBack groups=%d", groups), func(side func(twin) backend.View) {
						c.GroupNormBack(withParams(a, p, side), side(dout), side(dg), side(db), side(dout), side(in), side(stats))
					})
				}
				if s.H >= 2 && s.W >= 2 {
					h := newCase()
					pooled := s.N * s.C * (s.H / 2) * (s.W / 2)
					in, out := h.act(n, 0, false), h.act(pooled, 0, true)
					argmax := twin{half: h.alloc(backend.Uint8, pooled), wide: h.alloc(backend.Uint8, pooled)}
					h.outs = append(h.outs, argmax)
					run(h, "MaxPool2", func(side func(twin) backend.View) {
						c.MaxPool2(s, side(out), side(argmax), side(in))
					})
					h = newCase()
					dout, din := h.act(pooled, 0, false), h.act(n, 5, true) // every value written
					run(h, "MaxPool2Back", func(side func(twin) backend.View) {
						c.MaxPool2Back(s, side(din), side(dout), argmax.half)
					})
				}
				{
					h := newCase()
					in, out := h.act(n, 0, false), h.act(4*n, 0, true)
					run(h, "Upsample2", func(side func(twin) backend.View) {
						c.Upsample2(s, side(out), side(in))
					})
					h = newCase()
					dout, din := h.act(4*n, 0, false), h.act(n, 0, true)
					run(h, "Upsample2Back", func(side func(twin) backend.View) {
						c.Upsample2Back(s, side(din), side(dout))
					})
				}
				// The losses, over classes s.C, with targets of every class
				// and ignored pixels: the sums (fp32 outputs) and the
				// gradients, beside the logits and in place.
				{
					h := newCase()
					tg := make([]byte, s.N*s.H*s.W)
					for i := range tg {
						tg[i] = byte(h.rng.IntN(s.C))
						if h.rng.IntN(8) == 0 {
							tg[i] = backend.IgnoreIndex
						}
					}
					target := h.alloc(backend.Uint8, len(tg))
					c.Upload(target, tg)
					logits := h.act(n, 0, false)
					var sum [2]float64
					var count [2]int
					var lossSums [2][]float64
					coef := make([]float32, 3*s.C)
					for i := range coef {
						coef[i] = float32(h.rng.NormFloat64())
					}
					for i, side := range []func(twin) backend.View{halfSide, wideSide} {
						var err error
						if sum[i], count[i], err = c.CrossEntropy(s, side(logits), target); err != nil {
							t.Fatal(err)
						}
						lossSums[i] = make([]float64, 4*s.C)
						if err := c.LossSums(s, side(logits), target, 2, lossSums[i]); err != nil {
							t.Fatal(err)
						}
					}
					// The metrics, which read 16-bit logits the same way.
					var conf [2][]int64
					var classes [2][]byte
					for i, side := range []func(twin) backend.View{halfSide, wideSide} {
						conf[i] = make([]int64, s.C*s.C)
						c.Confusion(s, conf[i], side(logits), target)
						cv := h.alloc(backend.Uint8, len(tg))
						c.Argmax(s, cv, side(logits))
						classes[i] = backend.DownloadBytes(c, cv)
					}
					if fmt.Sprint(conf[0]) != fmt.Sprint(conf[1]) || string(classes[0]) != string(classes[1]) {
						t.Errorf("Confusion or Argmax of 16-bit logits differs from their widened copy")
					}
					if math.Float64bits(sum[0]) != math.Float64bits(sum[1]) || count[0] != count[1] {
						t.Errorf("CrossEntropy: %v over %d, staged %v over %d", sum[0], count[0], sum[1], count[1])
					}
					for i := range lossSums[0] {
						if math.Float64bits(lossSums[0][i]) != math.Float64bits(lossSums[1][i]) {
							t.Errorf("LossSums %d: %v, staged %v", i, lossSums[0][i], lossSums[1][i])
						}
					}
					for _, inPlace := range []bool{false, true} {
						h := newCase()
						logits := h.act(n, 0, inPlace)
						grad := logits
						if !inPlace {
							grad = h.act(n, 0, true)
						}
						run(h, fmt.Sprintf("CrossEntropyBack in place=%v", inPlace), func(side func(twin) backend.View) {
							c.CrossEntropyBack(s, side(grad), side(logits), target, 0.25)
						})
						h = newCase()
						logits = h.act(n, 0, inPlace)
						grad = logits
						if !inPlace {
							grad = h.act(n, 0, true)
						}
						run(h, fmt.Sprintf("LossBack in place=%v", inPlace), func(side func(twin) backend.View) {
							c.LossBack(s, side(grad), side(logits), target, 2, coef)
						})
					}
				}
				for _, inPlace := range []bool{false, true} {
					h := newCase()
					x, y := h.act(n, 0, inPlace), h.act(n, 1, false)
					out := x
					if !inPlace {
						out = h.act(n, 0, true)
					}
					run(h, fmt.Sprintf("Add in place=%v", inPlace), func(side func(twin) backend.View) {
						c.Add(side(out), side(x), side(y))
					})
				}
			})
		}
	}
}

// TestHalfConvsMatchStaging checks the convolutions the same way: each
// 16-bit call (its shape's DT 16-bit) gives the bits of the float32 call
// on widened copies, outputs rounded once, forward and backward, with and
// without din, for 3x3 (the gather paths), 5x5, 1x1 (Direct: widened into
// the workspace) and transposed convolutions; the workspace each asks for
// is exactly what it is given.
func TestHalfConvsMatchStaging(t *testing.T) {
	c := New()
	convs := []backend.ConvShape{
		{N: 2, C: 16, H: 16, W: 16, OC: 16, K: 3, Pad: 1},
		{N: 1, C: 5, H: 32, W: 32, OC: 8, K: 3, Pad: 1},
		{N: 3, C: 7, H: 9, W: 11, OC: 5, K: 5, Pad: 2},
		{N: 2, C: 6, H: 7, W: 5, OC: 3, K: 1},
		{N: 2, C: 3, H: 33, W: 64, OC: 16, K: 3, Pad: 1},
	}
	ups := []backend.UpConvShape{{N: 2, C: 8, H: 5, W: 7, OC: 4}, {N: 1, C: 32, H: 8, W: 8, OC: 16}}
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		if c.Stages(backend.OpConv, dt) {
			t.Fatalf("Stages(conv, %s) is true", dt)
		}
		pool := memory.NewPool(HostAllocator{}, memory.Options{})
		h := &halfCase{t: t, c: c, pool: pool, rng: rand.New(rand.NewPCG(9, uint64(dt))), dt: dt}
		// weights is a 16-bit weight tensor and its widened copy.
		weights := func(n int) twin { return h.act(n, 0, false) }
		for i, s := range append(convs, winoConvs(convs)...) {
			half, wide := s, s
			half.DT = dt
			name := fmt.Sprintf("%s/conv %d %+v", dt, i, s)
			// ws is each side's workspace, exactly as long as asked.
			ws := twin{half: h.alloc(backend.Float32, c.ConvWorkspace(half)), wide: h.alloc(backend.Float32, c.ConvWorkspace(wide))}
			shape := func(tw twin, side func(twin) backend.View) backend.ConvShape {
				if side(tw).DT == backend.Float32 {
					return wide
				}
				return half
			}
			h.outs = nil
			in, w, bias := h.act(s.InSize(), 0, false), weights(s.WeightSize()), h.param(s.OC, -1, 1, false)
			out := h.act(s.OutSize(), 0, true)
			for _, side := range []func(twin) backend.View{halfSide, wideSide} {
				c.Conv(shape(in, side), side(out), side(in), side(w), side(bias), side(ws))
			}
			h.check(name + " forward")
			for _, withDin := range []bool{true, false} {
				h.outs = nil
				dout := h.act(s.OutSize(), 0, false)
				dw, db := h.param(s.WeightSize(), -1, 1, true), h.param(s.OC, -1, 1, true)
				var din twin
				if withDin {
					din = h.act(s.InSize(), 0, true)
				}
				for _, side := range []func(twin) backend.View{halfSide, wideSide} {
					c.ConvBack(shape(in, side), side(din), side(dw), side(db), side(dout), side(in), side(w), side(ws))
				}
				h.check(fmt.Sprintf("%s backward din=%v", name, withDin))
			}
		}
		for _, s := range ups {
			half, wide := s, s
			half.DT = dt
			name := fmt.Sprintf("%s/upconv %+v", dt, s)
			ws := twin{half: h.alloc(backend.Float32, c.UpConvWorkspace(half)), wide: h.alloc(backend.Float32, c.UpConvWorkspace(wide))}
			h.outs = nil
			in, w, bias := h.act(s.InSize(), 0, false), weights(s.WeightSize()), h.param(s.OC, -1, 1, false)
			out := h.act(s.OutSize(), 0, true)
			c.UpConv(half, out.half, in.half, w.half, bias.half, ws.half)
			c.UpConv(wide, out.wide, in.wide, w.wide, bias.wide, ws.wide)
			h.check(name + " forward")
			h.outs = nil
			dout, din := h.act(s.OutSize(), 0, false), h.act(s.InSize(), 0, true)
			dw, db := h.param(s.WeightSize(), -1, 1, true), h.param(s.OC, -1, 1, true)
			c.UpConvBack(half, din.half, dw.half, db.half, dout.half, in.half, w.half, ws.half)
			c.UpConvBack(wide, din.wide, dw.wide, db.wide, dout.wide, in.wide, w.wide, ws.wide)
			h.check(name + " backward")
		}
	}
}

// winoConvs are convs again the Winograd way (those it takes) and auto.
func winoConvs(convs []backend.ConvShape) []backend.ConvShape {
	var out []backend.ConvShape
	for _, algo := range []backend.ConvAlgo{backend.ConvWinograd, backend.ConvAuto} {
		for _, s := range convs {
			if s.K == 3 && s.Pad == 1 && s.H%2 == 0 {
				s.Algo = algo
				out = append(out, s)
			}
		}
	}
	return out
}

// TestValuesAt checks a single value's widening against the scalar
// functions on every 16-bit pattern.
func TestValuesAt(t *testing.T) {
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		bits := make([]uint16, 1<<16)
		for i := range bits {
			bits[i] = uint16(i)
		}
		v := values{h: bits, dt: dt}
		widen := backend.F16ToF32
		if dt == backend.BFloat16 {
			widen = backend.BF16ToF32
		}
		for i, b := range bits {
			got, want := v.at(i), widen(b)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("%s %#04x: %v, want %v", dt, b, got, want)
			}
		}
	}
}

// BenchmarkHalfOps times the families the CPU takes 16-bit tensors for
// directly, at a UNet's top level (batch 4, 16 channels, 128x128): fp32,
// fp16 as it is, and fp16 staged the way the layers did before (widen the
// inputs, the fp32 operation, narrow the outputs).
func BenchmarkHalfOps(b *testing.B) {
	c := New()
	s := backend.Shape4{N: 4, C: 16, H: 128, W: 128}
	n := s.Len()
	pool := memory.NewPool(HostAllocator{}, memory.Options{})
	h := &halfCase{c: c, pool: pool, rng: rand.New(rand.NewPCG(1, 2)), dt: backend.Float16}
	x, y, z := h.act(n, 1, false), h.act(n, 0, false), h.act(n, 0, false)
	pooled := h.act(n/4, 0, false)
	argmax := h.alloc(backend.Uint8, n/4)
	a := backend.NormArgs{Shape4: s, Eps: 1e-5, Momentum: 0.1}
	a.Gamma, a.Beta = h.param(s.C, 0.5, 1.5, false).half, h.param(s.C, -1, 1, false).half
	a.RunningMean, a.RunningVar = h.param(s.C, -1, 1, false).half, h.param(s.C, 0.5, 2, false).half
	stats := h.param(2*s.C, 0, 0, false).half
	dg, db := h.param(s.C, 0, 0, false).half, h.param(s.C, 0, 0, false).half
	small := backend.Shape4{N: 4, C: 16, H: 64, W: 64}
	ops := []struct {
		name string
		ins  []twin // widened before a staged run
		outs []twin // narrowed after
		run  func(side func(twin) backend.View)
	}{
		{"BatchNorm", []twin{x}, []twin{y}, func(side func(twin) backend.View) {
			c.BatchNorm(a, side(y), side(x), stats, false, true)
		}},
		{"BatchNormBack", []twin{x, y}, []twin{z}, func(side func(twin) backend.View) {
			c.BatchNormBack(a, side(z), dg, db, side(y), side(x), stats)
		}},
		{"MaxPool2", []twin{x}, []twin{pooled}, func(side func(twin) backend.View) {
			c.MaxPool2(s, side(pooled), argmax, side(x))
		}},
		{"MaxPool2Back", []twin{pooled}, []twin{z}, func(side func(twin) backend.View) {
			c.MaxPool2Back(s, side(z), side(pooled), argmax)
		}},
		{"Upsample2", []twin{pooled}, []twin{y}, func(side func(twin) backend.View) {
			c.Upsample2(small, side(y), side(pooled))
		}},
		{"Upsample2Back", []twin{y}, []twin{pooled}, func(side func(twin) backend.View) {
			c.Upsample2Back(small, side(pooled), side(y))
		}},
		{"Add", []twin{x, y}, []twin{z}, func(side func(twin) backend.View) {
			c.Add(side(z), side(x), side(y))
		}},
	}
	for _, op := range ops {
		b.Run(op.name+"/fp32", func(b *testing.B) {
			for b.Loop() {
				op.run(wideSide)
			}
		})
		b.Run(op.name+"/fp16", func(b *testing.B) {
			for b.Loop() {
				op.run(halfSide)
			}
		})
		b.Run(op.name+"/fp16-staged", func(b *testing.B) {
			for b.Loop() {
				for _, tw := range op.ins {
					c.Convert(tw.wide, tw.half)
				}
				op.run(wideSide)
				for _, tw := range op.outs {
					c.Convert(tw.half, tw.wide)
				}
			}
		})
	}
}

// TestConcatSplitRanges: Concat and Split, which the team runs over byte
// ranges cutting samples and parts anywhere, match the sample-by-sample
// copy, for sizes from a few bytes to several ranges, in every type.
func TestConcatSplitRanges(t *testing.T) {
	c := New()
	pool := memory.NewPool(HostAllocator{}, memory.Options{})
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []backend.DType{backend.Float32, backend.Float16, backend.Uint8} {
		for _, sz := range [][3]int{{1, 1, 1}, {3, 5, 7}, {2, 40000, 3}, {4, 12345, 54321}, {1, 70000, 90000}} {
			n, sn, un := sz[0], sz[1], sz[2]
			h := &halfCase{t: t, c: c, pool: pool, rng: rng, dt: dt}
			skip, up, out := h.alloc(dt, n*sn), h.alloc(dt, n*un), h.alloc(dt, n*(sn+un))
			sb, ub := make([]byte, skip.Bytes()), make([]byte, up.Bytes())
			for i := range sb {
				sb[i] = byte(rng.Uint32())
			}
			for i := range ub {
				ub[i] = byte(rng.Uint32())
			}
			c.Upload(skip, sb)
			c.Upload(up, ub)
			c.Concat(n, out, skip, up)
			size := dt.Size()
			want := make([]byte, 0, out.Bytes())
			for k := range n {
				want = append(want, sb[k*sn*size:(k+1)*sn*size]...)
				want = append(want, ub[k*un*size:(k+1)*un*size]...)
			}
			if got := backend.DownloadBytes(c, out); string(got) != string(want) {
				t.Fatalf("%s %v: concat differs", dt, sz)
			}
			ds, du := h.alloc(dt, n*sn), h.alloc(dt, n*un)
			c.Split(n, ds, du, out)
			if string(backend.DownloadBytes(c, ds)) != string(sb) || string(backend.DownloadBytes(c, du)) != string(ub) {
				t.Fatalf("%s %v: split is not concat's inverse", dt, sz)
			}
		}
	}
}

// BenchmarkHalfConvs times a few of the seed UNet's convolutions (batch 4)
// forward and backward in fp32, in fp16 as the CPU takes it, and in fp16
// staged as the layers did before (inputs widened, the fp32 call, outputs
// narrowed).
func BenchmarkHalfConvs(b *testing.B) {
	c := New()
	pool := memory.NewPool(HostAllocator{}, memory.Options{})
	h := &halfCase{c: c, pool: pool, rng: rand.New(rand.NewPCG(13, 14)), dt: backend.Float16}
	for _, sh := range []struct{ c, oc, hw int }{{16, 16, 128}, {48, 16, 128}, {64, 64, 32}, {256, 256, 8}} {
		s := backend.ConvShape{N: 4, C: sh.c, H: sh.hw, W: sh.hw, OC: sh.oc, K: 3, Pad: 1}
		half := s
		half.DT = backend.Float16
		in, w, out := h.act(s.InSize(), 0, false), h.act(s.WeightSize(), 0, false), h.act(s.OutSize(), 0, false)
		dout, din := h.act(s.OutSize(), 0, false), h.act(s.InSize(), 0, false)
		dw := h.alloc(backend.Float32, s.WeightSize())
		ws32, ws16 := h.alloc(backend.Float32, c.ConvWorkspace(s)), h.alloc(backend.Float32, c.ConvWorkspace(half))
		name := fmt.Sprintf("%d-%d@%d", sh.c, sh.oc, sh.hw)
		b.Run("fwd/fp32/"+name, func(b *testing.B) {
			for b.Loop() {
				c.Conv(s, out.wide, in.wide, w.wide, backend.View{}, ws32)
			}
		})
		b.Run("fwd/fp16/"+name, func(b *testing.B) {
			for b.Loop() {
				c.Conv(half, out.half, in.half, w.half, backend.View{}, ws16)
			}
		})
		b.Run("fwd/fp16-staged/"+name, func(b *testing.B) {
			for b.Loop() {
				c.Convert(in.wide, in.half)
				c.Convert(w.wide, w.half)
				c.Conv(s, out.wide, in.wide, w.wide, backend.View{}, ws32)
				c.Convert(out.half, out.wide)
			}
		})
		b.Run("bwd/fp32/"+name, func(b *testing.B) {
			for b.Loop() {
				c.ConvBack(s, din.wide, dw, backend.View{}, dout.wide, in.wide, w.wide, ws32)
			}
		})
		b.Run("bwd/fp16/"+name, func(b *testing.B) {
			for b.Loop() {
				c.ConvBack(half, din.half, dw, backend.View{}, dout.half, in.half, w.half, ws16)
			}
		})
		b.Run("bwd/fp16-staged/"+name, func(b *testing.B) {
			for b.Loop() {
				c.Convert(in.wide, in.half)
				c.Convert(dout.wide, dout.half)
				c.Convert(w.wide, w.half)
				c.ConvBack(s, din.wide, dw, backend.View{}, dout.wide, in.wide, w.wide, ws32)
				c.Convert(din.half, din.wide)
			}
		})
	}
}

// TestLossChunksSplitAnyway: CrossEntropy and LossSums, which sum chunks of
// a sample in parallel, give a batch the bits of its samples summed one by
// one in order (a batch split into micro-batches of one), at 1 and 2 cores.
func TestLossChunksSplitAnyway(t *testing.T) {
	c := New()
	pool := memory.NewPool(HostAllocator{}, memory.Options{})
	rng := rand.New(rand.NewPCG(15, 16))
	h := &halfCase{t: t, c: c, pool: pool, rng: rng, dt: backend.Float32}
	s := backend.Shape4{N: 3, C: 3, H: 97, W: 91} // 8827 pixels: three chunks, the last short
	logits := h.act(s.Len(), 0, false).wide
	tg := make([]byte, s.N*s.H*s.W)
	for i := range tg {
		tg[i] = byte(rng.IntN(s.C))
		if rng.IntN(10) == 0 {
			tg[i] = backend.IgnoreIndex
		}
	}
	target := h.alloc(backend.Uint8, len(tg))
	c.Upload(target, tg)
	HW := s.H * s.W
	one := backend.Shape4{N: 1, C: s.C, H: s.H, W: s.W}
	for _, procs := range []int{1, 2} {
		prev := runtime.GOMAXPROCS(procs)
		sum, count, err := c.CrossEntropy(s, logits, target)
		if err != nil {
			t.Fatal(err)
		}
		var want float64
		wantCount := 0
		sums := make([]float64, 4*s.C)
		if err := c.LossSums(s, logits, target, 2, sums); err != nil {
			t.Fatal(err)
		}
		wantSums := make([]float64, 4*s.C)
		for n := range s.N {
			sn, cn, err := c.CrossEntropy(one, logits.Slice(n*s.C*HW, (n+1)*s.C*HW), target.Slice(n*HW, (n+1)*HW))
			if err != nil {
				t.Fatal(err)
			}
			want += sn
			wantCount += cn
			if err := c.LossSums(one, logits.Slice(n*s.C*HW, (n+1)*s.C*HW), target.Slice(n*HW, (n+1)*HW), 2, wantSums); err != nil {
				t.Fatal(err)
			}
		}
		runtime.GOMAXPROCS(prev)
		if math.Float64bits(sum) != math.Float64bits(want) || count != wantCount {
			t.Errorf("%d cores: cross-entropy %v over %d, sample by sample %v over %d", procs, sum, count, want, wantCount)
		}
		for i := range sums {
			if math.Float64bits(sums[i]) != math.Float64bits(wantSums[i]) {
				t.Errorf("%d cores: loss sum %d is %v, sample by sample %v", procs, i, sums[i], wantSums[i])
			}
		}
	}
}
