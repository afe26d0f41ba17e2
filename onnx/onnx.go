package onnx

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/onnx/internal/onnxpb"
)

const (
	// Opset is the ONNX operator set the graph uses: the newest that ONNX
	// 1.12's checker (Debian's python3-onnx) knows; every operator in it is
	// also in ONNX Runtime.
	Opset = 17
	// irVersion is ONNX 1.12's IR version, the one that goes with opset 17.
	irVersion = 8
	// normEps is the epsilon of model.NewBatchNorm2d and model.NewGroupNorm
	// (PyTorch's default); a test holds the model's to it.
	normEps = 1e-5
	// maxBytes is protobuf's limit on one message: larger models would need
	// ONNX's external data files, which this package does not write.
	maxBytes = 2<<30 - 1

	InputName       = "image"
	LogitsName      = "logits"
	ProbabilityName = "probabilities"
)

// Options says what to export besides the network.
type Options struct {
	// DType is the type of the weights and the activations: backend.Float32
	// (the default) or backend.Float16.
	DType backend.DType
	// Normalize bakes memunet's input normalisation in: the input is then
	// raw intensities in [0, 1] and the graph computes (v-Mean[c])/Std[c]
	// in float32. Without it the input is normalised already, as memunet's
	// data package yields it.
	Normalize bool
	// Mean and Std are the normalisation (data.mean, data.std): one value
	// for every channel or one per channel; empty means data.Mean and
	// data.Std.
	Mean, Std []float64
	// Softmax makes the output class probabilities (softmax over the
	// classes, in float32) instead of logits.
	Softmax bool
	// Meta becomes the model's metadata_props, in key order, with
	// memunet_input and memunet_output added: what the input and the output
	// hold, the normalisation's numbers included.
	Meta map[string]string
	// ProducerVersion is memunet's version.
	ProducerVersion string
}

// OutputName is the graph's output: LogitsName, or ProbabilityName with
// Softmax.
func (o Options) OutputName() string {
	if o.Softmax {
		return ProbabilityName
	}
	return LogitsName
}

