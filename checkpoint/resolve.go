package checkpoint

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
)

// Listed is a checkpoint directory with what its manifest says about it.
type Listed struct {
	Entry
	Serial  int
	ValMIoU *float64
	// ScoreValue and Monitor: the train.monitor score (newer manifests)
	ScoreValue *float64
	Monitor    string
	Readable   bool // the manifest parsed; the data files are not verified here
}

// ListRun lists parent's checkpoints, the readable ones ordered by serial
// (the order they were written in), then the unreadable ones (a manifest
// that is missing, not a regular file, over MaxManifestBytes or not JSON
// with a serial from 1 to MaxCount).
func ListRun(parent string) ([]Listed, error) {
	list, err := List(parent)
	if err != nil {
		return nil, err
	}
	out := make([]Listed, 0, len(list))
	for _, e := range list {
		ce := Listed{Entry: e}
		if b, err := infile.ReadFile(filepath.Join(e.Path, runfiles.Manifest), MaxManifestBytes); err == nil {
			var m struct {
				Serial  int      `json:"serial"`
				ValMIoU *float64 `json:"val_miou"`
				Score   *float64 `json:"score"`
				Monitor string   `json:"monitor"`
			}
			// A serial past MaxCount (a forged one) would overflow the next one's.
			if json.Unmarshal(b, &m) == nil && m.Serial > 0 && int64(m.Serial) <= MaxCount {
				ce.Serial, ce.ValMIoU, ce.Readable = m.Serial, m.ValMIoU, true
				ce.ScoreValue, ce.Monitor = m.Score, m.Monitor
			}
		}
		out = append(out, ce)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Readable != out[j].Readable {
			return out[i].Readable
		}
		return out[i].Serial < out[j].Serial
	})
	return out, nil
}

// Latest is the most recently written checkpoint in a checkpoints
// directory ("" when there is none). A directory whose manifest cannot be
// read may be newer: then it refuses and names it.
func Latest(parent string) (string, error) {
	list, err := ListRun(parent)
	if err != nil {
		return "", err
	}
	var newest *Listed
	for i := range list {
		if list[i].Readable {
			newest = &list[i]
		}
	}
	for _, e := range list {
		if !e.Readable && (newest == nil || e.Step >= newest.Step) {
			_, err := OpenDir(e.Path)
			if err == nil {
				err = fmt.Errorf("checkpoint %s: its manifest has no serial number", e.Path)
			}
			other := ""
			if newest != nil {
				other = fmt.Sprintf("; the newest readable one is %s: pass it to --resume to continue from it", newest.Path)
			}
			return "", fmt.Errorf("%w (it may be the newest checkpoint in %s%s)", err, parent, other)
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.Path, nil
}

// ResolveResume turns --resume's argument into a checkpoint directory:
// "auto" is the newest checkpoint in outDir/checkpoints ("" when there is
// none: start from scratch); a path is a checkpoint directory, or a run or
// checkpoints directory whose newest checkpoint is meant.
func ResolveResume(arg, outDir string) (string, error) {
	if arg == "auto" {
		if outDir == "" {
			return "", fmt.Errorf("--resume auto needs the run directory (--out DIR or output.dir) whose %s/ to continue from", runfiles.Checkpoints)
		}
		return Latest(filepath.Join(outDir, runfiles.Checkpoints))
	}
	if _, err := os.Stat(filepath.Join(arg, runfiles.Manifest)); err == nil {
		return arg, nil
	}
	for _, parent := range []string{filepath.Join(arg, runfiles.Checkpoints), arg} {
		if list, _ := List(parent); len(list) > 0 {
			return Latest(parent)
		}
	}
	return arg, nil // Open says what is wrong with it
}

// ResolveBest turns a --checkpoint argument into a checkpoint directory for
// using a model: a checkpoint directory itself, or in a run (or
// checkpoints) directory the one with the best val_miou (the newest when
// none was validated).
func ResolveBest(arg string) (string, error) {
	if _, err := os.Stat(filepath.Join(arg, runfiles.Manifest)); err == nil {
		return arg, nil
	}
	for _, parent := range []string{filepath.Join(arg, runfiles.Checkpoints), arg} {
		list, _ := ListRun(parent)
		if best := Best(list); best != nil {
			return best.Path, nil
		}
		if len(list) > 0 {
			return Latest(parent)
		}
	}
	return arg, nil // Open says what is wrong with it
}

// OpenModel opens the checkpoint a --checkpoint argument names for using
// its model (predict, eval, export): ResolveBest's, or with newest the
// newest one there (ResolveResume's). A list of them (Members) is refused:
// predict opens an ensemble's one by one.
func OpenModel(arg string, newest bool) (*Checkpoint, error) {
	list, err := Members(arg)
	if err != nil {
		return nil, err
	}
	if len(list) > 1 {
		return nil, fmt.Errorf("--checkpoint %s names %d checkpoints, an ensemble, which memunet predict averages; this command takes one", arg, len(list))
	}
	resolve := ResolveBest
	if newest {
		resolve = func(arg string) (string, error) { return ResolveResume(arg, "") }
	}
	dir, err := resolve(arg)
	if err != nil {
		return nil, err
	}
	return Open(dir)
}

// Members are the checkpoints a --checkpoint argument names: arg itself;
// a finished memunet cv folder (its cv.json present) names its folds'
// runs, fold_0, fold_1, ... as many as cv.json's folds; where arg holds
// commas and no file or folder is named so, each of its comma-separated
// parts (an ensemble: memunet predict --checkpoint fold_0,fold_1,...),
// spaces around them trimmed, empty ones left out. A cv folder whose
// cv.json is unreadable, that lacks a fold, or that has no cv.json yet
// (unfinished) is an error saying so.
func Members(arg string) ([]string, error) {
	if _, err := os.Lstat(filepath.Join(arg, runfiles.CrossValidation)); err == nil {
		return cvFolds(arg)
	}
	if cv := CrossValFilesIn(arg); len(cv) > 0 && len(RunFilesIn(arg)) == 0 {
		return nil, fmt.Errorf("--checkpoint %s is a memunet cv folder without its %s (%s): its cross-validation has not finished; finish it with memunet cv --out %s (its --config, --folds and --set), or name its folds' runs: %s",
			arg, runfiles.CrossValidation, strings.Join(cv, ", "), arg, filepath.Join(arg, runfiles.FoldDir(0))+",...")
	}
	if _, err := os.Lstat(arg); err == nil || !strings.Contains(arg, ",") {
		return []string{arg}, nil
	}
	var list []string
	for _, part := range strings.Split(arg, ",") {
		if part = strings.TrimSpace(part); part != "" {
			list = append(list, part)
		}
	}
	if len(list) == 0 {
		return []string{arg}, nil
	}
	return list, nil
}

// cvFolds are the fold folders of the cv folder dir, as many as its
// cv.json says, each of which must be there.
func cvFolds(dir string) ([]string, error) {
	var cv struct {
		Folds int `json:"folds"`
	}
	file := filepath.Join(dir, runfiles.CrossValidation)
	b, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(b, &cv)
	}
	if err == nil && cv.Folds < 2 {
		err = fmt.Errorf("folds is %d, not 2 or more", cv.Folds)
	}
	if err != nil {
		return nil, fmt.Errorf("--checkpoint %s: %s is not a memunet cv's (%v): run memunet cv --out %s again to write it, or name the folds' runs: %s",
			dir, file, err, dir, filepath.Join(dir, runfiles.FoldDir(0))+",...")
	}
	var folds []string
	for k := range cv.Folds {
		d := filepath.Join(dir, runfiles.FoldDir(k))
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--checkpoint %s: its %s lists %d folds, and %s is missing or not a folder: restore it (memunet cv --out %s trains it again), or name the folds' runs there are, comma-separated",
				dir, runfiles.CrossValidation, cv.Folds, d, dir)
		}
		folds = append(folds, d)
	}
	return folds, nil
}

