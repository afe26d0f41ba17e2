package predict

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
)

// journalCommand heads predict's journal (outdir.StartJournal): a journal
// of another command is never taken for a prediction's.
const journalCommand = "memunet predict"

// Run predicts input (an image file, a directory of them, or
// dataset:<split>) into outDir: the masks and the outputs opts asks for,
// legend.png (each class's color) and predict.json (the returned report).
// note gets what the user should know as it happens (a renamed output, a
// large batch); p.Warn (else note) an input file skipped for its name.
//
// The inputs are read and named before anything is written. outDir may
// not be the input folder or inside it (nor the dataset's folder), is
// held with outdir.Acquire for the whole call, and must be empty or hold
// only an earlier prediction (finished, or cut off: see clearFolder),
// which opts.Force replaces; every file is written whole and never
// through a link planted there, and is listed in the folder's
// outdir.Journal before it is written. predict.json comes last: a folder
// holding one without a journal holds a finished prediction. A predict
// that fails midway, or is stopped (p.Stop), removes what it wrote, and
// the folder if it made it; one killed leaves its journal, naming what it
// wrote.
func (p *Predictor) Run(input, outDir string, opts Options, lim Limits, note io.Writer) (*Report, error) {
	if note == nil {
		note = io.Discard
	}
	note = aboveBar{p, note}
	opts = opts.WithDefaults(p.Config.Predict)
	if opts.Probs != "" && opts.Probs != "png" && opts.Probs != "npy" {
		return nil, fmt.Errorf("predict: --probs %q: png or npy", opts.Probs)
	}
	s, err := p.sizingOf(opts.Resize)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	if opts.ensemble = len(p.members) > 0; opts.ensemble {
		fmt.Fprintf(note, "predict: an ensemble of %d checkpoints, all in the pool: each mask is the argmax of the mean of their probabilities\n", p.Ensemble())
	}
	if opts.keep, err = keepClasses(opts.KeepLargest, p.Config.Model.Classes, p.Config.Data.Background); err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	opts.Resize = s.mode
	if s.mode == "fixed" {
		opts.Resize = fmt.Sprintf("%dx%d", s.h, s.w)
	}
	names := newNamer(opts, p.Config.Model.Classes)
	warn := note
	if p.Warn != nil {
		warn = aboveBar{p, p.Warn}
	}
	if err := p.checkReferences(input, opts); err != nil {
		return nil, err
	}
	var files []sizedFile
	var skipped []Skipped
	var split *splitInput
	if name, ok := strings.CutPrefix(input, "dataset:"); ok {
		if s.mode != ResizeAuto {
			return nil, fmt.Errorf("predict: --resize applies to image files; --input %s is predicted as training prepared it", input)
		}
		if split, err = p.openSplit(name, opts, lim); err != nil {
			return nil, fmt.Errorf("predict: --input %s: %w", input, err)
		}
	} else {
		if files, skipped, err = p.sizeFiles(input, s, names, warn); err != nil {
			return nil, err
		}
	}
	if err := checkVolumeReferences(files, opts); err != nil {
		return nil, err
	}
	if err := p.checkOutside(input, split != nil, outDir); err != nil {
		return nil, err
	}
	lock, err := outdir.Acquire(outDir, "memunet predict")
	if err != nil {
		return nil, err
	}
	defer lock.Clear() // no lock file stays beside the results; a folder made for a refused predict goes
	if err := p.clearFolder(outDir, opts.Force); err != nil {
		return nil, err
	}
	journal, err := outdir.StartJournal(outDir, journalCommand)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	// Tiles asked for (--tile N or auto, or predict.tile) are a choice of
	// each file's full resolution: no note of its size (issue 49).
	if msg := p.sizeNote(files, s); msg != "" && (opts.Tile == "" || opts.Tile == TileNone) {
		fmt.Fprintln(note, msg)
	}
	names.flush(note)
	rep := p.newReport(input, opts, lim)
	p.held = p.holdGC()
	defer func() { p.held.release(); p.held = nil }()
	rep.Skipped = skipped
	if split != nil {
		err = p.predictSplit(split, journal, opts, lim, names, rep)
		names.flush(note)
	} else {
		err = p.predictFiles(files, s, journal, opts, lim, note, rep)
	}
	if err == nil {
		err = p.stopped() // a signal after the last image: still no predict.json
	}
	if err == nil {
		err = p.finish(journal, rep)
	}
	if err == nil {
		err = journal.Finish()
	}
	if err != nil {
		// The folder was empty under the lock: what is in it is this
		// run's (its journal included), and a half prediction would be
		// mistaken for one.
		journal.Close()
		removeWritten(outDir)
		return nil, err
	}
	return rep, nil
}

