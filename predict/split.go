package predict

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
)

// splitInput is a dataset split to predict: the checkpoint's dataset (or
// the one its data.* keys name), opened.
type splitInput struct {
	name string // val, train or test
	ds   data.Dataset
	idx  []int
	need Need // a batch's, planned before the dataset was opened
	// whole is a data.patch checkpoint's images, whole: scored by tiles,
	// as its training validated (scoreSplitTiled); nil otherwise.
	whole data.ImageSource
}

// openSplit plans a batch of the split's samples (from data.ProbeSize,
// before a file is read) and refuses with a *SplitSizeError what cannot
// fit lim; then it opens the dataset. A size the probe cannot tell (a
// train/ val/ test/ layout) is planned once the set is open, and one
// above data.MaxImagePixels is not planned: opening refuses the file by
// name.
func (p *Predictor) openSplit(name string, opts Options, lim Limits) (*splitInput, error) {
	switch {
	case len(p.members) > 0:
		return nil, fmt.Errorf("an ensemble of %d checkpoints scores no split of a dataset: each fold of a cross-validation validates on samples the others trained on; score each checkpoint alone (memunet eval), or predict held-out images as files", p.Ensemble())
	case opts.keep != nil:
		return nil, fmt.Errorf("--keep-largest applies to image files and volumes; a split is scored as training validated it")
	}
	h, w, err := data.ProbeSize(p.Config.DataConfig())
	if d, _, _, derr := data.ProbeShape(p.Config.DataConfig()); derr == nil && p.Config.Model.Volumes() {
		p.depth = d // a 3D UNet's samples: d slices stacked in h
	}
	planned := err == nil && int64(h)*int64(w) <= data.MaxImagePixels
	var need Need
	if planned {
		if need, err = p.planSplit(name, h, w, opts, lim); err != nil {
			return nil, err
		}
	}
	ds, idx, err := p.Split(name)
	if err != nil {
		return nil, err
	}
	if err := p.checkRunSplit(name, ds, idx); err != nil {
		return nil, err
	}
	if whole, ok := data.WholeImages(ds); ok { // each image is planned as it is tiled
		return &splitInput{name: name, ds: ds, idx: idx, whole: whole}, nil
	}
	if dh, dw := ds.Size(); !planned || dh != h || dw != w {
		if need, err = p.planSplit(name, dh, dw, opts, lim); err != nil {
			return nil, err
		}
	}
	return &splitInput{name: name, ds: ds, idx: idx, need: need}, nil
}

// SplitSizeError refuses a split whose batches cannot fit.
type SplitSizeError struct {
	Split   string
	N, H, W int
	// Why is what the need is and the limit it passes; Advice what fits.
	Why, Advice string
}

func (e *SplitSizeError) Error() string {
	return fmt.Sprintf("batches of %d images of %dx%d (height x width) need %s. %s", e.N, e.H, e.W, e.Why, e.Advice)
}

// planSplit plans a batch of p.Batch h x w samples; one that does not fit
// lim is a *SplitSizeError naming the batch or the size that would.
func (p *Predictor) planSplit(split string, h, w int, opts Options, lim Limits) (Need, error) {
	plan := func(n, h, w int) (Need, error) {
		need, err := p.PlanBatch(n, h, w, 0, false)
		host := p.splitHost(n, h, w, opts)
		need.Host = host + gcSlack(host)
		return need, err
	}
	need, err := plan(p.Batch, h, w)
	if err != nil {
		return Need{}, err
	}
	why := lim.exceeded(need)
	if why == "" {
		return need, nil
	}
	fits := func(nd Need) string {
		if lim.Capacity > 0 {
			return "a pool peak of " + memory.FormatBytes(nd.PeakAllocated) + " allocated"
		}
		return "about " + memory.FormatBytes(nd.Total())
	}
	e := &SplitSizeError{Split: split, N: p.Batch, H: h, W: w, Why: why}
	for n := p.Batch / 2; n >= 1 && e.Advice == ""; n /= 2 {
		if nd, err := plan(n, h, w); err == nil && lim.exceeded(nd) == "" {
			e.Advice = fmt.Sprintf("--batch %d fits (it needs %s).", n, fits(nd))
		}
	}
	multiple := 1 << p.Config.Model.Depth
	for k := 1; k <= 8 && e.Advice == ""; k++ {
		sh, sw := h>>k/multiple*multiple, w>>k/multiple*multiple
		if sh == 0 || sw == 0 {
			break
		}
		if nd, err := plan(1, sh, sw); err == nil && lim.exceeded(nd) == "" {
			e.Advice = fmt.Sprintf("Even one image does not fit; one of %dx%d does (it needs %s): data.resize=[%d, %d] with --batch 1.", sh, sw, fits(nd), sh, sw)
		}
	}
	if e.Advice == "" {
		e.Advice = "Even one image at 1/256 of its size would not fit: use a machine with more memory."
	}
	return Need{}, e
}

