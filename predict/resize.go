package predict

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/memunet/memunet/config"
)

// Resize modes of image files (Options.Resize).
const (
	// ResizeAuto prepares a file as training prepared its images:
	// data.resize, else the file's size times data.scale.
	ResizeAuto = "auto"
	// ResizeTrain gives every file to the model at training's size.
	ResizeTrain = "train"
	// ResizeNone gives every file at its own size.
	ResizeNone = "none"
)

// sizing is Options.Resize parsed: a mode, and for a fixed size (HxW) the
// size.
type sizing struct {
	mode string // ResizeAuto, ResizeTrain, ResizeNone or "fixed"
	h, w int
}

// sizingOf parses Options.Resize ("" is auto) and checks it against the
// model: a fixed size or training's must be one the model takes.
func (p *Predictor) sizingOf(resize string) (sizing, error) {
	s := sizing{mode: resize}
	switch resize {
	case "", ResizeAuto:
		s.mode = ResizeAuto
		return s, nil
	case ResizeNone:
		return s, nil
	case ResizeTrain:
		if s.h, s.w = p.TrainingSize(); s.h == 0 {
			return s, fmt.Errorf("--resize train: training's image size is unknown (the checkpoint does not record it and its data.path cannot be read); give --resize HxW")
		}
	default:
		hs, ws, ok := strings.Cut(strings.ToLower(resize), "x")
		h, herr := strconv.Atoi(hs)
		w, werr := strconv.Atoi(ws)
		if !ok || herr != nil || werr != nil || h < 1 || w < 1 {
			return s, fmt.Errorf("--resize %q: want train, none, auto or HEIGHTxWIDTH such as 256x384", resize)
		}
		s.mode, s.h, s.w = "fixed", h, w
	}
	if err := p.Net.CheckInput(p.Config.Model.InChannels, s.h, s.w); err != nil {
		return s, fmt.Errorf("--resize %s: %w", resize, err)
	}
	return s, nil
}

// fixed reports whether the model's input size does not depend on the
// file's: every file is scaled to it.
func (s sizing) fixed(cfg config.Config) bool {
	return s.mode == "fixed" || s.mode == ResizeTrain || s.mode == ResizeAuto && len(cfg.Data.Resize) == 2
}

// modelSize is the size an h x w file is given to the model at.
func (s sizing) modelSize(cfg config.Config, h, w int) (int, int) {
	switch s.mode {
	case "fixed", ResizeTrain:
		return s.h, s.w
	case ResizeNone:
		return roundSide(cfg, float64(h)), roundSide(cfg, float64(w))
	}
	return inputSize(cfg, h, w)
}

// inputSize is the size an h x w image is given to the model at as
// training prepared its images: data.resize, else the image's size times
// data.scale, each side rounded to the nearest multiple of 2^model.depth
// (at least one).
func inputSize(cfg config.Config, h, w int) (int, int) {
	if r := cfg.Data.Resize; len(r) == 2 {
		return r[0], r[1]
	}
	scale := 1.0
	if cfg.Data.Scale > 0 {
		scale = cfg.Data.Scale
	}
	return roundSide(cfg, float64(h)*scale), roundSide(cfg, float64(w)*scale)
}

// roundSide is a side rounded to the nearest multiple of 2^model.depth, at
// least one.
func roundSide(cfg config.Config, v float64) int {
	f := float64(int(1) << cfg.Model.Depth)
	return int(max(f, math.Round(v/f)*f))
}

// TrainingSize is the (height, width) the model saw in training: the
// checkpoint's record of its data, else what the data configuration gives
// (data.resize, the synthetic size, the first file's header); 0, 0 when
// neither tells.
func (p *Predictor) TrainingSize() (h, w int) {
	if ck := p.Checkpoint; ck != nil && ck.Manifest.Data != nil && ck.Manifest.Data.Height > 0 {
		return ck.Manifest.Data.Height, ck.Manifest.Data.Width
	}
	return p.Config.ImageSize()
}

// sizeNote says how many files the model takes at another size than
// training's (auto sizing only: the other modes are the user's choice),
// with the first of them and what --resize offers; "" when none.
func (p *Predictor) sizeNote(files []sizedFile, s sizing) string {
	th, tw := p.TrainingSize()
	if s.mode != ResizeAuto || th == 0 || len(p.Config.Data.Patch) == 2 {
		return "" // a data.patch model trained at the files' own scale
	}
	var first *sizedFile
	n := 0
	for i := range files {
		if !isVolume(files[i].path) && (files[i].th != th || files[i].tw != tw) {
			if first == nil {
				first = &files[i]
			}
			n++
		}
	}
	if first == nil {
		return ""
	}
	return fmt.Sprintf("predict: %d of %d images go to the model at another size than training's %dx%d (first: %s, %dx%d, at %dx%d): "+
		"objects at another scale than training's may be segmented worse; --resize train scales every image to %dx%d (as --resize %dx%d does: any HEIGHTxWIDTH may be given), --resize none keeps each image's size and silences this",
		n, len(files), th, tw, first.path, first.h, first.w, first.th, first.tw, th, tw, th, tw)
}