// checkReferences refuses opts.References where it cannot score: a
// dataset split (scored by its own masks), a 2D model, one mask file for
// a folder of volumes.
func (p *Predictor) checkReferences(input string, opts Options) error {
	refs := opts.References
	if refs == "" {
		return nil
	}
	if strings.HasPrefix(input, "dataset:") {
		return fmt.Errorf("predict: --references scores NIfTI volumes; --input %s is scored by its dataset's own masks", input)
	}
	if !p.Config.Model.Volumes() {
		return fmt.Errorf("predict: --references scores the NIfTI volumes a 3D UNet (model.dims 3) predicts; this checkpoint's model is 2D")
	}
	rs, err := os.Stat(refs)
	if err != nil {
		return fmt.Errorf("predict: --references: %w", err)
	}
	if is, err := os.Stat(input); err == nil && is.IsDir() && !rs.IsDir() {
		return fmt.Errorf("predict: --references %s is one mask and --input %s a folder; give a folder of masks, one per volume, named as the volumes", refs, input)
	}
	return nil
}

// checkVolumeReferences finds every volume's reference mask
// (opts.References) and compares its size with the volume's, from their
// headers, so that a missing or mismatched one late in a folder is refused
// before the volumes ahead of it are predicted.
func checkVolumeReferences(files []sizedFile, opts Options) error {
	if opts.References == "" {
		return nil
	}
	for _, f := range files {
		in, err := data.OpenVolumeStream(f.path)
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		ref, _, err := openReference(f, in.Volume, opts)
		in.Close()
		if err != nil {
			return err
		}
		ref.Close()
	}
	return nil
}

// removeWritten removes the files in dir but its lock: what a failed
// predict wrote into a folder that was empty when it took the lock. The
// journal goes last: until then it names what is left, should a second
// signal or SIGKILL end the process midway.
func removeWritten(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if name := e.Name(); name != outdir.LockName && name != outdir.JournalName && e.Type().IsRegular() {
			os.Remove(filepath.Join(dir, name))
		}
	}
	os.Remove(filepath.Join(dir, outdir.JournalName))
}

// checkOutside refuses an output folder that is the input folder (or the
// dataset's) or inside it: predicting would write over the inputs.
func (p *Predictor) checkOutside(input string, split bool, outDir string) error {
	in, what := input, "--input"
	if split {
		if p.Config.Data.Source == data.SourceSynthetic || p.Config.Data.Path == "" {
			return nil
		}
		in, what = p.Config.Data.Path, "the dataset's data.path"
	}
	if outdir.Within(outDir, in) {
		return fmt.Errorf("predict: --out %s is %s %s or inside it: predicting would write over the inputs; choose a folder outside it", outDir, what, in)
	}
	return nil
}

