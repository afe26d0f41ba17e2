// Command reference writes the inputs and memunet's logits that
// tools/check/onnx-check compares an exported ONNX model with: for each image
// size and batch size, n synthetic images (raw intensities in [0, 1], as
// memunet reads 8-bit files) and the logits of the checkpoint's model in
// eval mode, fp32, on the CPU, on those images normalised with the
// checkpoint's data.mean and data.std. It reads the checkpoint export
// reads (a run directory: its newest).
//
//	go run ./tools/check/onnx-check/reference --checkpoint RUN --out DIR [--sizes 32,64] [--batches 1,3]
//
// DIR gets cases.json, and per case raw-SIZE-BATCH.f32,
// normalized-SIZE-BATCH.f32 and logits-SIZE-BATCH.f32 (float32, little
// endian, NCHW).
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/onnx"
	"github.com/memunet/memunet/outdir"
)

// testCase is one entry of cases.json.
type testCase struct {
	N, C, H, W, Classes int
	// File names in DIR: raw intensities, the same normalised (memunet's
	// input), the logits.
	Raw, Normalized, Logits string
}

func main() {
	ckPath := flag.String("checkpoint", "", "checkpoint or run directory (its newest checkpoint)")
	out := flag.String("out", "", "directory to write the cases into")
	sizes := flag.String("sizes", "32,64", "image sizes (height = width), multiples of 2^depth")
	batches := flag.String("batches", "1,3", "batch sizes")
	flag.Parse()
	if *ckPath == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: reference --checkpoint RUN --out DIR [--sizes 32,64] [--batches 1,3]")
		os.Exit(2)
	}
	if err := write(*ckPath, *out, ints(*sizes), ints(*batches)); err != nil {
		fmt.Fprintln(os.Stderr, "reference:", err)
		os.Exit(1)
	}
}

func ints(list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "reference: %q is not a list of positive integers\n", list)
			os.Exit(2)
		}
		out = append(out, v)
	}
	return out
}

func write(ckPath, out string, sizes, batches []int) error {
	dir, err := checkpoint.ResolveResume(ckPath, "")
	if err != nil {
		return err
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	dev := model.NewDevice(cpu.New(), memory.Options{})
	net, err := model.New(dev, ck.Config.ModelConfig(), ck.Config.Model.Seed)
	if err != nil {
		return err
	}
	defer net.Free()
	if err := ck.LoadWeights(net); err != nil {
		return err
	}
	c, classes := net.Config.InChannels, net.Config.Classes
	mean, std, err := onnx.PerChannel(ck.Config.Data.Mean, ck.Config.Data.Std, c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var cases []testCase
	for _, size := range sizes {
		for _, n := range batches {
			raw, err := images(n, c, size, classes)
			if err != nil {
				return err
			}
			x, err := model.NewTensor(dev, memory.Activations, backend.Float32, n, c, size, size)
			if err != nil {
				return err
			}
			normalized := make([]float32, len(raw))
			for i, v := range raw {
				ch := i / (size * size) % c
				normalized[i] = (v - mean[ch]) / std[ch]
			}
			x.Write(normalized)
			logits, err := net.Forward(&model.Env{Device: dev, Precision: backend.Float32}, x)
			x.Release()
			if err != nil {
				return err
			}
			tc := testCase{N: n, C: c, H: size, W: size, Classes: classes,
				Raw: fmt.Sprintf("raw-%d-%d.f32", size, n), Normalized: fmt.Sprintf("normalized-%d-%d.f32", size, n),
				Logits: fmt.Sprintf("logits-%d-%d.f32", size, n)}
			err = writeF32(filepath.Join(out, tc.Raw), raw)
			if err == nil {
				err = writeF32(filepath.Join(out, tc.Normalized), normalized)
			}
			if err == nil {
				err = writeF32(filepath.Join(out, tc.Logits), logits.Read())
			}
			logits.Release()
			if err != nil {
				return err
			}
			cases = append(cases, tc)
		}
	}
	b, _ := json.MarshalIndent(map[string]any{"checkpoint": dir, "step": ck.Manifest.Step, "cases": cases}, "", "  ")
	return outdir.WriteBytes(filepath.Join(out, "cases.json"), append(b, '\n'))
}

// images is n synthetic shape images of size x size with c channels (the
// RGB channels repeated or cut), raw intensities of 8-bit pixels.
func images(n, c, size, classes int) ([]float32, error) {
	syn, err := data.NewSynthetic(data.SyntheticConfig{Count: n, Size: size, Classes: min(max(classes, 2), 4), Seed: uint64(size)})
	if err != nil {
		return nil, err
	}
	plane := size * size
	out := make([]float32, 0, n*c*plane)
	for i := range n {
		img, _, err := syn.Image(i)
		if err != nil {
			return nil, err
		}
		for ch := range c {
			for p := range plane {
				out = append(out, float32(img.Pix[4*p+ch%3])/255)
			}
		}
	}
	return out, nil
}

func writeF32(path string, v []float32) error {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return outdir.WriteBytes(path, b)
}