// Best is the readable checkpoint with the best train.monitor score (as
// its manifest records it; val_miou in checkpoints from before the score
// was recorded), the first written on a tie, or nil when none was
// validated. Checkpoints of another monitor than the newest's are passed
// over.
func Best(list []Listed) *Listed {
	monitor := ""
	for i := len(list) - 1; i >= 0 && monitor == ""; i-- {
		if _, m := list[i].Score(); list[i].Readable && m != "" {
			monitor = m
		}
	}
	var best *Listed
	var bestScore *float64
	for i := range list {
		s, m := list[i].Score()
		if !list[i].Readable || m == "" || m != monitor {
			continue
		}
		if metrics.Beats(monitor, s, bestScore, 0) {
			best, bestScore = &list[i], &s
		}
	}
	return best
}

// Score is the entry's recorded score and its monitor ("" for none).
func (e Listed) Score() (float64, string) {
	switch {
	case e.ScoreValue != nil && e.Monitor != "":
		return *e.ScoreValue, e.Monitor
	case e.ValMIoU != nil:
		return *e.ValMIoU, "val_miou"
	}
	return 0, ""
}

// RunDirOf is the run directory a checkpoint belongs to (the folder above
// its checkpoints/), or "" for a checkpoint that is not in one.
func RunDirOf(ckDir string) string {
	parent := filepath.Dir(filepath.Clean(ckDir))
	if filepath.Base(parent) != runfiles.Checkpoints {
		return ""
	}
	return filepath.Dir(parent)
}