func (p *Predictor) newReport(input string, opts Options, lim Limits) *Report {
	rep := &Report{Input: input, Precision: p.precision, Options: opts, Batch: p.Batch, Device: p.Device.Backend.Name(), CapacityBytes: lim.Capacity}
	var unlike []string
	if opts.TTA {
		unlike = append(unlike, "--tta averages each image's probabilities with its mirror's, which training's validation does not")
	}
	if train := p.Config.Train.Precision; p.precision != train {
		unlike = append(unlike, fmt.Sprintf("it ran in %s, training validated in %s", p.precision, train))
	}
	rep.UnlikeTraining = strings.Join(unlike, "; ")
	if ck := p.Checkpoint; ck != nil {
		rep.Checkpoint, rep.Step, rep.TrainingValMIoU = ck.Dir, ck.Manifest.Step, ck.Manifest.ValMIoU
		rep.MaskValues = p.writtenValues(opts)
	}
	rep.Members = p.memberList()
	return rep
}

// finish writes legend.png and predict.json, claimed in the journal.
func (p *Predictor) finish(journal *outdir.Journal, rep *Report) error {
	rep.PeakAllocatedBytes = p.Pool().Stats().Allocated.Peak
	if _, peak, ok := memlimit.Resident(); ok {
		rep.PeakRSSBytes = peak
	}
	labels := make([]string, p.Config.Model.Classes)
	for k := range labels {
		e := LegendEntry{Class: k, Color: data.HexColor(data.ClassColor(uint8(k)))}
		labels[k] = fmt.Sprintf("class %d", k)
		if k < len(p.Config.Data.ClassNames) {
			e.Name = p.Config.Data.ClassNames[k]
			labels[k] = fmt.Sprintf("%d %s", k, e.Name)
		}
		if rep.MaskValues != nil {
			e.Value = &rep.MaskValues[k]
			labels[k] += fmt.Sprintf(" (mask value %d)", *e.Value)
		}
		rep.Legend = append(rep.Legend, e)
	}
	if err := journal.Claim(runfiles.Legend, runfiles.PredictReport); err != nil {
		return err
	}
	if err := outdir.WritePNG(filepath.Join(journal.Dir(), runfiles.Legend), data.Legend(labels)); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return outdir.WriteBytes(filepath.Join(journal.Dir(), runfiles.PredictReport), append(js, '\n'))
}

// maxReportBytes bounds an earlier predict.json read back.
const maxReportBytes = 64 << 20

