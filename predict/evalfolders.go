package predict

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/runfiles"
)

// FolderEval is eval of a folder of predicted masks against a folder of
// reference masks (nnU-Net's evaluate_folder): the cases matched by file
// name, each label value a class, scored per case (CaseReport).
type FolderEval struct {
	Predictions string `json:"predictions"`
	References  string `json:"references"`
	// Labels are the label values found in the references and the
	// predictions, ascending: class k is Labels[k]; Background is the
	// value the means without background leave out (0), -1 where no mask
	// holds it.
	Labels     []int `json:"labels"`
	Background int   `json:"background"`
	CaseReport
}

// maskExts are the mask files a folder eval reads beside NIfTI.
var maskExts = []string{".png", ".gif", ".tif", ".tiff"}

// maskStem is a mask file's name without its extension ("" for a file
// that is no mask).
func maskStem(name string) string {
	if data.IsNIfTIName(name) {
		return strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".nii")
	}
	if ext := strings.ToLower(filepath.Ext(name)); slices.Contains(maskExts, ext) {
		return strings.TrimSuffix(name, filepath.Ext(name))
	}
	return ""
}

// masksIn maps the mask files of dir by stem.
func masksIn(dir string) (map[string]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, de := range des {
		if s := maskStem(de.Name()); s != "" && de.IsDir() {
			return nil, fmt.Errorf("%s is a folder named as a mask: move it out of %s, or rename it", filepath.Join(dir, de.Name()), dir)
		}
		if s := maskStem(de.Name()); s != "" {
			if other, dup := out[s]; dup {
				return nil, fmt.Errorf("%s and %s are both case %s; keep one", other, filepath.Join(dir, de.Name()), s)
			}
			out[s] = filepath.Join(dir, de.Name())
		}
	}
	return out, nil
}

// EvaluateFolders scores the masks in preds against those of the same
// name in refs (NIfTI volumes, with their spacing, or mask images):
// every reference needs a prediction; a prediction without a reference
// (predict's legend.png, an overlay) is left out. Background is label 0.
func EvaluateFolders(preds, refs string) (FolderEval, error) {
	fe := FolderEval{Predictions: preds, References: refs, Background: -1}
	p, err := masksIn(preds)
	if err != nil {
		return fe, fmt.Errorf("eval: --predictions: %w", err)
	}
	r, err := masksIn(refs)
	if err != nil {
		return fe, fmt.Errorf("eval: --references: %w", err)
	}
	if len(r) == 0 {
		return fe, fmt.Errorf("eval: --references %s holds no masks (.nii, .nii.gz, %s)", refs, strings.Join(maskExts, ", "))
	}
	type pair struct{ pred, ref data.LabelMap }
	cases := map[string]pair{}
	seen := map[int]bool{}
	for _, c := range slices.Sorted(maps.Keys(r)) {
		if p[c] == "" {
			return fe, fmt.Errorf("eval: %s has no prediction in %s (looked for %s.nii[.gz] or %s.png ...)", r[c], preds, c, c)
		}
		pm, err := data.ReadLabels(p[c])
		if err != nil {
			return fe, fmt.Errorf("eval: %w", err)
		}
		rm, err := data.ReadLabels(r[c])
		if err != nil {
			return fe, fmt.Errorf("eval: %w", err)
		}
		if pm.Dims != rm.Dims {
			return fe, fmt.Errorf("eval: %s is %v and its reference %s %v; a prediction has its reference's size", p[c], pm.Dims, r[c], rm.Dims)
		}
		for _, m := range []data.LabelMap{pm, rm} {
			for _, v := range m.Values {
				seen[int(v)] = true
			}
		}
		cases[c] = pair{pm, rm}
	}
	fe.Labels = slices.Sorted(maps.Keys(seen))
	if len(fe.Labels) > int(metrics.Ignore) {
		return fe, fmt.Errorf("eval: the masks hold %d label values; at most %d are scored", len(fe.Labels), metrics.Ignore)
	}
	class := map[uint16]uint8{}
	for k, v := range fe.Labels {
		class[uint16(v)] = uint8(k)
		if v == 0 {
			fe.Background = k
		}
	}
	sc := &caseScorer{classes: len(fe.Labels), background: fe.Background}
	for _, c := range slices.Sorted(maps.Keys(cases)) {
		cp := cases[c]
		pred, ref := make([]uint8, len(cp.pred.Values)), make([]uint8, len(cp.ref.Values))
		for k := range pred {
			pred[k], ref[k] = class[cp.pred.Values[k]], class[cp.ref.Values[k]]
		}
		sc.cases = append(sc.cases, metrics.ScoreCase(c, pred, ref, cp.ref.Dims, cp.ref.Spacing, sc.classes, sc.background))
	}
	fe.CaseReport = sc.report()
	return fe, nil
}

// WriteFile writes fe as indented JSON to path and its cases as CSV to
// CasesCSV(path).
func (fe FolderEval) WriteFile(path string) error {
	return writeReport(path, fe, fe.CaseReport, len(fe.Labels))
}

// Print writes the means over cases: per label value its Dice, IoU and
// HD95 (and over how many cases each is defined), then the mean Dice with
// and without the background.
func (fe FolderEval) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "label\tDice\tIoU\tHD95\tcases\t")
	num := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.4f", *v)
	}
	for k, cm := range fe.PerClass {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t\n", fe.Labels[k], num(cm.Dice), num(cm.IoU), num(cm.HD95), cm.DiceCases)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d cases: mean Dice %s, without the background (label 0) %s\n", len(fe.Cases), num(fe.MeanDice), num(fe.MeanDiceFG))
	return err
}

// EvalFolders is eval --predictions --references: per-case Dice, IoU and
// HD95 of a folder of masks, written to out (default
// <predictions>/eval.json) and its CSV, the means printed to w. given
// are the flags given (names without --): one of a checkpoint's eval is
// refused.
func EvalFolders(preds, refs, out string, given []string, w io.Writer) error {
	if preds == "" || refs == "" {
		return fmt.Errorf("eval: --predictions and --references go together: a folder of predicted masks and one of references")
	}
	var other []string
	for _, f := range given {
		if !slices.Contains([]string{"predictions", "references", "out"}, f) {
			other = append(other, "--"+f)
		}
	}
	if len(other) > 0 {
		return fmt.Errorf("eval: --predictions and --references score masks already predicted, without a checkpoint; %s: a checkpoint's eval flags: drop them, or drop --predictions and --references to score a checkpoint",
			strings.Join(other, ", "))
	}
	if base := filepath.Base(out); out != "" && (maskStem(base) != "" || slices.Contains([]string{".jpg", ".jpeg"}, strings.ToLower(filepath.Ext(base)))) {
		return fmt.Errorf("eval: --out %s names an image or mask file, which the JSON report would replace (or, in --references, add as a case): name the report .json, e.g. --out %s",
			out, filepath.Join(filepath.Dir(out), runfiles.FolderEval))
	}
	fe, err := EvaluateFolders(preds, refs)
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(preds, runfiles.FolderEval)
	}
	if err := fe.WriteFile(out); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if err := fe.Print(w); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "wrote %s and %s\n", out, CasesCSV(out))
	return err
}
