package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/predict"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/tiles"
	"github.com/memunet/memunet/train"
)

const predictUsage = "usage: memunet predict --checkpoint PATH --input FILE|DIR|dataset:val|train|test [--out DIR] [--newest] [--overlay] [--precision fp32|fp16|bf16] [--capacity SIZE] [--batch N] [--device D] [--class-indices] [--probs png|npy] [--tta] [--resize auto|train|none|HxW] [--tile N|auto|none] [--overlap F] [--blend gaussian|constant] [--force]"

func predictCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("predict", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ckPath := fs.String("checkpoint", "", "checkpoint directory, or a run directory: its best checkpoint by val_miou (--newest: its newest)")
	newest := fs.Bool("newest", false, "with a run directory, use its newest checkpoint instead of its best")
	input := fs.String("input", "", "image file, directory of images, or a split of the checkpoint's dataset: dataset:val, dataset:train or dataset:test")
	outDir := fs.String("out", "", "directory for the masks (default: predict/<input>-step-N in the checkpoint's run directory)")
	overlay := fs.Bool("overlay", false, "also write each image with its mask blended over it")
	probs := fs.String("probs", "", "also write each image's class probabilities: png (a 16-bit gray PNG per class, 65535 = 1) or npy (one float32 array, classes x height x width)")
	tta := fs.Bool("tta", false, "test-time flip averaging: the mean of the image's and its mirror's probabilities (two forward passes)")
	precision := fs.String("precision", "", "fp32, fp16 or bf16 (default: the checkpoint's train.precision)")
	capacity := fs.String("capacity", "", "memory pool capacity such as 6GiB (default: the checkpoint's memory.capacity)")
	batch := fs.Int("batch", 0, "images per forward pass (default: the checkpoint's train.batch_size)")
	dev := fs.String("device", "", "what to compute on: auto, cpu, cuda or cuda:N (default: the checkpoint's device)")
	resize := fs.String("resize", predict.ResizeAuto, "how image files are sized for the model: auto (as training prepared its images: data.resize, else the file's size times data.scale), train (training's size), none (each file's own size) or HEIGHTxWIDTH; masks come back at each file's size")
	tile := fs.String("tile", "", "predict image files by tiles of this side (a multiple of 2^model.depth), auto (the largest whose plan fits) or none (whole images only; one too large is refused) (default: predict.tile; unset: whole images where they fit, else auto)")
	overlap := fs.Float64("overlap", -1, "share of a tile its neighbour covers, 0..0.9 (default: predict.overlap, 0.25)")
	blend := fs.String("blend", "", "how tiles are weighed: gaussian (sigma = tile/8) or constant (default: predict.blend)")
	force := fs.Bool("force", false, "replace an earlier prediction in --out (only the files its predict.json lists)")
	classIndices := fs.Bool("class-indices", false, "write class indices (palette PNGs) even where the training masks used other values (e.g. 0/255)")
	if err := fs.Parse(args); err != nil {
		return flagError(fs, err, predictUsage)
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("predict: unexpected argument %q; %s", fs.Arg(0), predictUsage)}
	case *ckPath == "" || *input == "":
		return usageError{"predict: --checkpoint and --input are required; " + predictUsage}
	}
	if *probs != "" && *probs != "png" && *probs != "npy" {
		return usageError{fmt.Sprintf("predict: --probs %q: png or npy; %s", *probs, predictUsage)}
	}
	opts := predict.Options{Overlay: *overlay, Probs: *probs, TTA: *tta, ClassIndices: *classIndices, Resize: *resize, Force: *force,
		Tile: *tile, Overlap: *overlap, Blend: *blend}
	if *overlap != -1 {
		if err := tiles.ValidateOverlap("predict: --overlap", *overlap); err != nil {
			return usageError{err.Error()}
		}
	}
	if *blend != "" {
		if err := tiles.ValidateBlend("predict: --blend", *blend); err != nil {
			return usageError{err.Error()}
		}
	}
	resolve := checkpoint.ResolveBest
	if *newest {
		resolve = func(arg string) (string, error) { return checkpoint.ResolveResume(arg, "") }
	}
	dir, err := resolve(*ckPath)
	if err != nil {
		return err
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	ck.Config.Invocation = checkpointInvocation(dir, nil)
	if *outDir == "" {
		run := checkpoint.RunDirOf(dir)
		if run == "" {
			return usageError{fmt.Sprintf("predict: %s is not in a run directory's checkpoints/; name the output with --out", dir)}
		}
		name := strings.TrimPrefix(*input, "dataset:")
		if name == *input {
			name = strings.TrimSuffix(filepath.Base(filepath.Clean(*input)), filepath.Ext(*input))
		}
		*outDir = filepath.Join(run, "predict", fmt.Sprintf("%s-step-%08d", name, ck.Manifest.Step))
	}
	if err := checkpoint.CheckOutside(*outDir, dir); err != nil {
		return usageError{"predict: --out " + err.Error()}
	}
	if *dev != "" {
		spec, err := device.Parse(*dev)
		if err != nil {
			return usageError{"predict: --device " + err.Error()}
		}
		ck.Config.Device = spec
	}
	cfg := ck.Config
	opts = opts.WithDefaults(cfg.Predict)
	prec := cfg.Train.Precision
	if *precision != "" {
		if prec, err = backend.ParsePrecision(*precision); err != nil {
			return usageError{"predict: --precision " + err.Error()}
		}
	}
	if *batch == 0 {
		*batch = cfg.Train.BatchSize
	}
	lim, err := predictLimits("predict", cfg, *capacity)
	if err != nil {
		return err
	}
	p, err := predict.NewPredictor(ck, prec, lim.Capacity, *batch)
	if err != nil {
		return err
	}
	defer p.Close()
	p.Note = os.Stderr
	rep, err := p.Run(*input, *outDir, opts, lim, stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "predicted %d images with %s (step %d, %s) into %s (legend.png: the class colors); peak allocated %s (planned %s)\n",
		rep.Images, dir, rep.Step, prec, *outDir, memory.FormatBytes(rep.PeakAllocatedBytes), memory.FormatBytes(rep.PlannedPeakBytes))
	if m := rep.Metrics; m != nil {
		fmt.Fprintf(stdout, "%s: loss %.4f  pixel acc %.4f  miou %.4f  dice %.4f", *input, m.ValLoss, m.ValPixelAcc, m.ValMIoU, m.ValDice)
		if rep.TrainingValMIoU != nil {
			fmt.Fprintf(stdout, "  (training's val miou at step %d: %.4f", rep.Step, *rep.TrainingValMIoU)
			if rep.UnlikeTraining != "" {
				fmt.Fprintf(stdout, "; they differ as %s", rep.UnlikeTraining)
			}
			fmt.Fprint(stdout, ")")
		}
		fmt.Fprintln(stdout)
		report.PrintClassTable(stdout, m.PerClass)
	}
	return nil
}

// predictLimits are what predict and eval plan against: the pool's
// capacity (--capacity, else the checkpoint's memory.capacity; auto: the
// device's free memory) and the host's available memory, read before the
// model takes its share (the plans count the weights).
func predictLimits(command string, cfg config.Config, capacity string) (predict.Limits, error) {
	capBytes := int64(cfg.Memory.Capacity)
	if capacity != "" {
		b, err := config.ParseByteSize(capacity)
		if err != nil {
			return predict.Limits{}, usageError{command + ": --capacity: " + err.Error()}
		}
		capBytes = int64(b)
	}
	if capBytes == int64(config.CapacityAuto) {
		var err error
		if capBytes, _, err = resolveCapacity(cfg); err != nil {
			return predict.Limits{}, err
		}
	}
	return predict.Limits{Capacity: capBytes, Available: train.HostMemory()}, nil
}
