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
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/safetensors"
)

const exportUsage = "usage: memunet export --checkpoint PATH [--out model.safetensors] [--dtype fp32|fp16|bf16]"

// exportCommand writes a checkpoint's weights (its state_dict) as one
// safetensors file that PyTorch's safetensors loader reads into the
// equivalent torch module (see README: Exported weights).
func exportCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ckPath := fs.String("checkpoint", "", "checkpoint directory (or a run directory: its newest checkpoint)")
	out := fs.String("out", "", "safetensors file to write (default: model-step-N.safetensors in the checkpoint's run directory)")
	dtype := fs.String("dtype", "fp32", "fp32, fp16 or bf16 for the float tensors")
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
		*out = filepath.Join(run, name+".safetensors")
	}
	if err := checkpoint.CheckOutside(*out, dir); err != nil {
		return usageError{"export: --out " + err.Error()}
	}
	lock, err := outdir.Acquire(filepath.Dir(*out), "memunet export")
	if err != nil {
		return err
	}
	defer lock.Clear() // a folder made for a failed command goes; no lock file stays beside the result
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
	tensors := checkpoint.StateDict(net)
	for i, t := range tensors {
		if t.DType == safetensors.F32 && dt != backend.Float32 {
			tensors[i] = halve(t, dt)
		}
	}
	m := ck.Config.Model
	arch, _ := json.Marshal(map[string]any{
		"in_channels": m.InChannels, "classes": m.Classes, "base": m.Base, "depth": m.Depth,
		"up": m.Up, "norm": m.Norm, "groups": m.Groups,
	})
	meta := map[string]string{
		"format": "pt", "memunet_version": version, "memunet_model": string(arch),
		"memunet_checkpoint_step": fmt.Sprint(ck.Manifest.Step),
	}
	if err := outdir.WriteFile(*out, func(w io.Writer) error { return safetensors.Write(w, tensors, meta) }); err != nil {
		return fmt.Errorf("export: writing %s: %w", *out, err)
	}
	st, _ := os.Stat(*out)
	fmt.Fprintf(stdout, "exported %d tensors (%s) of %s (step %d) to %s, %s\n",
		len(tensors), dt, dir, ck.Manifest.Step, *out, memory.FormatBytes(st.Size()))
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