// Marshal returns net as an ONNX model (see the package doc). An error
// names what cannot be exported: a dtype other than fp32 and fp16, a weight
// beyond fp16's range, a normalisation that does not fit the channels, a
// model larger than protobuf's 2 GiB.
func Marshal(net *model.UNet, opt Options) ([]byte, error) {
	m, err := build(net, opt)
	if err != nil {
		return nil, err
	}
	if n := proto.Size(m); n > maxBytes {
		return nil, fmt.Errorf("the model is %d bytes, beyond protobuf's 2 GiB that one ONNX file holds; lower model.base or model.depth", n)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// build makes the ModelProto.
func build(net *model.UNet, opt Options) (*onnxpb.ModelProto, error) {
	if opt.DType == 0 {
		opt.DType = backend.Float32
	}
	var elem onnxpb.TensorProto_DataType
	switch opt.DType {
	case backend.Float32:
		elem = onnxpb.TensorProto_FLOAT
	case backend.Float16:
		elem = onnxpb.TensorProto_FLOAT16
	default:
		return nil, fmt.Errorf("dtype %s: an ONNX export takes fp32 or fp16 (ONNX Runtime runs bf16 convolutions nowhere)", opt.DType)
	}
	cfg := net.Config
	for _, bn := range net.BatchNorms() {
		if bn.Eps != normEps {
			return nil, fmt.Errorf("batch norm %s: epsilon %g, the export knows %g", bn.Weight.Name, bn.Eps, normEps)
		}
	}
	g := &graph{proto: &onnxpb.GraphProto{Name: proto.String("memunet_unet")}, elem: elem, params: map[string]*model.Param{}}
	for _, p := range net.Params() {
		g.params[p.Name] = p
	}

	mean, std, err := PerChannel(opt.Mean, opt.Std, cfg.InChannels)
	if err != nil {
		return nil, err
	}
	meta := maps.Clone(opt.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta["memunet_input"] = fmt.Sprintf("float32 (N,%d,H,W), H and W multiples of %d: (v-mean)/std per channel of raw intensities v in [0,1], mean %v, std %v", cfg.InChannels, 1<<cfg.Depth, mean, std)
	if opt.Normalize {
		meta["memunet_input"] = fmt.Sprintf("float32 (N,%d,H,W), H and W multiples of %d: raw intensities in [0,1]; the graph normalises them, (v-mean)/std per channel, mean %v, std %v", cfg.InChannels, 1<<cfg.Depth, mean, std)
	}
	meta["memunet_output"] = fmt.Sprintf("float32 (N,%d,H,W): %s; the class of a pixel is the argmax over axis 1", cfg.Classes, opt.OutputName())

	x := InputName
	if opt.Normalize {
		cshape := []int64{1, int64(cfg.InChannels), 1, 1}
		x = g.node("Sub", "normalize.sub", []string{x, g.floatConst("normalize.mean", cshape, mean)})
		x = g.node("Div", "normalize.div", []string{x, g.floatConst("normalize.std", cshape, std)})
	}
	if elem != onnxpb.TensorProto_FLOAT {
		x = g.node("Cast", "input.cast", []string{x}, attrInt("to", int64(elem)))
	}

	// The encoders, keeping each level's output as its decoder's skip.
	skips := make([]string, cfg.Depth)
	for lv := 0; lv <= cfg.Depth; lv++ {
		name := "inc.double_conv"
		if lv > 0 {
			x = g.node("MaxPool", fmt.Sprintf("down%d.maxpool_conv.0", lv), []string{x},
				attrInts("kernel_shape", 2, 2), attrInts("strides", 2, 2))
			name = fmt.Sprintf("down%d.maxpool_conv.1.double_conv", lv)
		}
		x = g.doubleConv(cfg, name, x)
		if lv < cfg.Depth {
			skips[lv] = x
		}
	}
	// The decoders, from the bottleneck up: up1 is at level Depth-1.
	for lv := cfg.Depth - 1; lv >= 0; lv-- {
		i := cfg.Depth - lv
		up := fmt.Sprintf("up%d.up", i)
		if cfg.Up == model.UpTranspose {
			x = g.node("ConvTranspose", up, []string{x, g.param(up + ".weight"), g.param(up + ".bias")},
				attrInts("kernel_shape", 2, 2), attrInts("strides", 2, 2))
		} else {
			scales := g.rawConst(up+".scales", onnxpb.TensorProto_FLOAT, []int64{4}, float32Bytes([]float32{1, 1, 2, 2}))
			x = g.node("Resize", up, []string{x, "", scales},
				attrString("mode", "linear"), attrString("coordinate_transformation_mode", "half_pixel"))
		}
		x = g.node("Concat", fmt.Sprintf("up%d.cat", i), []string{skips[lv], x}, attrInt("axis", 1))
		x = g.doubleConv(cfg, fmt.Sprintf("up%d.conv.double_conv", i), x)
	}
	x = g.node("Conv", "outc.conv", []string{x, g.param("outc.conv.weight"), g.param("outc.conv.bias")},
		attrInts("kernel_shape", 1, 1))
	if elem != onnxpb.TensorProto_FLOAT {
		x = g.node("Cast", "output.cast", []string{x}, attrInt("to", int64(onnxpb.TensorProto_FLOAT)))
	}
	if opt.Softmax {
		x = g.node("Softmax", "softmax", []string{x}, attrInt("axis", 1))
	}
	// The graph's output is named by an Identity, so that every node
	// keeps its module's name.
	g.node("Identity", opt.OutputName(), []string{x})
	if g.err != nil {
		return nil, g.err
	}
	if unused := g.unusedParams(); len(unused) > 0 {
		return nil, fmt.Errorf("model tensors the graph does not use: %v", unused)
	}

	g.proto.Input = []*onnxpb.ValueInfoProto{valueInfo(InputName, cfg.InChannels)}
	g.proto.Output = []*onnxpb.ValueInfoProto{valueInfo(opt.OutputName(), cfg.Classes)}
	m := &onnxpb.ModelProto{
		IrVersion:       proto.Int64(irVersion),
		OpsetImport:     []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(Opset)}},
		ProducerName:    proto.String("memunet"),
		ProducerVersion: proto.String(opt.ProducerVersion),
		DocString: proto.String(fmt.Sprintf("memunet UNet (depth %d, base %d, %s norm, %s upsampling): %s (N,%d,H,W) -> %s (N,%d,H,W)",
			cfg.Depth, cfg.Base, cfg.Norm, cfg.Up, InputName, cfg.InChannels, opt.OutputName(), cfg.Classes)),
		Graph: g.proto,
	}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		m.MetadataProps = append(m.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(meta[k])})
	}
	return m, nil
}

