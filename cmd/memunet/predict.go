package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/predict"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/train"
	xdraw "golang.org/x/image/draw"
)

const predictUsage = "usage: memunet predict --checkpoint PATH --input FILE|DIR|dataset:val [--out DIR] [--newest] [--overlay] [--precision fp32|fp16|bf16] [--capacity SIZE] [--batch N] [--device D] [--class-indices] [--probs png|npy] [--tta]"

// PredictReport is predict.json.
type PredictReport struct {
	Checkpoint string        `json:"checkpoint"`
	Step       int           `json:"step"`
	Input      string        `json:"input"`
	Precision  backend.DType `json:"precision"`
	Images     int           `json:"images"`
	// Outputs lists each input with its mask (and overlay) file.
	Outputs []PredictOutput `json:"outputs"`
	// Metrics are set for a dataset split (which has masks): computed as
	// training's validation computes them.
	Metrics *checkpoint.ValRecord `json:"metrics,omitempty"`
	// TrainingValMIoU is the val_miou training recorded at the checkpoint's
	// step, when it validated there.
	TrainingValMIoU    *float64 `json:"training_val_miou,omitempty"`
	PeakAllocatedBytes int64    `json:"peak_allocated_bytes"`
	// PlannedPeakBytes is the largest batch's planned peak allocated
	// (predict.Predictor.PlanBatch, in a fresh pool).
	PlannedPeakBytes int64 `json:"planned_peak_bytes"`
	// Legend is the color of each class in the masks and overlays, also
	// drawn in legend.png.
	Legend []LegendEntry `json:"legend"`
	// MaskValues is the value each class has in the mask files written
	// (the training masks' own values, e.g. [0, 255]); absent when the
	// masks hold the class indices (palette PNGs).
	MaskValues []int `json:"mask_values,omitempty"`
}

// LegendEntry is one class's color.
type LegendEntry struct {
	Class int    `json:"class"`
	Color string `json:"color"` // #rrggbb
	// Value is the class's value in the mask files, where it is not the class.
	Value *int `json:"value,omitempty"`
}

// PredictOutput is one predicted image.
type PredictOutput struct {
	Input   string `json:"input"`
	Mask    string `json:"mask"`
	Overlay string `json:"overlay,omitempty"`
	// Probs are the probability files (--probs): one PNG per class, or one
	// .npy array.
	Probs []string `json:"probs,omitempty"`
}

func predictCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("predict", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ckPath := fs.String("checkpoint", "", "checkpoint directory, or a run directory: its best checkpoint by val_miou (--newest: its newest)")
	newest := fs.Bool("newest", false, "with a run directory, use its newest checkpoint instead of its best")
	input := fs.String("input", "", "image file, directory of images, or dataset:val / dataset:train")
	outDir := fs.String("out", "", "directory for the masks (default: predict/<input>-step-N in the checkpoint's run directory)")
	overlay := fs.Bool("overlay", false, "also write each image with its mask blended over it")
	probs := fs.String("probs", "", "also write each image's class probabilities: png (a 16-bit gray PNG per class, 65535 = 1) or npy (one float32 array, classes x height x width)")
	tta := fs.Bool("tta", false, "test-time flip averaging: the mean of the image's and its mirror's probabilities (two forward passes)")
	precision := fs.String("precision", "", "fp32, fp16 or bf16 (default: the checkpoint's train.precision)")
	capacity := fs.String("capacity", "", "memory pool capacity such as 6GiB (default: the checkpoint's memory.capacity)")
	batch := fs.Int("batch", 0, "images per forward pass (default: the checkpoint's train.batch_size)")
	dev := fs.String("device", "", "what to compute on: auto, cpu, cuda or cuda:N (default: the checkpoint's device)")
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
	opts := predictOptions{overlay: *overlay, probs: *probs, tta: *tta}
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
	prec := cfg.Train.Precision
	if *precision != "" {
		if prec, err = backend.ParsePrecision(*precision); err != nil {
			return usageError{"predict: --precision " + err.Error()}
		}
	}
	capBytes := int64(cfg.Memory.Capacity)
	if *capacity != "" {
		b, err := config.ParseByteSize(*capacity)
		if err != nil {
			return usageError{"predict: --capacity: " + err.Error()}
		}
		capBytes = int64(b)
	}
	if capBytes == int64(config.CapacityAuto) {
		if capBytes, _, err = resolveCapacity(cfg); err != nil {
			return err
		}
	}
	if *batch == 0 {
		*batch = cfg.Train.BatchSize
	}
	// Read before the model takes its share: the plans count the weights.
	lim := predictLimits{capacity: capBytes, available: train.HostMemory()}
	p, err := predict.NewPredictor(ck, prec, capBytes, *batch)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	rep := &PredictReport{Checkpoint: dir, Step: ck.Manifest.Step, Input: *input, Precision: prec, TrainingValMIoU: ck.Manifest.ValMIoU}
	if !*classIndices {
		rep.MaskValues = ck.Manifest.MaskValues
	}
	if split, ok := strings.CutPrefix(*input, "dataset:"); ok {
		err = predictSplit(p, split, *outDir, opts, lim, rep)
	} else {
		err = predictFiles(p, *input, *outDir, opts, lim, stdout, rep)
	}
	if err != nil {
		return err
	}
	rep.PeakAllocatedBytes = p.Pool().Stats().Allocated.Peak
	for k := range p.Config.Model.Classes {
		e := LegendEntry{Class: k, Color: data.HexColor(data.ClassColor(uint8(k)))}
		if rep.MaskValues != nil {
			e.Value = &rep.MaskValues[k]
		}
		rep.Legend = append(rep.Legend, e)
	}
	if err := writePNG(filepath.Join(*outDir, "legend.png"), data.Legend(p.Config.Model.Classes)); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*outDir, "predict.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "predicted %d images with %s (step %d, %s) into %s (legend.png: the class colors); peak allocated %s (planned %s)\n",
		rep.Images, dir, rep.Step, prec, *outDir, memory.FormatBytes(rep.PeakAllocatedBytes), memory.FormatBytes(rep.PlannedPeakBytes))
	if m := rep.Metrics; m != nil {
		fmt.Fprintf(stdout, "%s: loss %.4f  pixel acc %.4f  miou %.4f  dice %.4f", *input, m.ValLoss, m.ValPixelAcc, m.ValMIoU, m.ValDice)
		if rep.TrainingValMIoU != nil {
			fmt.Fprintf(stdout, "  (training's val miou at step %d: %.4f)", rep.Step, *rep.TrainingValMIoU)
		}
		fmt.Fprintln(stdout)
		report.PrintClassTable(stdout, m.PerClass)
	}
	return nil
}

// predictSplit predicts the checkpoint's own validation (or training)
// samples, preprocessed exactly as in training, and reports the metrics.
// Each output is named after its sample's source file (folder, voc), or
// <split>-<index> for synthetic data.
func predictSplit(p *predict.Predictor, split, outDir string, opts predictOptions, lim predictLimits, rep *PredictReport) error {
	ds, idx, err := p.Split(split)
	if err != nil {
		return fmt.Errorf("predict: --input dataset:%s: %w", split, err)
	}
	h, w := ds.Size()
	need, err := p.PlanBatch(min(p.Batch, len(idx)), h, w, 0, opts.overlay)
	if err != nil {
		return fmt.Errorf("predict: --input dataset:%s: %w", split, err)
	}
	need.Host += opts.hostBytes(int64(need.N*h*w), 0, p.Config.Model.Classes)
	if why := lim.exceeded(need); why != "" {
		return fmt.Errorf("predict: --input dataset:%s: batches of %d images of %dx%d need %s; lower --batch", split, need.N, h, w, why)
	}
	rep.PlannedPeakBytes = need.PeakAllocated
	src, _ := data.SourceImages(ds)
	names := map[string]bool{}
	each := func(i int, pred []uint8, probs []float32) error {
		name := outputName(data.SampleName(ds, i), fmt.Sprintf("%s-%05d", split, i), names)
		out := PredictOutput{Input: fmt.Sprintf("dataset:%s[%d]", split, i), Mask: name + ".png"}
		if err := writeMask(filepath.Join(outDir, out.Mask), pred, w, h, rep.MaskValues); err != nil {
			return err
		}
		if opts.probs != "" {
			var err error
			if out.Probs, err = writeProbs(outDir, name, opts.probs, probs, p.Config.Model.Classes, w, h, w, h); err != nil {
				return err
			}
		}
		if opts.overlay && src != nil {
			img, _, err := src.Image(i)
			if err != nil {
				return err
			}
			out.Overlay = name + "_overlay.png"
			if err := writePNG(filepath.Join(outDir, out.Overlay), data.Overlay(img, pred, w, h)); err != nil {
				return err
			}
		}
		rep.Outputs = append(rep.Outputs, out)
		return nil
	}
	var m metrics.Validation
	if opts.probabilistic() {
		m, err = p.PredictSplitProbs(ds, idx, opts.tta, func(i int, pred, _ []uint8, probs []float32) error { return each(i, pred, probs) })
	} else {
		m, err = p.PredictSplit(ds, idx, func(i int, pred, _ []uint8) error { return each(i, pred, nil) })
	}
	if err != nil {
		return err
	}
	rep.Metrics, rep.Images = &checkpoint.ValRecord{Type: "val", Step: rep.Step, Validation: m}, len(idx)
	return nil
}

