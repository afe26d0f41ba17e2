package predict

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/metrics"
)

// PredictSplitInto predicts the checkpoint's own validation (or training,
// or test) samples, preprocessed exactly as in training, writes their
// outputs into outDir and reports the metrics in rep. Each output is named
// after its sample's source file (folder, voc), or <split>-<index> for
// synthetic data.
func (p *Predictor) PredictSplitInto(split, outDir string, opts Options, lim Limits, rep *Report) error {
	ds, idx, err := p.Split(split)
	if err != nil {
		return fmt.Errorf("predict: --input dataset:%s: %w", split, err)
	}
	h, w := ds.Size()
	need, err := p.PlanBatch(min(p.Batch, len(idx)), h, w, 0, opts.Overlay)
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
		out := Output{Input: fmt.Sprintf("dataset:%s[%d]", split, i), Mask: name + ".png"}
		if err := writeMask(filepath.Join(outDir, out.Mask), pred, w, h, rep.MaskValues); err != nil {
			return err
		}
		if opts.Probs != "" {
			var err error
			if out.Probs, err = writeProbs(outDir, name, opts.Probs, probs, p.Config.Model.Classes, w, h, w, h); err != nil {
				return err
			}
		}
		if opts.Overlay && src != nil {
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
		m, err = p.PredictSplitProbs(ds, idx, opts.TTA, func(i int, pred, _ []uint8, probs []float32) error { return each(i, pred, probs) })
	} else {
		m, err = p.PredictSplit(ds, idx, func(i int, pred, _ []uint8) error { return each(i, pred, nil) })
	}
	if err != nil {
		return err
	}
	rep.Metrics, rep.Images = &m, len(idx)
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
