package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/onnx/internal/onnxpb"
)

// A reference interpreter of the ONNX operators the export writes, written
// from the ONNX operator specification in float64 (fp16 values rounded
// where a Cast or an initializer makes them fp16), so that the exported
// graph's meaning is checked without ONNX Runtime: every node's operator
// and attributes must be ones it knows, with the values the specification
// gives them.

// value is a tensor: its shape and its values (integers held exactly).
type value struct {
	shape []int
	v     []float64
	half  bool // fp16: values are rounded to fp16 after each op
}

func (x value) numel() int { return numelInt(x.shape) }

func numelInt(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// run evaluates m's graph on inputs and returns its outputs by name.
func run(t *testing.T, m *onnxpb.ModelProto, inputs map[string]value) map[string]value {
	t.Helper()
	if m.GetIrVersion() != irVersion || len(m.OpsetImport) != 1 || m.OpsetImport[0].GetVersion() != Opset || m.OpsetImport[0].GetDomain() != "" {
		t.Fatalf("ir_version %d, opsets %v", m.GetIrVersion(), m.OpsetImport)
	}
	env := map[string]value{"": {}}
	for k, x := range inputs {
		env[k] = x
	}
	for _, init := range m.Graph.Initializer {
		env[init.GetName()] = decodeInitializer(t, init)
	}
	for _, n := range m.Graph.Node {
		if n.GetDomain() != "" || len(n.Output) != 1 {
			t.Fatalf("node %s: domain %q, outputs %v", n.GetName(), n.GetDomain(), n.Output)
		}
		in := make([]value, len(n.Input))
		for i, name := range n.Input {
			x, ok := env[name]
			if !ok {
				t.Fatalf("node %s reads %q before anything writes it", n.GetName(), name)
			}
			in[i] = x
		}
		if _, dup := env[n.Output[0]]; dup {
			t.Fatalf("node %s writes %q a second time", n.GetName(), n.Output[0])
		}
		out := evalNode(t, n, in)
		if out.half {
			roundHalf(out.v)
		}
		env[n.Output[0]] = out
	}
	outs := map[string]value{}
	for _, o := range m.Graph.Output {
		outs[o.GetName()] = env[o.GetName()]
	}
	return outs
}

func decodeInitializer(t *testing.T, init *onnxpb.TensorProto) value {
	shape := make([]int, len(init.Dims))
	for i, d := range init.Dims {
		shape[i] = int(d)
	}
	x := value{shape: shape, v: make([]float64, numelInt(shape))}
	raw := init.RawData
	size := map[onnxpb.TensorProto_DataType]int{onnxpb.TensorProto_FLOAT: 4, onnxpb.TensorProto_FLOAT16: 2, onnxpb.TensorProto_INT64: 8}
	dt := onnxpb.TensorProto_DataType(init.GetDataType())
	if len(raw) != size[dt]*len(x.v) || size[dt] == 0 {
		t.Fatalf("initializer %s: %d raw bytes for %v of type %v", init.GetName(), len(raw), shape, dt)
	}
	for i := range x.v {
		switch dt {
		case onnxpb.TensorProto_FLOAT:
			x.v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		case onnxpb.TensorProto_FLOAT16:
			x.v[i] = float64(backend.F16ToF32(binary.LittleEndian.Uint16(raw[2*i:])))
			x.half = true
		case onnxpb.TensorProto_INT64:
			x.v[i] = float64(int64(binary.LittleEndian.Uint64(raw[8*i:])))
		}
	}
	return x
}

func roundHalf(v []float64) {
	for i, f := range v {
		v[i] = float64(backend.F16ToF32(backend.F32ToF16(float32(f))))
	}
}

// attrs holds a node's attributes and fails the test on one it was not
// asked for.
type attrs struct {
	t    *testing.T
	node string
	m    map[string]*onnxpb.AttributeProto
}

func (a attrs) take(name string, want onnxpb.AttributeProto_AttributeType) *onnxpb.AttributeProto {
	p := a.m[name]
	if p != nil && p.GetType() != want {
		a.t.Fatalf("node %s: attribute %s is %v, want %v", a.node, name, p.GetType(), want)
	}
	delete(a.m, name)
	return p
}

func (a attrs) ints(name string, def ...int64) []int64 {
	if p := a.take(name, onnxpb.AttributeProto_INTS); p != nil {
		return p.Ints
	}
	return def
}

func (a attrs) int(name string, def int64) int64 {
	if p := a.take(name, onnxpb.AttributeProto_INT); p != nil {
		return p.GetI()
	}
	return def
}

func (a attrs) float(name string, def float64) float64 {
	if p := a.take(name, onnxpb.AttributeProto_FLOAT); p != nil {
		return float64(p.GetF())
	}
	return def
}

func (a attrs) str(name, def string) string {
	if p := a.take(name, onnxpb.AttributeProto_STRING); p != nil {
		return string(p.S)
	}
	return def
}

func (a attrs) done() {
	for k := range a.m {
		a.t.Fatalf("node %s: attribute %s the interpreter does not know", a.node, k)
	}
}

func evalNode(t *testing.T, n *onnxpb.NodeProto, in []value) value {
	t.Helper()
	a := attrs{t: t, node: n.GetName(), m: map[string]*onnxpb.AttributeProto{}}
	for _, p := range n.Attribute {
		a.m[p.GetName()] = p
	}
	defer a.done()
	fail := func(format string, args ...any) {
		t.Fatalf("node %s (%s): %s", n.GetName(), n.GetOpType(), fmt.Sprintf(format, args...))
	}
	want := func(lo, hi int) {
		if len(in) < lo || len(in) > hi {
			fail("%d inputs, want %d..%d", len(in), lo, hi)
		}
	}
	switch op := n.GetOpType(); op {
	case "Conv":
		want(2, 3)
		ks := a.ints("kernel_shape")
		pads := a.ints("pads", 0, 0, 0, 0)
		if s := a.ints("strides", 1, 1); s[0] != 1 || s[1] != 1 {
			fail("strides %v", s)
		}
		if g := a.int("group", 1); g != 1 {
			fail("group %d", g)
		}
		if pads[0] != pads[2] || pads[1] != pads[3] || pads[0] != pads[1] {
			fail("pads %v", pads)
		}
		w := in[1]
		if len(ks) != 2 || int(ks[0]) != w.shape[2] || int(ks[1]) != w.shape[3] {
			fail("kernel_shape %v, weight %v", ks, w.shape)
		}
		var b *value
		if len(in) == 3 {
			b = &in[2]
			if !slices.Equal(b.shape, w.shape[:1]) {
				fail("bias %v for weight %v", b.shape, w.shape)
			}
		}
		if len(in[0].shape) != 4 || in[0].shape[1] != w.shape[1] {
			fail("input %v, weight %v", in[0].shape, w.shape)
		}
		return conv(in[0], w, b, int(pads[0]))
	case "ConvTranspose":
		want(3, 3)
		if ks, s := a.ints("kernel_shape"), a.ints("strides", 1, 1); !slices.Equal(ks, []int64{2, 2}) || !slices.Equal(s, []int64{2, 2}) {
			fail("kernel_shape %v strides %v", ks, s)
		}
		if w, b := in[1].shape, in[2].shape; len(in[0].shape) != 4 || in[0].shape[1] != w[0] || !slices.Equal(b, w[1:2]) {
			fail("input %v, weight %v, bias %v", in[0].shape, w, b)
		}
		return convTranspose2(in[0], in[1], in[2])
	case "BatchNormalization":
		want(5, 5)
		checkPerChannel(t, n.GetName(), in)
		if a.int("training_mode", 0) != 0 {
			fail("training_mode")
		}
		eps := a.float("epsilon", 1e-5)
		x, out := in[0], like(in[0])
		forChannels(x, func(c int, plane []float64, o []float64) {
			inv := 1 / math.Sqrt(in[4].v[c]+eps)
			for i, v := range plane {
				o[i] = (v-in[3].v[c])*inv*in[1].v[c] + in[2].v[c]
			}
		}, out.v)
		return out
	case "InstanceNormalization":
		want(3, 3)
		checkPerChannel(t, n.GetName(), in)
		eps := a.float("epsilon", 1e-5)
		x, out := in[0], like(in[0])
		forChannels(x, func(c int, plane []float64, o []float64) {
			var mean, sq float64
			for _, v := range plane {
				mean += v
			}
			mean /= float64(len(plane))
			for _, v := range plane {
				sq += (v - mean) * (v - mean)
			}
			inv := 1 / math.Sqrt(sq/float64(len(plane))+eps)
			for i, v := range plane {
				o[i] = (v-mean)*inv*in[1].v[c] + in[2].v[c]
			}
		}, out.v)
		return out
	case "Reshape":
		want(2, 2)
		if a.int("allowzero", 0) != 0 {
			fail("allowzero")
		}
		return reshape(t, in[0], in[1])
	case "Shape":
		want(1, 1)
		out := value{shape: []int{len(in[0].shape)}}
		for _, d := range in[0].shape {
			out.v = append(out.v, float64(d))
		}
		return out
	case "Add", "Sub", "Mul", "Div":
		want(2, 2)
		f := map[string]func(x, y float64) float64{
			"Add": func(x, y float64) float64 { return x + y }, "Sub": func(x, y float64) float64 { return x - y },
			"Mul": func(x, y float64) float64 { return x * y }, "Div": func(x, y float64) float64 { return x / y },
		}[op]
		if in[0].half != in[1].half {
			fail("mixed fp16 and fp32 operands")
		}
		return broadcast(t, in[0], in[1], f)
	case "Relu":
		want(1, 1)
		out := like(in[0])
		for i, v := range in[0].v {
			out.v[i] = max(v, 0)
		}
		return out
	case "MaxPool":
		want(1, 1)
		if ks, s := a.ints("kernel_shape"), a.ints("strides", 1, 1); !slices.Equal(ks, []int64{2, 2}) || !slices.Equal(s, []int64{2, 2}) {
			fail("kernel_shape %v strides %v", ks, s)
		}
		return maxPool2(in[0])
	case "Resize":
		want(3, 3)
		if n.Input[1] != "" {
			fail("roi %v", n.Input[1])
		}
		if mode, ct := a.str("mode", "nearest"), a.str("coordinate_transformation_mode", "half_pixel"); mode != "linear" || ct != "half_pixel" {
			fail("mode %s, coordinate_transformation_mode %s", mode, ct)
		}
		if !slices.Equal(in[2].v, []float64{1, 1, 2, 2}) {
			fail("scales %v", in[2].v)
		}
		return upsample2(in[0])
	case "Concat":
		if a.int("axis", -99) != 1 {
			fail("axis")
		}
		return concat1(in)
	case "Softmax":
		want(1, 1)
		if a.int("axis", -1) != 1 {
			fail("axis")
		}
		return softmax1(in[0])
	case "Cast":
		want(1, 1)
		out := like(in[0])
		copy(out.v, in[0].v)
		switch to := onnxpb.TensorProto_DataType(a.int("to", 0)); to {
		case onnxpb.TensorProto_FLOAT16:
			out.half = true
		case onnxpb.TensorProto_FLOAT:
			out.half = false
			for i, v := range out.v {
				out.v[i] = float64(float32(v))
			}
		default:
			fail("to %v", to)
		}
		return out
	case "Identity":
		want(1, 1)
		return in[0]
	default:
		fail("an operator the interpreter does not know")
	}
	return value{}
}

// checkPerChannel: every input after the first is (C) for an (N,C,...)
// first.
func checkPerChannel(t *testing.T, node string, in []value) {
	for _, p := range in[1:] {
		if len(in[0].shape) < 3 || !slices.Equal(p.shape, in[0].shape[1:2]) {
			t.Fatalf("node %s: %v for input %v", node, p.shape, in[0].shape)
		}
	}
}

func like(x value) value {
	return value{shape: slices.Clone(x.shape), v: make([]float64, len(x.v)), half: x.half}
}

// forChannels calls f on each (n, c) plane of an (N,C,...) tensor with the
// matching plane of out.
func forChannels(x value, f func(c int, plane, out []float64), out []float64) {
	c := x.shape[1]
	plane := x.numel() / (x.shape[0] * c)
	for i := range x.shape[0] * c {
		f(i%c, x.v[i*plane:(i+1)*plane], out[i*plane:(i+1)*plane])
	}
}

func conv(x, w value, b *value, pad int) value {
	n, c, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	oc, k := w.shape[0], w.shape[2]
	oh, ow := h+2*pad-k+1, wd+2*pad-k+1
	out := value{shape: []int{n, oc, oh, ow}, v: make([]float64, n*oc*oh*ow), half: x.half}
	for i := range n {
		for o := range oc {
			for y := range oh {
				for xx := range ow {
					var s float64
					if b != nil {
						s = b.v[o]
					}
					for ci := range c {
						for ky := range k {
							for kx := range k {
								iy, ix := y+ky-pad, xx+kx-pad
								if iy < 0 || iy >= h || ix < 0 || ix >= wd {
									continue
								}
								s += x.v[((i*c+ci)*h+iy)*wd+ix] * w.v[((o*c+ci)*k+ky)*k+kx]
							}
						}
					}
					out.v[((i*oc+o)*oh+y)*ow+xx] = s
				}
			}
		}
	}
	return out
}

func convTranspose2(x, w, b value) value {
	n, c, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	oc := w.shape[1]
	out := value{shape: []int{n, oc, 2 * h, 2 * wd}, v: make([]float64, n*oc*4*h*wd), half: x.half}
	for i := range n {
		for o := range oc {
			for y := range 2 * h {
				for xx := range 2 * wd {
					s := b.v[o]
					for ci := range c {
						s += x.v[((i*c+ci)*h+y/2)*wd+xx/2] * w.v[((ci*oc+o)*2+y%2)*2+xx%2]
					}
					out.v[((i*oc+o)*2*h+y)*2*wd+xx] = s
				}
			}
		}
	}
	return out
}

func maxPool2(x value) value {
	n, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	out := value{shape: []int{n, c, h / 2, w / 2}, half: x.half}
	for p := range n * c {
		for y := range h / 2 {
			for xx := range w / 2 {
				m := math.Inf(-1)
				for dy := range 2 {
					for dx := range 2 {
						m = max(m, x.v[(p*h+2*y+dy)*w+2*xx+dx])
					}
				}
				out.v = append(out.v, m)
			}
		}
	}
	return out
}

// upsample2 is Resize by 2 (linear, half_pixel): output pixel o reads the
// input at (o+0.5)/2-0.5, clamped to the edges.
func upsample2(x value) value {
	n, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	src := func(o, size int) (int, int, float64) {
		s := max((float64(o)+0.5)/2-0.5, 0)
		i0 := min(int(s), size-1)
		i1 := min(i0+1, size-1)
		return i0, i1, s - float64(i0)
	}
	out := value{shape: []int{n, c, 2 * h, 2 * w}, half: x.half}
	for p := range n * c {
		for y := range 2 * h {
			y0, y1, fy := src(y, h)
			for xx := range 2 * w {
				x0, x1, fx := src(xx, w)
				at := func(yy, xi int) float64 { return x.v[(p*h+yy)*w+xi] }
				top := at(y0, x0)*(1-fx) + at(y0, x1)*fx
				bot := at(y1, x0)*(1-fx) + at(y1, x1)*fx
				out.v = append(out.v, top*(1-fy)+bot*fy)
			}
		}
	}
	return out
}

func concat1(in []value) value {
	n := in[0].shape[0]
	out := value{shape: slices.Clone(in[0].shape), half: in[0].half}
	out.shape[1] = 0
	for _, x := range in {
		out.shape[1] += x.shape[1]
	}
	for i := range n {
		for _, x := range in {
			per := x.numel() / n
			out.v = append(out.v, x.v[i*per:(i+1)*per]...)
		}
	}
	return out
}

func softmax1(x value) value {
	n, c := x.shape[0], x.shape[1]
	plane := x.numel() / (n * c)
	out := like(x)
	for i := range n {
		for p := range plane {
			at := func(k int) int { return (i*c+k)*plane + p }
			m := math.Inf(-1)
			for k := range c {
				m = max(m, x.v[at(k)])
			}
			var s float64
			for k := range c {
				s += math.Exp(x.v[at(k)] - m)
			}
			for k := range c {
				out.v[at(k)] = math.Exp(x.v[at(k)]-m) / s
			}
		}
	}
	return out
}

func reshape(t *testing.T, x, shape value) value {
	out := value{v: x.v, half: x.half}
	infer := -1
	known := 1
	for i, d := range shape.v {
		switch {
		case d == 0:
			out.shape = append(out.shape, x.shape[i])
		case d == -1:
			infer = i
			out.shape = append(out.shape, 1)
			continue
		default:
			out.shape = append(out.shape, int(d))
		}
		known *= out.shape[i]
	}
	if infer >= 0 {
		out.shape[infer] = x.numel() / known
	}
	if out.numel() != x.numel() {
		t.Fatalf("reshape %v to %v", x.shape, shape.v)
	}
	return out
}

// broadcast applies f elementwise with numpy's multidirectional
// broadcasting.
func broadcast(t *testing.T, x, y value, f func(a, b float64) float64) value {
	rank := max(len(x.shape), len(y.shape))
	pad := func(s []int) []int { return append(slices.Repeat([]int{1}, rank-len(s)), s...) }
	xs, ys := pad(x.shape), pad(y.shape)
	shape := make([]int, rank)
	for i := range rank {
		switch {
		case xs[i] == ys[i] || ys[i] == 1:
			shape[i] = xs[i]
		case xs[i] == 1:
			shape[i] = ys[i]
		default:
			t.Fatalf("broadcasting %v with %v", x.shape, y.shape)
		}
	}
	out := value{shape: shape, v: make([]float64, numelInt(shape)), half: x.half}
	idx := make([]int, rank)
	offset := func(s []int) int {
		o := 0
		for i := range rank {
			o = o*s[i] + idx[i]%s[i]
		}
		return o
	}
	for k := range out.v {
		r := k
		for i := rank - 1; i >= 0; i-- {
			idx[i] = r % shape[i]
			r /= shape[i]
		}
		out.v[k] = f(x.v[offset(xs)], y.v[offset(ys)])
	}
	return out
}