// outputName is a sample's output file stem: its source name made safe for
// a file name, else fallback; a name already used gets fallback appended.
func outputName(name, fallback string, used map[string]bool) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, name)
	switch {
	case name == "" || name == "." || name == "..":
		name = fallback
	case used[name]:
		name += "-" + fallback
	}
	used[name] = true
	return name
}

// imageExts are the inputs predict reads from a directory.
var imageExts = []string{".png", ".jpg", ".jpeg", ".gif"}

// predictLimits are what a batch of predictFiles must fit in: the pool's
// capacity (0: none) and the host's available memory (0: unknown).
type predictLimits struct{ capacity, available int64 }

// largeNeed is the need above which predict says what a batch will take
// before it starts.
const largeNeed = 1 << 30

// predictFiles predicts image files. Each is prepared as training prepared
// its images: decoded as the file datasets decode them, scaled to
// data.resize (or by data.scale; bilinear, as data.resize scales), with
// sides rounded to a multiple of 2^model.depth, normalized by data.mean and
// data.std; its mask is scaled back to the image's own size (nearest).
// Consecutive images of one size go through the model together, up to
// --batch at a time and as many as fit. Before a file is decoded its
// batch's memory is planned from the file's header (PlanBatch): an image
// that cannot fit alone is refused, naming what it needs and what would
// fit; one that needs more than largeNeed is announced on note.
func predictFiles(p *predict.Predictor, input, outDir string, opts predictOptions, lim predictLimits, note io.Writer, rep *PredictReport) error {
	files, err := inputFiles(input)
	if err != nil {
		return err
	}
	c := p.Config.Model.InChannels
	if c != 1 && c != 3 {
		return fmt.Errorf("predict: the model takes %d channels; image files give 1 (gray) or 3 (RGB)", c)
	}
	type file struct {
		path         string
		h, w, th, tw int
	}
	sized := make([]file, len(files))
	for i, f := range files {
		h, w, err := data.ImageSize(f)
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		th, tw := inputSize(p.Config, h, w)
		sized[i] = file{f, h, w, th, tw}
	}
	for lo := 0; lo < len(sized); {
		// The batch: consecutive files of one model size, while they fit.
		first := sized[lo]
		hi, srcPixels := lo, int64(0)
		var need predict.Need
		for hi < len(sized) && hi-lo < p.Batch && sized[hi].th == first.th && sized[hi].tw == first.tw {
			px := srcPixels + int64(sized[hi].h)*int64(sized[hi].w)
			nd, err := p.PlanBatch(hi-lo+1, first.th, first.tw, px, opts.overlay)
			if err != nil {
				return fmt.Errorf("predict: %s: %w", sized[hi].path, err)
			}
			nd.Host += opts.hostBytes(int64((hi-lo+1)*first.th*first.tw), px, p.Config.Model.Classes)
			if why := lim.exceeded(nd); why != "" {
				if hi == lo {
					return &predictSizeError{File: first.path, H: first.h, W: first.w, TH: first.th, TW: first.tw, Need: nd, Why: why,
						Advice: sizeAdvice(p, first.h, first.w, opts.overlay, lim)}
				}
				break
			}
			need, srcPixels = nd, px
			hi++
		}
		if need.Total() > largeNeed {
			fmt.Fprintf(note, "predict: %d image(s) from %s at %dx%d need %s\n", need.N, first.path, first.th, first.tw, need)
		}
		rep.PlannedPeakBytes = max(rep.PlannedPeakBytes, need.PeakAllocated)
		src := &fileSource{channels: c, classes: p.Config.Model.Classes}
		for _, f := range sized[lo:hi] {
			img, err := data.ReadImage(f.path, c)
			if err != nil {
				return fmt.Errorf("predict: %w", err)
			}
			src.images = append(src.images, img)
		}
		h, w := first.th, first.tw
		var ds data.Dataset
		if ds, err = data.Resize(src, h, w); err == nil && (len(p.Config.Data.Mean) > 0 || len(p.Config.Data.Std) > 0) {
			ds, err = data.Normalize(ds, p.Config.Data.Mean, p.Config.Data.Std)
		}
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		n := hi - lo
		images := make([]float32, n*c*h*w)
		if err := data.FillBatch(ds, seq(n), images, make([]uint8, n*h*w)); err != nil {
			return err
		}
		var pred []uint8
		var probs []float32
		k := p.Config.Model.Classes
		if opts.probabilistic() {
			probs, err = p.Probabilities(images, n, h, w, opts.tta)
			if err == nil {
				pred = predict.Argmax(probs, n, k, h, w)
			}
		} else {
			pred, err = p.Predict(images, n, h, w)
		}
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		for j, f := range sized[lo:hi] {
			img := src.images[j]
			b := img.Bounds()
			mask := scaleMask(pred[j*h*w:(j+1)*h*w], w, h, b.Dx(), b.Dy())
			stem := strings.TrimSuffix(filepath.Base(f.path), filepath.Ext(f.path))
			out := PredictOutput{Input: f.path, Mask: stem + ".png"}
			if err := writeMask(filepath.Join(outDir, out.Mask), mask, b.Dx(), b.Dy(), rep.MaskValues); err != nil {
				return err
			}
			if opts.probs != "" {
				if out.Probs, err = writeProbs(outDir, stem, opts.probs, probs[j*k*h*w:(j+1)*k*h*w], k, w, h, b.Dx(), b.Dy()); err != nil {
					return err
				}
			}
			if opts.overlay {
				out.Overlay = stem + "_overlay.png"
				if err := writePNG(filepath.Join(outDir, out.Overlay), data.Overlay(img, mask, b.Dx(), b.Dy())); err != nil {
					return err
				}
			}
			rep.Outputs = append(rep.Outputs, out)
		}
		lo = hi
	}
	rep.Images = len(files)
	return nil
}

