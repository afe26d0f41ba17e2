package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
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

const exportUsage = "usage: memunet export --checkpoint PATH [--format safetensors|onnx] [--out FILE] [--dtype fp32|fp16|bf16] [--with-normalize] [--with-softmax]"

// exportCommand writes a checkpoint's weights (its state_dict) as one
// safetensors file that PyTorch's safetensors loader reads into the
// equivalent torch module (see README: Exported weights), or the model as
// an ONNX graph (package onnx).
func exportCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ckPath := fs.String("checkpoint", "", "checkpoint directory (or a run directory: its newest checkpoint)")
	format := fs.String("format", "safetensors", "safetensors (the weights, for PyTorch) or onnx (the eval-mode model, for ONNX Runtime)")
	out := fs.String("out", "", "file to write (default: model-step-N.safetensors or .onnx in the checkpoint's run directory)")
	dtype := fs.String("dtype", "fp32", "fp32, fp16 or bf16 for the float tensors (onnx: fp32 or fp16)")
	withNormalize := fs.Bool("with-normalize", false, "onnx: the model takes raw intensities in [0, 1] and applies data.mean and data.std itself")
	withSoftmax := fs.Bool("with-softmax", false, "onnx: the model outputs class probabilities instead of logits")
	if err := fs.Parse(args); err != nil {
		return flagError(fs, err, exportUsage)
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("export: unexpected argument %q; %s", fs.Arg(0), exportUsage)}
	case *ckPath == "":
		return usageError{"export: --checkpoint is required; " + exportUsage}
	}
	dt, err := backend.ParsePrecision(*dtype)
	if err != nil {
		return usageError{"export: --dtype " + err.Error()}
	}
	switch {
	case *format != "safetensors" && *format != "onnx":
		return usageError{fmt.Sprintf("export: --format %q: must be safetensors or onnx; %s", *format, exportUsage)}
	case *format == "onnx" && dt == backend.BFloat16:
		return usageError{"export: --dtype bf16: an ONNX export takes fp32 or fp16 (ONNX Runtime has no bf16 convolutions); use --dtype fp16"}
	case *format != "onnx" && (*withNormalize || *withSoftmax):
		return usageError{"export: --with-normalize and --with-softmax shape an ONNX graph; add --format onnx"}
	}
	dir, err := checkpoint.ResolveResume(*ckPath, "")
	if err != nil {
		return err
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	if *out == "" {
		run := checkpoint.RunDirOf(dir)
		if run == "" {
			return usageError{fmt.Sprintf("export: %s is not in a run directory's checkpoints/; name the file with --out", dir)}
		}
		name := fmt.Sprintf("model-step-%08d", ck.Manifest.Step)
		if dt != backend.Float32 {
			name += "-" + dt.String()
		}
		*out = filepath.Join(run, name+"."+*format)
	}
	if err := checkpoint.CheckOutside(*out, dir); err != nil {
		return usageError{"export: --out " + err.Error()}
	}
	// No folder lock: export writes one file, whole or not at all
	// (outdir.WriteFile), so it cannot mix with another writer's files, and
	// exporting from a run that is still training (its folder locked) works.
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("export: --out %s: %w", *out, err)
	}
	// Build the model from the manifest and load the weights: this checks
	// that the tensors are the architecture's, names and shapes.
	net, err := model.New(model.NewDevice(cpu.New(), memory.Options{}), ck.Config.ModelConfig(), ck.Config.Model.Seed)
	if err != nil {
		return err
	}
	defer net.Free()
	if err := ck.LoadWeights(net); err != nil {
		return err
	}
	m := ck.Config.Model
	arch, _ := json.Marshal(map[string]any{
		"in_channels": m.InChannels, "classes": m.Classes, "base": m.Base, "depth": m.Depth,
		"up": m.Up, "norm": m.Norm, "groups": m.Groups,
	})
	meta := map[string]string{
		"memunet_version": version, "memunet_model": string(arch),
		"memunet_checkpoint_step": fmt.Sprint(ck.Manifest.Step),
	}
	for k, v := range exportDataMeta(ck, *format == "onnx" && *withNormalize) {
		meta[k] = v
	}
	if *format == "onnx" {
		return exportONNX(stdout, net, onnx.Options{DType: dt, Normalize: *withNormalize, Softmax: *withSoftmax,
			Mean: ck.Config.Data.Mean, Std: ck.Config.Data.Std, Meta: meta, ProducerVersion: version}, dir, ck.Manifest.Step, *out)
	}
	meta["format"] = "pt"
	tensors := checkpoint.StateDict(net)
	for i, t := range tensors {
		if t.DType == safetensors.F32 && dt != backend.Float32 {
			tensors[i] = halve(t, dt)
		}
	}
	if err := outdir.WriteFile(*out, func(w io.Writer) error { return safetensors.Write(w, tensors, meta) }); err != nil {
		return fmt.Errorf("export: writing %s: %w", *out, err)
	}
	st, _ := os.Stat(*out)
	fmt.Fprintf(stdout, "exported %d tensors (%s) of %s (step %d) to %s, %s\n",
		len(tensors), dt, dir, ck.Manifest.Step, *out, memory.FormatBytes(st.Size()))
	return nil
}

// exportONNX writes net as an ONNX model to out.
func exportONNX(stdout io.Writer, net *model.UNet, opt onnx.Options, dir string, step int, out string) error {
	b, err := onnx.Marshal(net, opt)
	if err != nil {
		return fmt.Errorf("export: %s: %w", dir, err)
	}
	if err := outdir.WriteBytes(out, b); err != nil {
		return fmt.Errorf("export: writing %s: %w", out, err)
	}
	fmt.Fprintf(stdout, "exported %s (step %d) as ONNX (opset %d, %s, output %s) to %s, %s\n",
		dir, step, onnx.Opset, opt.DType, opt.OutputName(), out, memory.FormatBytes(int64(len(b))))
	return nil
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

// exportDataMeta is what a user of the exported weights needs besides
// the architecture, as JSON: memunet_preprocessing (each channel's mean
// and std applied as (v - mean) / std to intensities v in [0, 1], by the
// user or, with inModel, by the exported model itself; the resize or
// scale, the size training's images had), memunet_mask_values (class k's
// value in the training masks) and memunet_class_names.
func exportDataMeta(ck *checkpoint.Checkpoint, inModel bool) map[string]string {
	d, c := ck.Config.Data, ck.Config.Model.InChannels
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
		values = make([]int, ck.Config.Model.Classes)
		for k := range values {
			values[k] = k
		}
	}
	if names == nil {
		for k := range ck.Config.Model.Classes {
			names = append(names, fmt.Sprintf("class %d", k))
		}
	}
	meta := map[string]string{}
	for key, v := range map[string]any{"memunet_preprocessing": pre, "memunet_mask_values": values, "memunet_class_names": names} {
		b, _ := json.Marshal(v)
		meta[key] = string(b)
	}
	return meta
}