// predictSplit predicts a dataset split, preprocessed exactly as in
// training, writes its outputs into the journal's folder (each claimed
// there first) and reports the metrics in rep. Each output is named after its sample's source file (folder, voc),
// or <split>-<index> for synthetic data.
func (p *Predictor) predictSplit(in *splitInput, journal *outdir.Journal, opts Options, lim Limits, names *namer, rep *Report) error {
	if in.whole == nil { // a whole image's tiles are planned as it is tiled
		rep.plan(in.need, p.held.hold(in.need))
	}
	src, _ := data.SourceImages(in.ds)
	if in.whole != nil {
		src = in.whole
	}
	each := func(i int, pred, _ []uint8, probs []float32, h, w int) error {
		input := fmt.Sprintf("dataset:%s[%d]", in.name, i)
		name := names.name(input, data.SampleName(in.ds, i), fmt.Sprintf("%s-%05d", in.name, i))
		out, dir := outputOf(input, name, opts, p.Config.Model.Classes), journal.Dir()
		if src == nil {
			out.Overlay = "" // nothing to draw it over
		}
		if err := journal.Claim(out.files()...); err != nil {
			return err
		}
		if err := writeMask(filepath.Join(dir, out.Mask), pred, w, h, rep.MaskValues); err != nil {
			return err
		}
		if out.Probs != nil {
			if err := writeProbs(dir, out.Probs, probs, p.Config.Model.Classes, w, h, w, h); err != nil {
				return err
			}
		}
		if out.Overlay != "" {
			img, _, err := src.Image(i)
			if err != nil {
				return err
			}
			if err := outdir.WritePNG(filepath.Join(dir, out.Overlay), data.Overlay(img, pred, w, h)); err != nil {
				return err
			}
		}
		rep.Outputs = append(rep.Outputs, out)
		return nil
	}
	m, err := p.scoreSplit(in, opts, lim, rep, each)
	if err != nil {
		return err
	}
	rep.Metrics, rep.Images = &m, len(in.idx)
	return nil
}

// scoreSplit predicts the split's samples (from probabilities with
// probabilistic, flip-averaged with tta) and calls each with every
// sample's classes, its true ones and, where computed, probabilities.
func (p *Predictor) scoreSplit(in *splitInput, opts Options, lim Limits, rep *Report, each func(i int, pred, target []uint8, probs []float32, h, w int) error) (metrics.Validation, error) {
	if in.whole != nil {
		return p.scoreSplitTiled(in, opts, lim, rep, each)
	}
	h, w := in.ds.Size()
	if opts.probabilistic() {
		return p.PredictSplitProbs(in.ds, in.idx, opts.TTA, func(i int, pred, target []uint8, probs []float32) error { return each(i, pred, target, probs, h, w) })
	}
	return p.PredictSplit(in.ds, in.idx, func(i int, pred, target []uint8) error { return each(i, pred, target, nil, h, w) })
}

// Score scores the checkpoint on a split of its dataset (of another one,
// where its data.* keys were changed) as training's validation computes
// the scores, flip-averaged with tta: eval. The batch is planned first
// and refused with a *SplitSizeError when it cannot fit lim. It returns
// the scores and the number of samples.
func (p *Predictor) Score(split string, tta bool, lim Limits) (metrics.Validation, int, error) {
	return p.score(split, tta, lim, nil, nil)
}

// score is Score noting its plans in rep (where not nil), with each
// case's scores where cases is not nil.
func (p *Predictor) score(split string, tta bool, lim Limits, rep *Report, cases *CaseReport) (metrics.Validation, int, error) {
	in, err := p.openSplit(split, Options{TTA: tta}, lim)
	if err != nil {
		return metrics.Validation{}, 0, err
	}
	if rep != nil && in.whole == nil {
		rep.plan(in.need, p.held.hold(in.need))
	}
	opts := Options{TTA: tta, Overlap: -1}.WithDefaults(p.Config.Predict)
	cs := newCaseScorer(in.ds, p.Config.Model.Classes, int(p.Config.Data.Background))
	v, err := p.scoreSplit(in, opts, lim, rep, func(i int, pred, target []uint8, _ []float32, h, w int) error {
		if cases != nil {
			cs.add(i, pred, target, h, w)
		}
		return nil
	})
	if err == nil && cases != nil {
		*cases = cs.report()
	}
	return v, len(in.idx), err
}

// checkRunSplit compares a split's samples with those the checkpoint's
// run trained and validated on (its split.json, where it has one), so
// that eval never scores other samples than the run's without saying so:
// a split that differs is an error naming the first sample that does.
// Data overrides (eval --set data.*) skip it: they ask for other data.
func (p *Predictor) checkRunSplit(name string, ds data.Dataset, idx []int) error {
	if p.dataChanged || p.Checkpoint == nil || (name != "val" && name != "train") {
		return nil
	}
	run := checkpoint.RunDirOf(p.Checkpoint.Dir)
	if run == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(run, runfiles.Split))
	if err != nil {
		return nil // a run from before split.json, or a copied checkpoint
	}
	var saved data.SplitNames
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(run, runfiles.Split), err)
	}
	want := saved.Val
	if name == "train" {
		want = saved.Train
	}
	got := data.SampleNames(ds, idx)
	if slices.Equal(got, want) {
		return nil
	}
	first := ""
	for k := range min(len(got), len(want)) {
		if got[k] != want[k] {
			first = fmt.Sprintf("; the first that differs: %s, was %s", got[k], want[k])
			break
		}
	}
	return fmt.Errorf("the %s split has %d samples and the run's (%s) had %d%s: the data changed since training; to score this data anyway, name it with --set data.path=...",
		name, len(got), filepath.Join(run, runfiles.Split), len(want), first)
}