// exceeded says what of need passes which limit, or "".
func (l predictLimits) exceeded(need predict.Need) string {
	switch {
	case l.capacity > 0 && need.PeakAllocated > l.capacity:
		return fmt.Sprintf("a pool peak of %s allocated, above its capacity %s (--capacity, else the checkpoint's memory.capacity)",
			memory.FormatBytes(need.PeakAllocated), memory.FormatBytes(l.capacity))
	case l.available > 0 && need.Total() > l.available:
		return fmt.Sprintf("%s, and the machine has %s available", need, memory.FormatBytes(l.available))
	}
	return ""
}

// predictSizeError refuses an image too large to predict on this machine.
type predictSizeError struct {
	File         string
	H, W, TH, TW int
	Need         predict.Need
	// Why is what the need is and the limit it passes (exceeded).
	Why, Advice string
}

func (e *predictSizeError) Error() string {
	return fmt.Sprintf("predict: %s is %dx%d (height x width) and the model takes it at %dx%d: predicting it needs %s. %s",
		e.File, e.H, e.W, e.TH, e.TW, e.Why, e.Advice)
}

// sizeAdvice names the largest size, halving the image's sides, at which
// an h x w image fits lim; with data.resize the model's input is fixed and
// only the file's own size can shrink.
func sizeAdvice(p *predict.Predictor, h, w int, overlay bool, lim predictLimits) string {
	if len(p.Config.Data.Resize) == 2 {
		return "The model takes every image at data.resize; scale the file down, or predict on a machine with more memory."
	}
	for k := 1; k <= 8 && h>>k > 0 && w>>k > 0; k++ {
		sh, sw := h>>k, w>>k
		th, tw := inputSize(p.Config, sh, sw)
		nd, err := p.PlanBatch(1, th, tw, int64(sh)*int64(sw), overlay)
		if err == nil && lim.exceeded(nd) == "" {
			need := "about " + memory.FormatBytes(nd.Total())
			if lim.capacity > 0 {
				need = "a pool peak of " + memory.FormatBytes(nd.PeakAllocated) + " allocated"
			}
			return fmt.Sprintf("Scale it down to %dx%d or smaller (that needs %s), or predict on a machine with more memory.", sh, sw, need)
		}
	}
	return "Even at 1/256 of its size it would not fit: predict on a machine with more memory."
}

