package onnx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/onnx/internal/onnxpb"
)

// testNet is a UNet with random weights, including the norms' affine
// parameters and BatchNorm's running statistics, so that eval mode's use
// of each shows in the logits.
func testNet(t *testing.T, cfg model.Config, seed uint64) *model.UNet {
	t.Helper()
	net, err := model.New(model.NewDevice(cpu.New(), memory.Options{}), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(net.Free)
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, p := range net.Params() {
		if len(p.Shape) != 1 {
			continue
		}
		v := make([]float32, p.Len())
		for i := range v {
			switch {
			case strings.HasSuffix(p.Name, ".running_var"):
				v[i] = 0.5 + rng.Float32()
			case strings.HasSuffix(p.Name, ".weight"):
				v[i] = 0.75 + 0.5*rng.Float32()
			default: // biases and running means
				v[i] = 0.2 * float32(rng.NormFloat64())
			}
		}
		p.Write(v)
	}
	return net
}

// memunetLogits runs net in eval mode (fp32) on x (n images, planar).
func memunetLogits(t *testing.T, net *model.UNet, x []float32, n, h, w int) []float32 {
	t.Helper()
	dev := net.Device()
	in, err := model.NewTensor(dev, memory.Activations, backend.Float32, n, net.Config.InChannels, h, w)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Release()
	in.Write(x)
	out, err := net.Forward(&model.Env{Device: dev, Precision: backend.Float32}, in)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	return out.Read()
}

func unmarshal(t *testing.T, b []byte) *onnxpb.ModelProto {
	t.Helper()
	m := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGraphMatchesForward: for every norm and upsampling, at two image
// sizes (one not square) and two batch sizes, the exported graph evaluated
// by the reference interpreter gives memunet's eval-mode logits within
// 1e-4 (fp32), the normalisation baked in and the softmax added as asked;
// fp16's difference is logged and held loosely.
func TestGraphMatchesForward(t *testing.T) {
	type variant struct {
		name string
		opt  Options
		tol  float64
	}
	variants := []variant{
		{"fp32", Options{}, 1e-4},
		{"fp32+normalize+softmax", Options{Normalize: true, Mean: []float64{0.4, 0.5, 0.6}, Std: []float64{0.2, 0.25, 0.3}, Softmax: true}, 1e-5},
		{"fp16", Options{DType: backend.Float16}, 0.1},
	}
	for _, cfg := range []model.Config{
		{Arch: model.Arch{Norm: model.NormBatch, Up: model.UpBilinear}},
		{Arch: model.Arch{Norm: model.NormBatch, Up: model.UpTranspose}},
		{Arch: model.Arch{Norm: model.NormGroup, Up: model.UpBilinear, Groups: 2}},
		{Arch: model.Arch{Norm: model.NormGroup, Up: model.UpTranspose, Groups: 4}},
		{Arch: model.Arch{Norm: model.NormNone, Up: model.UpBilinear}},
		{Arch: model.Arch{Norm: model.NormNone, Up: model.UpTranspose}},
		{Arch: model.Arch{Norm: model.NormBatch, Up: model.UpBilinear, Depth: 3, InChannels: 1, Classes: 2}},
		{Arch: model.Arch{Norm: model.NormGroup, Up: model.UpTranspose, Groups: 2, Depth: 1, Classes: 5}},
	} {
		cfg.Base = 4
		if cfg.Depth == 0 {
			cfg.Depth = 2
		}
		if cfg.Classes == 0 {
			cfg.Classes = 3
		}
		if cfg.InChannels == 0 {
			cfg.InChannels = 3
		}
		net := testNet(t, cfg, uint64(cfg.Depth*10+len(cfg.Norm)))
		for _, v := range variants {
			if v.opt.Normalize && cfg.InChannels != 3 {
				v.opt.Mean, v.opt.Std = nil, nil // the defaults
			}
			name := fmt.Sprintf("%s-%s-depth%d/%s", cfg.Norm, cfg.Up, cfg.Depth, v.name)
			t.Run(name, func(t *testing.T) {
				b, err := Marshal(net, v.opt)
				if err != nil {
					t.Fatal(err)
				}
				m := unmarshal(t, b)
				checkStructure(t, m, net, v.opt)
				f := 1 << cfg.Depth
				for _, sz := range []struct{ n, h, w int }{{1, 2 * f, 2 * f}, {2, 2 * f, 3 * f}} {
					checkAgainstMemunet(t, m, net, v.opt, sz.n, sz.h, sz.w, v.tol)
				}
			})
		}
	}
}

// checkAgainstMemunet compares the graph's output with memunet's on n
// random images of h x w.
func checkAgainstMemunet(t *testing.T, m *onnxpb.ModelProto, net *model.UNet, opt Options, n, h, w int, tol float64) {
	t.Helper()
	c := net.Config.InChannels
	rng := rand.New(rand.NewPCG(uint64(n*h*w), 3))
	raw := make([]float32, n*c*h*w)
	for i := range raw {
		raw[i] = rng.Float32()
	}
	normalized := raw
	if opt.Normalize {
		mean, std, err := PerChannel(opt.Mean, opt.Std, c)
		if err != nil {
			t.Fatal(err)
		}
		normalized = make([]float32, len(raw))
		plane := h * w
		for i, v := range raw {
			ch := i / plane % c
			normalized[i] = (v - mean[ch]) / std[ch]
		}
	}
	want := memunetLogits(t, net, normalized, n, h, w)
	in := value{shape: []int{n, c, h, w}}
	for _, v := range raw {
		in.v = append(in.v, float64(v))
	}
	got := run(t, m, map[string]value{InputName: in})[opt.OutputName()]
	k := net.Config.Classes
	if !slices.Equal(got.shape, []int{n, k, h, w}) {
		t.Fatalf("%dx%dx%d: output shape %v", n, h, w, got.shape)
	}
	if opt.Softmax {
		want = softmaxOf(want, n, k, h*w)
	}
	var maxDiff float64
	agree := 0
	plane := h * w
	for i := range n {
		for p := range plane {
			bestWant, bestGot := 0, 0
			for j := range k {
				at := (i*k+j)*plane + p
				maxDiff = max(maxDiff, math.Abs(got.v[at]-float64(want[at])))
				if want[at] > want[(i*k+bestWant)*plane+p] {
					bestWant = j
				}
				if got.v[at] > got.v[(i*k+bestGot)*plane+p] {
					bestGot = j
				}
			}
			if bestWant == bestGot {
				agree++
			}
		}
	}
	t.Logf("%dx%dx%d: max abs difference %.3g, argmax agreement %.4f%%", n, h, w, maxDiff, 100*float64(agree)/float64(n*plane))
	if !(maxDiff <= tol) {
		t.Errorf("%dx%dx%d: max abs difference %g, want at most %g", n, h, w, maxDiff, tol)
	}
}

func softmaxOf(logits []float32, n, k, plane int) []float32 {
	out := make([]float32, len(logits))
	for i := range n {
		for p := range plane {
			m := math.Inf(-1)
			for j := range k {
				m = max(m, float64(logits[(i*k+j)*plane+p]))
			}
			var s float64
			for j := range k {
				s += math.Exp(float64(logits[(i*k+j)*plane+p]) - m)
			}
			for j := range k {
				out[(i*k+j)*plane+p] = float32(math.Exp(float64(logits[(i*k+j)*plane+p])-m) / s)
			}
		}
	}
	return out
}

// checkStructure: the input and output are float32 (N, C, H, W) with N, H
// and W dynamic; every model tensor is an initializer under its state_dict
// name, in the asked dtype; node names are unique; metadata is in key
// order.
func checkStructure(t *testing.T, m *onnxpb.ModelProto, net *model.UNet, opt Options) {
	t.Helper()
	g := m.Graph
	for _, io := range []struct {
		got  []*onnxpb.ValueInfoProto
		name string
		c    int
	}{{g.Input, InputName, net.Config.InChannels}, {g.Output, opt.OutputName(), net.Config.Classes}} {
		if len(io.got) != 1 || io.got[0].GetName() != io.name {
			t.Fatalf("graph inputs/outputs %v, want %s", io.got, io.name)
		}
		tt := io.got[0].Type.GetTensorType()
		var dims []string
		for _, d := range tt.GetShape().GetDim() {
			if d.GetDimParam() != "" {
				dims = append(dims, d.GetDimParam())
			} else {
				dims = append(dims, fmt.Sprint(d.GetDimValue()))
			}
		}
		if tt.GetElemType() != int32(onnxpb.TensorProto_FLOAT) || !slices.Equal(dims, []string{"N", fmt.Sprint(io.c), "H", "W"}) {
			t.Errorf("%s: type %d, dims %v", io.name, tt.GetElemType(), dims)
		}
	}
	inits := map[string]*onnxpb.TensorProto{}
	for _, in := range g.Initializer {
		inits[in.GetName()] = in
	}
	wantType := int32(onnxpb.TensorProto_FLOAT)
	if opt.DType == backend.Float16 {
		wantType = int32(onnxpb.TensorProto_FLOAT16)
	}
	for _, p := range net.Params() {
		in, ok := inits[p.Name]
		if !ok {
			t.Errorf("no initializer %s", p.Name)
			continue
		}
		if in.GetDataType() != wantType || numel(in.Dims) != int64(p.Len()) {
			t.Errorf("initializer %s: type %d dims %v; want type %d, %d values", p.Name, in.GetDataType(), in.Dims, wantType, p.Len())
		}
	}
	names := map[string]bool{}
	for _, n := range g.Node {
		if names[n.GetName()] {
			t.Errorf("node name %s twice", n.GetName())
		}
		names[n.GetName()] = true
	}
	var keys []string
	for _, kv := range m.MetadataProps {
		keys = append(keys, kv.GetKey())
		switch k := kv.GetKey(); k {
		case "memunet_input":
			if raw := strings.Contains(kv.GetValue(), "raw intensities in [0,1];"); raw != opt.Normalize {
				t.Errorf("metadata %s = %q with Normalize %v", k, kv.GetValue(), opt.Normalize)
			}
		case "memunet_output":
			if !strings.Contains(kv.GetValue(), opt.OutputName()) {
				t.Errorf("metadata %s = %q, want it to name %s", k, kv.GetValue(), opt.OutputName())
			}
		default:
			if kv.GetValue() != opt.Meta[k] {
				t.Errorf("metadata %s = %q, want %q", k, kv.GetValue(), opt.Meta[k])
			}
		}
	}
	if len(keys) != len(opt.Meta)+2 || !slices.IsSorted(keys) {
		t.Errorf("metadata keys %v for %v", keys, opt.Meta)
	}
}

// TestMarshalDeterministicWithMeta: the same network and options give the
// same bytes, metadata included and sorted.
func TestMarshalDeterministicWithMeta(t *testing.T) {
	net := testNet(t, model.Config{Arch: model.Arch{Base: 2, Depth: 1}}, 1)
	opt := Options{Meta: map[string]string{"z": "1", "a": "2", "memunet_model": `{"depth":1}`}, ProducerVersion: "test"}
	a, err := Marshal(net, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Marshal(net, opt)
	if string(a) != string(b) {
		t.Fatal("two exports of one network differ")
	}
	m := unmarshal(t, a)
	checkStructure(t, m, net, opt)
	if m.GetProducerName() != "memunet" || m.GetProducerVersion() != "test" {
		t.Errorf("producer %q %q", m.GetProducerName(), m.GetProducerVersion())
	}
}

// TestMarshalRefuses: a dtype ONNX export does not take, a weight beyond
// fp16, a normalisation that does not fit the channels: each an error
// naming it.
func TestMarshalRefuses(t *testing.T) {
	net := testNet(t, model.Config{Arch: model.Arch{Base: 2, Depth: 1}}, 1)
	big := testNet(t, model.Config{Arch: model.Arch{Base: 2, Depth: 1}}, 2)
	w := big.Params()[0]
	v := w.Read()
	v[3] = 1e5
	w.Write(v)
	for _, c := range []struct {
		net  *model.UNet
		opt  Options
		want string
	}{
		{net, Options{DType: backend.BFloat16}, "takes fp32 or fp16"},
		{big, Options{DType: backend.Float16}, w.Name + " holds 100000"},
		{net, Options{Normalize: true, Mean: []float64{0.1, 0.2}}, "data.mean"},
		{net, Options{Normalize: true, Std: []float64{0}}, "data.std"},
	} {
		_, err := Marshal(c.net, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %q", c.opt, err, c.want)
		}
	}
	if _, err := Marshal(big, Options{}); err != nil {
		t.Errorf("fp32 export of a large weight: %v", err)
	}
}

// TestNormEpsilonIsTheModels: the epsilon written for both norms is the
// one model's layers use.
func TestNormEpsilonIsTheModels(t *testing.T) {
	net := testNet(t, model.Config{Arch: model.Arch{Base: 2, Depth: 1, Norm: model.NormBatch}}, 1)
	for _, bn := range net.BatchNorms() {
		if bn.Eps != normEps {
			t.Errorf("%s: eps %g, export writes %g", bn.Weight.Name, bn.Eps, normEps)
		}
	}
	dev := model.NewDevice(cpu.New(), memory.Options{})
	gn, err := model.NewGroupNorm(dev, "g", 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if gn.Eps != normEps {
		t.Errorf("group norm eps %g, export writes %g", gn.Eps, normEps)
	}
}
