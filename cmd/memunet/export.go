package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/export"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/runfiles"
)

const exportUsage = "usage: memunet export --checkpoint PATH [--format safetensors|onnx] [--out FILE] [--dtype fp32|fp16|bf16] [--with-normalize] [--with-softmax]"

// exportCommand writes a checkpoint's weights (its state_dict) as one
// safetensors file for PyTorch (see docs/guide/export.md), or the
// model as an ONNX graph: export.Write.
func exportCommand(args []string, stdout io.Writer) error {
	fs := newFlags("export")
	ckPath := fs.String("checkpoint", "", "checkpoint directory (or a run directory: its newest checkpoint)")
	format := fs.String("format", "safetensors", "safetensors (the weights, for PyTorch) or onnx (the eval-mode model, for ONNX Runtime)")
	out := fs.String("out", "", "file to write (default: model-step-N.safetensors or .onnx in the checkpoint's run directory)")
	dtype := fs.String("dtype", "fp32", "fp32, fp16 or bf16 for the float tensors (onnx: fp32 or fp16)")
	withNormalize := fs.Bool("with-normalize", false, "onnx: the model takes raw intensities in [0, 1] and applies data.mean and data.std itself")
	withSoftmax := fs.Bool("with-softmax", false, "onnx: the model outputs class probabilities instead of logits")
	if err := parseFlags(fs, args, exportUsage); err != nil {
		return err
	}
	if *ckPath == "" {
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
	ck, err := checkpoint.OpenModel(*ckPath, true) // a run's newest checkpoint: the weights as they are
	if err != nil {
		return err
	}
	dir := ck.Dir
	if *out == "" {
		run := checkpoint.RunDirOf(dir)
		if run == "" {
			return usageError{fmt.Sprintf("export: %s is not in a run directory's checkpoints/; name the file with --out", dir)}
		}
		*out = filepath.Join(run, runfiles.ExportName(ck.Manifest.Step, dt.String(), *format))
	}
	if err := checkpoint.CheckOutside(*out, dir); err != nil {
		return usageError{"export: --out " + err.Error()}
	}
	// No folder lock: export writes one file, whole or not at all
	// (outdir.WriteFile), so it cannot mix with another writer's files, and
	// exporting from a run that is still training (its folder locked) works.
	x, err := export.Write(ck, *out, export.Options{Format: *format, DType: dt, Normalize: *withNormalize, Softmax: *withSoftmax, Version: version})
	if err != nil {
		return err
	}
	if *format == "onnx" {
		fmt.Fprintf(stdout, "exported %s (step %d) as ONNX (opset %d, %s, output %s) to %s, %s\n",
			dir, ck.Manifest.Step, x.Opset, dt, x.Output, *out, memory.FormatBytes(x.Bytes))
		return nil
	}
	fmt.Fprintf(stdout, "exported %d tensors (%s) of %s (step %d) to %s, %s\n",
		x.Tensors, dt, dir, ck.Manifest.Step, *out, memory.FormatBytes(x.Bytes))
	return nil
}