// inputSize is the size an h x w image is given to the model at:
// data.resize, else the image's size times data.scale, each side rounded to
// the nearest multiple of 2^model.depth (at least one).
func inputSize(cfg config.Config, h, w int) (int, int) {
	if r := cfg.Data.Resize; len(r) == 2 {
		return r[0], r[1]
	}
	side := func(n int) int {
		v := float64(n)
		if s := cfg.Data.Scale; s > 0 {
			v *= s
		}
		f := float64(int(1) << cfg.Model.Depth)
		return int(max(f, math.Round(v/f)*f))
	}
	return side(h), side(w)
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// inputFiles is input itself, or the image files directly in the directory
// input, sorted.
func inputFiles(input string) ([]string, error) {
	st, err := os.Stat(input)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("predict: --input %s does not exist", input)
		}
		return nil, fmt.Errorf("predict: --input: %w", err)
	}
	if !st.IsDir() {
		return []string{input}, nil
	}
	des, err := os.ReadDir(input)
	if err != nil {
		return nil, fmt.Errorf("predict: --input: %w", err)
	}
	var files []string
	for _, de := range des {
		if !de.IsDir() && slices.Contains(imageExts, strings.ToLower(filepath.Ext(de.Name()))) {
			files = append(files, filepath.Join(input, de.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("predict: --input %s holds no %s files", input, strings.Join(imageExts, ", "))
	}
	return files, nil
}

// fileSource is a batch of decoded images as a data.ImageSource (with empty
// masks), so that data.Resize prepares them exactly as training does.
type fileSource struct {
	images            []*image.RGBA
	channels, classes int
}

func (s *fileSource) Len() int      { return len(s.images) }
func (s *fileSource) Channels() int { return s.channels }
func (s *fileSource) Classes() int  { return s.classes }
func (s *fileSource) Size() (int, int) {
	b := s.images[0].Bounds()
	return b.Dy(), b.Dx()
}
func (s *fileSource) Sample(int, []float32, []uint8) error {
	return errors.New("predict: file images are read through data.Resize")
}
func (s *fileSource) Image(i int) (*image.RGBA, *image.Gray, error) {
	if i < 0 || i >= len(s.images) {
		return nil, nil, fmt.Errorf("image %d out of range", i)
	}
	return s.images[i], image.NewGray(s.images[i].Rect), nil
}

// scaleMask scales a class map from w x h to ow x oh, nearest neighbor.
func scaleMask(m []uint8, w, h, ow, oh int) []uint8 {
	if w == ow && h == oh {
		return m
	}
	src := &image.Gray{Pix: m, Stride: w, Rect: image.Rect(0, 0, w, h)}
	dst := image.NewGray(image.Rect(0, 0, ow, oh))
	xdraw.NearestNeighbor.Scale(dst, dst.Rect, src, src.Rect, xdraw.Src, nil)
	return dst.Pix
}

// writeMask writes a palette PNG whose pixel values are the classes and
// whose colors are data.ClassColor's.
// With values (each class's raw value in the training masks, where they
// are not the class indices) it writes those values instead: 8-bit gray
// when they fit, else 16-bit gray, so a set with 0/255 masks gets 0/255
// masks back.
func writeMask(path string, m []uint8, w, h int, values []int) error {
	r := image.Rect(0, 0, w, h)
	if values == nil {
		return writePNG(path, &image.Paletted{Pix: m, Stride: w, Rect: r, Palette: data.MaskPalette()})
	}
	if slices.Max(values) <= 255 {
		img := image.NewGray(r)
		for i, k := range m {
			img.Pix[i] = uint8(values[k])
		}
		return writePNG(path, img)
	}
	img := image.NewGray16(r)
	for i, k := range m {
		img.Pix[2*i], img.Pix[2*i+1] = uint8(values[k]>>8), uint8(values[k])
	}
	return writePNG(path, img)
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// predictOptions are predict's output choices.
type predictOptions struct {
	overlay bool
	probs   string // "", png or npy
	tta     bool
}

// probabilistic says the predictions come from host probabilities
// (Predictor.Probabilities) rather than the device's argmax.
func (o predictOptions) probabilistic() bool { return o.tta || o.probs != "" }

// hostBytes is what the probabilities take on the host beside PlanBatch's
// figure: the batch's (twice with flip averaging) and one image's scaled
// to its file's size.
func (o predictOptions) hostBytes(modelPixels, sourcePixels int64, classes int) int64 {
	if !o.probabilistic() {
		return 0
	}
	n := modelPixels * int64(classes) * 4
	if o.tta {
		n *= 2
	}
	if o.probs != "" {
		n += sourcePixels * int64(classes) * 4
	}
	return n
}

// writeProbs writes one image's class probabilities (K planes of w x h),
// scaled to ow x oh (bilinear, align_corners=False), as stem_probK.png
// (16-bit gray, 65535 = 1) or stem_probs.npy (float32, K x oh x ow), and
// returns the file names.
func writeProbs(dir, stem, format string, probs []float32, k, w, h, ow, oh int) ([]string, error) {
	planes := make([]float32, 0, k*ow*oh)
	for c := range k {
		planes = append(planes, resizePlane(probs[c*w*h:(c+1)*w*h], w, h, ow, oh)...)
	}
	if format == "npy" {
		name := stem + "_probs.npy"
		return []string{name}, writeNpy(filepath.Join(dir, name), planes, k, oh, ow)
	}
	var names []string
	for c := range k {
		img := image.NewGray16(image.Rect(0, 0, ow, oh))
		for i, v := range planes[c*ow*oh : (c+1)*ow*oh] {
			q := uint16(math.Round(float64(min(max(v, 0), 1)) * 65535))
			img.Pix[2*i], img.Pix[2*i+1] = uint8(q>>8), uint8(q)
		}
		name := fmt.Sprintf("%s_prob%d.png", stem, c)
		if err := writePNG(filepath.Join(dir, name), img); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// resizePlane scales a w x h plane to ow x oh bilinearly, PyTorch's
// align_corners=False (source coordinates clamped to the plane).
func resizePlane(src []float32, w, h, ow, oh int) []float32 {
	if w == ow && h == oh {
		return src
	}
	out := make([]float32, ow*oh)
	coord := func(d, n, on int) (int, int, float64) {
		x := max((float64(d)+0.5)*float64(n)/float64(on)-0.5, 0)
		x0 := min(int(x), n-1)
		return x0, min(x0+1, n-1), x - float64(x0)
	}
	for y := range oh {
		y0, y1, fy := coord(y, h, oh)
		for x := range ow {
			x0, x1, fx := coord(x, w, ow)
			top := float64(src[y0*w+x0])*(1-fx) + float64(src[y0*w+x1])*fx
			bot := float64(src[y1*w+x0])*(1-fx) + float64(src[y1*w+x1])*fx
			out[y*ow+x] = float32(top*(1-fy) + bot*fy)
		}
	}
	return out
}

// writeNpy writes data as a NumPy .npy file (format 1.0, little-endian
// float32, C order) of the given shape.
func writeNpy(path string, data []float32, shape ...int) error {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s,), }", strings.Join(dims, ", "))
	// magic (6) + version (2) + length (2) + header + newline: a multiple of 64
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	buf := make([]byte, 0, 10+len(header)+4*len(data))
	buf = append(buf, "\x93NUMPY\x01\x00"...)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(header)))
	buf = append(buf, header...)
	for _, v := range data {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	return os.WriteFile(path, buf, 0o644)
}
