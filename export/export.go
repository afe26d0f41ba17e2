// Package export writes a checkpoint's model for other frameworks: its
// weights as one safetensors file with PyTorch's state_dict names, or the
// eval-mode network as an ONNX graph (package onnx), each with Metadata
// saying what a user of the weights needs (architecture, preprocessing,
// mask values, class names). It reads a checkpoint (package checkpoint)
// and writes one file, whole or not at all (outdir.WriteFile); it keeps
// nothing.
package export

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/onnx"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/safetensors"
)

// Options says how Write writes a checkpoint's model.
type Options struct {
	// Format is "safetensors" (the state_dict, for PyTorch) or "onnx"
	// (the eval-mode graph, for ONNX Runtime).
	Format string
	// DType is the float tensors' type: Float32, Float16 or BFloat16
	// (an ONNX graph takes Float32 or Float16).
	DType backend.DType
	// Normalize and Softmax shape an ONNX graph (onnx.Options).
	Normalize, Softmax bool
	// Version is memunet's release, recorded in the metadata.
	Version string
}

// Result is what Write wrote.
type Result struct {
	Tensors int    // safetensors: the tensors in the file
	Bytes   int64  // the file's size
	Opset   int    // onnx: the operator set
	Output  string // onnx: the graph's output name
}

// Write writes ck's model to path (its folder made if need be), whole or not at all (outdir.WriteFile):
// its weights as one safetensors file that PyTorch's safetensors loader
// reads into the equivalent torch module, or the model as an ONNX graph
// (package onnx), with Metadata either way. The model is built from
// the manifest and the weights loaded into it first, which checks that the
// tensors are the architecture's, names and shapes.
func Write(ck *checkpoint.Checkpoint, path string, opt Options) (Result, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return Result{}, fmt.Errorf("export: the folder of %s: %w", path, err)
	}
	net, err := model.New(model.NewDevice(cpu.New(), memory.Options{}), ck.Config.ModelConfig(), ck.Config.Model.Seed)
	if err != nil {
		return Result{}, err
	}
	defer net.Free()
	if err := ck.LoadWeights(net); err != nil {
		return Result{}, err
	}
	meta := Metadata(ck, opt.Version, opt.Format == "onnx" && opt.Normalize)
	if opt.Format == "onnx" {
		o := onnx.Options{DType: opt.DType, Normalize: opt.Normalize, Softmax: opt.Softmax,
			Mean: ck.Config.Data.Mean, Std: ck.Config.Data.Std, Meta: meta, ProducerVersion: opt.Version}
		b, err := onnx.Marshal(net, o)
		if err != nil {
			return Result{}, fmt.Errorf("export: %s: %w", ck.Dir, err)
		}
		if err := outdir.WriteBytes(path, b); err != nil {
			return Result{}, fmt.Errorf("export: writing %s: %w", path, err)
		}
		return Result{Bytes: int64(len(b)), Opset: onnx.Opset, Output: o.OutputName()}, nil
	}
	meta["format"] = "pt"
	tensors := checkpoint.StateDict(net)
	for i, t := range tensors {
		if t.DType == safetensors.F32 && opt.DType != backend.Float32 {
			tensors[i] = halve(t, opt.DType)
		}
	}
	if err := outdir.WriteFile(path, func(w io.Writer) error { return safetensors.Write(w, tensors, meta) }); err != nil {
		return Result{}, fmt.Errorf("export: writing %s: %w", path, err)
	}
	st, _ := os.Stat(path)
	return Result{Tensors: len(tensors), Bytes: st.Size()}, nil
}

// halve converts an F32 tensor to dt, Float16 or BFloat16 (round to nearest
// even).
func halve(t safetensors.Tensor, dt backend.DType) safetensors.Tensor {
	n := len(t.Data) / 4
	src := make([]float32, n)
	for i := range src {
		src[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	out := safetensors.Tensor{Name: t.Name, Shape: t.Shape, Data: make([]byte, 2*n), DType: safetensors.F16}
	round := backend.F32ToF16
	if dt == backend.BFloat16 {
		out.DType, round = safetensors.BF16, backend.F32ToBF16
	}
	for i, v := range src {
		binary.LittleEndian.PutUint16(out.Data[2*i:], round(v))
	}
	return out
}

// Metadata is the metadata an exported model carries, each value
// JSON: memunet_version, memunet_model (the architecture),
// memunet_checkpoint_step, and what a user of the weights needs besides:
// memunet_preprocessing (each channel's mean and std applied as
// (v - mean) / std to intensities v in [0, 1], by the user or, with
// inModel, by the exported model itself; the resize or scale, the size
// training's images had), memunet_mask_values (class k's value in the
// training masks) and memunet_class_names.
func Metadata(ck *checkpoint.Checkpoint, version string, inModel bool) map[string]string {
	d, m := ck.Config.Data, ck.Config.Model
	c := m.InChannels
	arch, _ := json.Marshal(map[string]any{
		"in_channels": m.InChannels, "classes": m.Classes, "base": m.Base, "depth": m.Depth,
		"up": m.Up, "norm": m.Norm, "groups": m.Groups,
	})
	perChannel := func(vals []float64, def float64) []float64 {
		out := make([]float64, c)
		for i := range out {
			switch len(vals) {
			case 0:
				out[i] = def
			case 1:
				out[i] = vals[0]
			default:
				out[i] = vals[i]
			}
		}
		return out
	}
	intensity := "v = the pixel value / 255 (8-bit) or / 65535 (16-bit images), RGB or luma for 1 channel, then (v - mean) / std per channel"
	if inModel {
		intensity = "v = the pixel value / 255 (8-bit) or / 65535 (16-bit images), RGB or luma for 1 channel; the model applies (v - mean) / std itself"
	}
	pre := map[string]any{
		"intensity": intensity, "normalized_in_model": inModel,
		"channels": c, "mean": perChannel(d.Mean, data.Mean), "std": perChannel(d.Std, data.Std),
		"resize": d.Resize, "scale": d.Scale,
	}
	if f := ck.Manifest.Data; f != nil && f.Height > 0 {
		pre["input_size"] = []int{f.Height, f.Width}
	}
	values, names := ck.Manifest.MaskValues, []string(d.ClassNames)
	if values == nil {
		values = make([]int, m.Classes)
		for k := range values {
			values[k] = k
		}
	}
	if names == nil {
		for k := range m.Classes {
			names = append(names, fmt.Sprintf("class %d", k))
		}
	}
	meta := map[string]string{
		"memunet_version": version, "memunet_model": string(arch),
		"memunet_checkpoint_step": fmt.Sprint(ck.Manifest.Step),
	}
	for key, v := range map[string]any{"memunet_preprocessing": pre, "memunet_mask_values": values, "memunet_class_names": names} {
		b, _ := json.Marshal(v)
		meta[key] = string(b)
	}
	return meta
}