// PerChannel resolves data.mean and data.std (one value, one per channel,
// or empty for data.Mean and data.Std) to one value per channel: what
// Options.Normalize bakes in.
func PerChannel(mean, std []float64, channels int) (m, s []float32, err error) {
	if err := data.ValidateNorm(mean, std, channels); err != nil {
		return nil, nil, err
	}
	m, s = make([]float32, channels), make([]float32, channels)
	for c := range channels {
		mc, sc := float64(data.Mean), float64(data.Std)
		if len(mean) > 0 {
			mc = mean[min(c, len(mean)-1)]
		}
		if len(std) > 0 {
			sc = std[min(c, len(std)-1)]
		}
		m[c], s[c] = float32(mc), float32(sc)
	}
	return m, s, nil
}

// valueInfo is a float32 (N, channels, H, W) with N, H and W dynamic.
func valueInfo(name string, channels int) *onnxpb.ValueInfoProto {
	dim := func(param string) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: param}}
	}
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				dim("N"),
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(channels)}},
				dim("H"), dim("W"),
			}},
		}}},
	}
}

// graph is a GraphProto being built: nodes in execution order and the
// weights as initializers in elem.
type graph struct {
	proto  *onnxpb.GraphProto
	elem   onnxpb.TensorProto_DataType
	params map[string]*model.Param // by state_dict name; taken out as used
	err    error                   // the first error; later calls do nothing useful
}

// node appends an op named name whose one output is also called name, and
// returns that output.
func (g *graph) node(op, name string, inputs []string, attrs ...*onnxpb.AttributeProto) string {
	g.proto.Node = append(g.proto.Node, &onnxpb.NodeProto{
		Name: proto.String(name), OpType: proto.String(op), Domain: proto.String(""),
		Input: inputs, Output: []string{name}, Attribute: attrs,
	})
	return name
}

// doubleConv is (conv 3x3 -> norm -> ReLU) x 2, numbered as PyTorch's
// nn.Sequential (model.newDoubleConv); without a norm the convolutions
// have a bias.
func (g *graph) doubleConv(cfg model.Config, name, x string) string {
	idx := 0
	next := func() string { s := fmt.Sprintf("%s.%d", name, idx); idx++; return s }
	for range 2 {
		conv := next()
		in := []string{x, g.param(conv + ".weight")}
		if cfg.Norm == model.NormNone {
			in = append(in, g.param(conv+".bias"))
		}
		x = g.node("Conv", conv, in, attrInts("kernel_shape", 3, 3), attrInts("pads", 1, 1, 1, 1))
		switch cfg.Norm {
		case model.NormBatch:
			n := next()
			x = g.node("BatchNormalization", n, []string{x, g.param(n + ".weight"), g.param(n + ".bias"),
				g.param(n + ".running_mean"), g.param(n + ".running_var")}, attrFloat("epsilon", normEps))
		case model.NormGroup:
			x = g.groupNorm(next(), x, cfg.Groups)
		}
		x = g.node("Relu", next(), []string{x})
	}
	return x
}

// groupNorm is GroupNorm as ONNX Runtime and PyTorch's exporter write it
// before opset 18's GroupNormalization: the groups normalised by an
// InstanceNormalization over (N, groups, C/groups*H*W), then the
// per-channel weight and bias.
func (g *graph) groupNorm(name, x string, groups int) string {
	c := g.channels(name + ".weight")
	// (C) as (C,1,1), to broadcast over (N,C,H,W).
	weight, bias := g.paramAs(name+".weight", int64(c), 1, 1), g.paramAs(name+".bias", int64(c), 1, 1)
	groups = min(groups, c)
	ones, zeros := make([]float32, groups), make([]float32, groups)
	for i := range ones {
		ones[i] = 1
	}
	grouped := g.node("Reshape", name+".group", []string{x,
		g.rawConst(name+".group_shape", onnxpb.TensorProto_INT64, []int64{3}, int64Bytes([]int64{0, int64(groups), -1}))})
	normed := g.node("InstanceNormalization", name+".normalize", []string{grouped,
		g.floatConstElem(name+".ones", []int64{int64(groups)}, ones), g.floatConstElem(name+".zeros", []int64{int64(groups)}, zeros)},
		attrFloat("epsilon", normEps))
	shape := g.node("Shape", name+".shape", []string{x})
	back := g.node("Reshape", name+".ungroup", []string{normed, shape})
	scaled := g.node("Mul", name+".scale", []string{back, weight})
	return g.node("Add", name, []string{scaled, bias})
}
