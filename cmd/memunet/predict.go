package main

import (
	"io"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/predict"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/rundir"
)

const predictUsage = "usage: memunet predict --checkpoint PATH,... --input FILE|DIR|dataset:val|train|test [--out DIR] [--newest] [--overlay] [--precision fp32|fp16|bf16] [--capacity SIZE] [--batch N] [--device D] [--class-indices] [--probs png|npy] [--tta] [--resize auto|train|none|HxW] [--tile N|auto|none] [--overlap F] [--blend gaussian|constant] [--references PATH] [--keep-largest CLASSES|all] [--force]"

func predictCommand(args []string, stdout, stderr io.Writer, sig *rundir.Interrupt) error {
	sig.AtOnce("predict", "nothing was written")
	fs := newFlags("predict")
	model := addModelFlags(fs)
	input := fs.String("input", "", "image file, directory of images, NIfTI volume (.nii, .nii.gz; for a checkpoint trained on cases of several modalities, any of a case's files CASE_0000.nii.gz, CASE_0001.nii.gz, ..., which predicts the case into CASE.nii.gz), or a split of the checkpoint's dataset: dataset:val, dataset:train or dataset:test")
	outDir := fs.String("out", "", "directory for the masks (default: predict/<input>-step-N in the checkpoint's run directory)")
	overlay := fs.Bool("overlay", false, "also write each image with its mask blended over it")
	probs := fs.String("probs", "", "also write each image's class probabilities: png (a 16-bit gray PNG per class, 65535 = 1) or npy (one float32 array, classes x height x width)")
	tta := fs.Bool("tta", false, "test-time flip averaging: the mean of the image's and its mirror's probabilities (two forward passes)")
	dev := fs.String("device", "", "what to compute on: auto, cpu, cuda or cuda:N (default: the checkpoint's device)")
	resize := fs.String("resize", predict.ResizeAuto, "how image files are sized for the model: auto (as training prepared its images: data.resize, else the file's size times data.scale), train (training's size), none (each file's own size) or HEIGHTxWIDTH; masks come back at each file's size")
	tile := fs.String("tile", "", "predict image files by tiles of this side (a multiple of 2^model.depth), auto (the largest whose plan fits the capacity and, with the host buffers, "+memlimit.MarginText+") or none (whole images only; one too large is refused) (default: predict.tile; unset: whole images where they fit that share, else auto)")
	overlap := fs.Float64("overlap", -1, "share of a tile its neighbour covers, 0..0.9 (default: predict.overlap, 0.25)")
	blend := fs.String("blend", "", "how tiles are weighed: gaussian (sigma = tile/8) or constant (default: predict.blend)")
	force := fs.Bool("force", false, "replace an earlier prediction in --out, finished or cut off (only the files its predict.json or .unfinished lists)")
	references := fs.String("references", "", "with a 3D UNet (model.dims 3), score each NIfTI volume against its reference mask: a mask volume, or a folder of them named as the volumes (or without nnU-Net's _0000: CASE.nii.gz); Dice per class and volume, means with and without background, into predict.json and the summary")
	classIndices := fs.Bool("class-indices", false, "write class indices (palette PNGs) even where the training masks used other values (e.g. 0/255)")
	keepLargest := fs.String("keep-largest", "", "keep only each listed class's largest connected component (4-connected in pictures, 6 in volumes), e.g. 1,2; all: each but data.background")
	if err := parseFlags(fs, args, predictUsage); err != nil {
		return err
	}
	if *model.checkpoint == "" || *input == "" {
		return usageError{"predict: --checkpoint and --input are required; " + predictUsage}
	}
	opts := predict.Options{Overlay: *overlay, Probs: *probs, TTA: *tta, ClassIndices: *classIndices, Resize: *resize, Force: *force,
		Tile: *tile, Overlap: *overlap, Blend: *blend, References: *references, KeepLargest: *keepLargest}
	if err := opts.CheckFlags(); err != nil {
		return usageError{err.Error() + "; " + predictUsage}
	}
	cks, err := checkpoint.Members(*model.checkpoint) // an ensemble's, where it lists several
	if err != nil {
		return err
	}
	ck, err := checkpoint.OpenModel(cks[0], *model.newest)
	if err != nil {
		return err
	}
	dir := ck.Dir
	ck.Config.Invocation = checkpoint.InvocationOf(dir, nil)
	if *outDir == "" {
		if *outDir, err = predict.DefaultOutput(dir, *input, ck.Manifest.Step, len(cks)); err != nil {
			return usageError{err.Error()}
		}
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
	opts = opts.WithDefaults(ck.Config.Predict)
	p, lim, _, err := model.predictor("predict", ck)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.AddMembers(cks[1:], *model.newest, *outDir); err != nil {
		return err
	}
	p.Flags = config.GivenFlags(fs, "out", "force")
	p.Warn = stderr
	p.Stop = sig.Cooperate("stopping at once; what it wrote into " + *outDir + " stays, listed in its .unfinished: replace it with " + p.ReplaceCommand(*outDir))
	rep, err := p.Run(*input, *outDir, opts, lim, stdout)
	if st := sig.Stopped(err, "predict", "removed what it had written into "+*outDir); st != 0 {
		return exitStatus(st)
	}
	if err != nil {
		return err
	}
	report.PrintPredicted(stdout, rep, *outDir)
	return nil
}