// clearFolder makes dir ready for a prediction: an empty folder is; one
// holding an earlier prediction, finished or cut off (a killed predict's
// journal), is refused unless force, which removes that prediction's own
// files (those its predict.json or journal lists, legend.png, predict.json
// and the journal) and nothing else; one holding any other file is
// refused, so that predict never mixes its files with what it did not
// write, nor deletes them. A temporary file outdir.WriteFile left
// unfinished (.NAME.tmp-*, from a killed process) is removed: it is never
// anyone's result.
func (p *Predictor) clearFolder(dir string, force bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	var temps []string // removed only once the folder is taken: a refused one keeps everything
	for _, e := range entries {
		switch name := e.Name(); {
		case name == outdir.LockName:
		case outdir.IsTemp(name) && e.Type().IsRegular():
			temps = append(temps, name)
		default:
			present[name] = true
		}
	}
	if len(present) == 0 {
		return removeAll(dir, temps)
	}
	ours, cutOff, err := earlierOutputs(dir)
	if err != nil {
		return err
	}
	var others []string
	for name := range present {
		if !ours[name] {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	switch {
	case ours == nil:
		return fmt.Errorf("predict: --out %s already holds %d files (e.g. %s) and no prediction: predict into a new or empty folder%s",
			dir, len(present), anyName(present), p.again(", e.g. ", freshSibling(dir)))
	case cutOff && !force:
		what := fmt.Sprintf("predict: --out %s holds a prediction that was cut off (its predict was killed; %d files, listed in %s)",
			dir, len(present)-len(others)-1, filepath.Join(dir, outdir.JournalName))
		if p.Flags == nil {
			return fmt.Errorf("%s: predict into a new --out folder, or add --force to replace it", what)
		}
		return fmt.Errorf("%s: replace it with %s, or predict into a new folder with %s", what, p.ReplaceCommand(dir), p.again("", freshSibling(dir)))
	case !force:
		if p.Flags == nil {
			return fmt.Errorf("predict: --out %s already holds a prediction (%s): predict into a new --out folder, or add --force to replace it", dir, runfiles.PredictReport)
		}
		return fmt.Errorf("predict: --out %s already holds a prediction (%s): replace it with %s, or predict into a new folder with %s",
			dir, runfiles.PredictReport, p.ReplaceCommand(dir), p.again("", freshSibling(dir)))
	case len(others) > 0:
		return fmt.Errorf("predict: --force replaces only an earlier prediction's files, and --out %s also holds %d others (e.g. %s): choose another --out%s",
			dir, len(others), others[0], p.again(", e.g. ", freshSibling(dir)))
	}
	// predict.json and the journal last: until then they name what is left,
	// should this process be killed midway.
	var names, last []string
	for _, name := range slices.Sorted(maps.Keys(present)) {
		if name == runfiles.PredictReport || name == outdir.JournalName {
			last = append(last, name)
		} else {
			names = append(names, name)
		}
	}
	return removeAll(dir, slices.Concat(temps, names, last))
}

// removeAll removes the files names of dir, in order.
func removeAll(dir string, names []string) error {
	for _, name := range names {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("predict: clearing --out: %w", err)
		}
	}
	return nil
}

// again is prefix and the same predict into out (with more), as a command
// to paste; "" when p.Flags are not known.
func (p *Predictor) again(prefix, out string, more ...string) string {
	if p.Flags == nil {
		return ""
	}
	inv := config.Invocation{Program: p.Config.Invocation.Program}
	return prefix + inv.Run("predict", append(append(slices.Clip(p.Flags), "--out", out), more...)...)
}

// ReplaceCommand is the same predict into out with --force, which
// replaces the prediction there, finished or cut off; "" when p.Flags are
// not known.
func (p *Predictor) ReplaceCommand(out string) string { return p.again("", out, "--force") }

// freshSibling is dir-2 (or -3, ...): a folder beside dir that does not
// exist yet.
func freshSibling(dir string) string {
	for n := 2; ; n++ {
		next := fmt.Sprintf("%s-%d", strings.TrimRight(dir, string(filepath.Separator)), n)
		if _, err := os.Lstat(next); os.IsNotExist(err) {
			return next
		}
	}
}

// earlierOutputs is the set of files an earlier prediction in dir wrote,
// from its predict.json and from the journal of one cut off (cutOff); nil
// when dir holds neither.
func earlierOutputs(dir string) (ours map[string]bool, cutOff bool, err error) {
	var names []string
	u, err := outdir.ReadJournal(dir)
	if err != nil {
		return nil, false, fmt.Errorf("predict: --out %w", err)
	}
	if cutOff = u != nil && u.Command == journalCommand; cutOff {
		names = append(names, u.Files...)
	}
	path := filepath.Join(dir, runfiles.PredictReport)
	b, err := infile.ReadFile(path, maxReportBytes)
	if errors.Is(err, os.ErrNotExist) && !cutOff {
		return nil, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) { // a finished prediction, or one killed as it finished
		var prev Report
		if err == nil {
			err = json.Unmarshal(b, &prev)
		}
		if err != nil {
			return nil, false, fmt.Errorf("predict: --out holds %s, which cannot be read (%v): choose another --out", path, err)
		}
		for _, o := range prev.Outputs {
			names = append(names, o.files()...)
		}
	}
	ours = map[string]bool{runfiles.PredictReport: true, runfiles.Legend: true}
	if cutOff {
		ours[outdir.JournalName] = true
	}
	for _, name := range names {
		if filepath.Base(name) == name {
			ours[name] = true
		}
	}
	return ours, cutOff, nil
}

// anyName is one of names, the first in sorted order.
func anyName(names map[string]bool) string {
	first := ""
	for n := range names {
		if first == "" || n < first {
			first = n
		}
	}
	return first
}
