package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/onnx/internal/onnxpb"
)

// maxFloat16 is the largest finite fp16 value.
const maxFloat16 = 65504

// param is the initializer of the model tensor called name, in its own
// shape.
func (g *graph) param(name string) string {
	p, ok := g.params[name]
	if !ok {
		return g.missing(name)
	}
	dims := make([]int64, len(p.Shape))
	for i, d := range p.Shape {
		dims[i] = int64(d)
	}
	return g.paramAs(name, dims...)
}

// paramAs is the initializer of the model tensor called name, reshaped to
// dims (as many values).
func (g *graph) paramAs(name string, dims ...int64) string {
	p, ok := g.params[name]
	if !ok {
		return g.missing(name)
	}
	delete(g.params, name)
	if n := numel(dims); n != int64(p.Len()) {
		panic(fmt.Sprintf("onnx: %s has %d values, not %v", name, p.Len(), dims))
	}
	return g.floatConstElem(name, dims, p.Read())
}

// channels is the length of the model's one-dimensional tensor called name.
func (g *graph) channels(name string) int {
	if p, ok := g.params[name]; ok {
		return p.Len()
	}
	g.missing(name)
	return 1
}

func (g *graph) missing(name string) string {
	if g.err == nil {
		g.err = fmt.Errorf("the network has no tensor %s", name)
	}
	return name
}

// unusedParams lists the model tensors no node read, sorted.
func (g *graph) unusedParams() []string {
	var out []string
	for name := range g.params {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// floatConstElem adds vals as an initializer in the graph's element type;
// a value beyond fp16's range is an error.
func (g *graph) floatConstElem(name string, dims []int64, vals []float32) string {
	if g.elem == onnxpb.TensorProto_FLOAT {
		return g.floatConst(name, dims, vals)
	}
	raw := make([]byte, 2*len(vals))
	for i, v := range vals {
		if math.Abs(float64(v)) > maxFloat16 && !math.IsInf(float64(v), 0) && g.err == nil {
			g.err = fmt.Errorf("--dtype fp16: %s holds %g, beyond fp16's largest value %d; export fp32", name, v, maxFloat16)
		}
		binary.LittleEndian.PutUint16(raw[2*i:], backend.F32ToF16(v))
	}
	return g.rawConst(name, g.elem, dims, raw)
}

// floatConst adds vals as a float32 initializer.
func (g *graph) floatConst(name string, dims []int64, vals []float32) string {
	return g.rawConst(name, onnxpb.TensorProto_FLOAT, dims, float32Bytes(vals))
}

// rawConst adds an initializer of type dt holding raw, little endian as
// ONNX's raw_data is.
func (g *graph) rawConst(name string, dt onnxpb.TensorProto_DataType, dims []int64, raw []byte) string {
	g.proto.Initializer = append(g.proto.Initializer, &onnxpb.TensorProto{
		Name: proto.String(name), DataType: proto.Int32(int32(dt)), Dims: dims, RawData: raw,
	})
	return name
}

func numel(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

func float32Bytes(vals []float32) []byte {
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return raw
}

func int64Bytes(vals []int64) []byte {
	raw := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	return raw
}

func attrInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func attrInts(name string, vs ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: vs}
}

func attrFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

func attrString(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}