// CheckOutside refuses an output path that would overwrite a checkpoint or
// a run file: anything inside ckDir, inside its run's checkpoints/, or one
// of the run's own files (config.yaml, metrics.jsonl, summary.json,
// timeline.json), links resolved; and, as CheckNotInRun, any other run's.
func CheckOutside(out, ckDir string) error {
	if outdir.Within(out, ckDir) {
		return fmt.Errorf("%s is inside the checkpoint %s being read: name a file outside it", out, ckDir)
	}
	if run := RunDirOf(outdir.Resolve(ckDir)); run != "" {
		if outdir.Within(out, filepath.Join(run, runfiles.Checkpoints)) {
			return fmt.Errorf("%s is inside the run's %s/, which holds its checkpoints: name a file outside it", out, runfiles.Checkpoints)
		}
		o := outdir.Resolve(out)
		for _, name := range RunFiles() {
			if o == filepath.Join(run, name) {
				return fmt.Errorf("%s is the run's own %s: name another file", out, name)
			}
		}
	}
	return CheckNotInRun(out)
}

// CheckNotInRun refuses an output path, of a command that reads no
// checkpoint (bench's profile, data preview), that would replace what any
// run holds: one of a run directory's own files (RunFiles), or anything
// inside its checkpoints/ or tb/, links resolved. A run directory is one
// that holds two or more of RunFiles, checkpoints/ and tb/ counting only
// if not empty (RunFilesIn; a lone config.yaml is not a run). It also
// refuses a path inside one of inputs, the folders the command reads (""
// is none), and, before any work, one that is a device, a FIFO or a
// socket (outdir.CheckTarget), which a write would replace or feed.
func CheckNotInRun(out string, inputs ...string) error {
	if err := outdir.CheckTarget(out, outdir.FileOrFolder); err != nil {
		return err
	}
	for _, in := range inputs {
		if in != "" && outdir.Within(out, in) {
			return fmt.Errorf("%s is inside %s, which it reads: name a file outside it", out, in)
		}
	}
	o := outdir.Resolve(out)
	if name := filepath.Base(o); slices.Contains(RunFiles(), name) && holdsRun(filepath.Dir(o)) {
		return fmt.Errorf("%s is the own %s of the run in %s: name another file", out, name, filepath.Dir(o))
	}
	for dir := filepath.Dir(o); filepath.Dir(dir) != dir; dir = filepath.Dir(dir) {
		if name := filepath.Base(dir); (name == runfiles.Checkpoints || name == runfiles.TensorBoard) && holdsRun(filepath.Dir(dir)) {
			return fmt.Errorf("%s is inside the %s/ of the run in %s: name a file outside it", out, name, filepath.Dir(dir))
		}
	}
	return nil
}

// holdsRun reports whether dir holds two or more of RunFiles.
func holdsRun(dir string) bool { return len(RunFilesIn(dir)) >= 2 }

// RunFilesIn lists the run files dir holds, in RunFiles order: a link as
// it is (the best link even where its checkpoint is gone), a folder only if
// it has entries and then with their count ("checkpoints/ (2 entries)").
func RunFilesIn(dir string) []string {
	var out []string
	for _, name := range RunFiles() {
		path := filepath.Join(dir, name)
		st, err := os.Lstat(path)
		if err != nil {
			continue
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			out = append(out, name)
			continue
		}
		if st.IsDir() {
			entries, err := os.ReadDir(path)
			if err != nil || len(entries) == 0 {
				continue
			}
			name += fmt.Sprintf("/ (%d entries)", len(entries))
		}
		out = append(out, name)
	}
	return out
}

// CrossValFilesIn lists what makes dir a memunet cv folder: its cv.json
// and the fold_K folders that hold a run's files.
func CrossValFilesIn(dir string) []string {
	var out []string
	if _, err := os.Lstat(filepath.Join(dir, runfiles.CrossValidation)); err == nil {
		out = append(out, runfiles.CrossValidation)
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		k, err := strconv.Atoi(strings.TrimPrefix(de.Name(), "fold_"))
		if err == nil && runfiles.FoldDir(k) == de.Name() && len(RunFilesIn(filepath.Join(dir, de.Name()))) > 0 {
			out = append(out, de.Name()+"/")
		}
	}
	return out
}

// RunFiles are the files and folder that make a directory hold a run: what
// train refuses to start over (without --force) and no output may replace.
func RunFiles() []string {
	return []string{runfiles.Config, runfiles.Split, runfiles.Metrics, runfiles.Summary, runfiles.Timeline, runfiles.Checkpoints, runfiles.TensorBoard, runfiles.Best}
}

// DerivedFiles are the outputs other commands made from a run inside its
// directory, by their default names (eval/, predict/ and exports named
// model-step-*): train --force deletes them with the run, so that no
// report or mask of the earlier run sits beside the new one.
func DerivedFiles(dir string) []string {
	var out []string
	for _, name := range []string{runfiles.Eval, runfiles.Predict} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			out = append(out, name)
		}
	}
	exports, _ := filepath.Glob(filepath.Join(dir, runfiles.ExportGlob))
	for _, e := range exports {
		out = append(out, filepath.Base(e))
	}
	return out
}
