package predict

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/metrics"
)

// caseScorer gathers a split's predictions case by case, as nnU-Net scores
// them: an image or a volume sample is its own case; the slices of a
// nifti volume (consecutive samples of one case, in z order) are stacked
// into it. Each case is scored (metrics.ScoreCase) once its last sample
// is in, so that it holds one case's voxels at a time.
type caseScorer struct {
	ds         data.Dataset
	depth      int // a volume sample's slices (data.DepthOf), 1 for images
	classes    int
	background int
	cur        data.Case
	pred, ref  []uint8
	slices     int
	h, w       int
	cases      []metrics.CaseScore
}

func newCaseScorer(ds data.Dataset, classes, background int) *caseScorer {
	return &caseScorer{ds: ds, depth: data.DepthOf(ds), classes: classes, background: background}
}

// add takes sample i's predicted and true classes (h x w; a volume's
// slices stacked).
func (s *caseScorer) add(i int, pred, ref []uint8, h, w int) {
	c := data.CaseOf(s.ds, i)
	if s.slices > 0 && (c.Name != s.cur.Name || c.Depth == 1 || h != s.h || w != s.w) {
		s.flush()
	}
	s.cur, s.h, s.w = c, h, w
	s.pred, s.ref = append(s.pred, pred[:h*w]...), append(s.ref, ref[:h*w]...)
	s.slices++
}

// flush scores the case gathered so far.
func (s *caseScorer) flush() {
	if s.slices == 0 {
		return
	}
	dims := [3]int{s.w, s.h / s.depth, s.depth * s.slices} // x, y, z: a volume sample's slices, or the stacked ones
	s.cases = append(s.cases, metrics.ScoreCase(s.cur.Name, s.pred, s.ref, dims, s.cur.Spacing, s.classes, s.background))
	s.pred, s.ref, s.slices = s.pred[:0], s.ref[:0], 0
}

// CaseReport is eval's per-case scores: each case's, each class's mean
// over the cases, and the mean over cases of their means with and
// without the background.
type CaseReport struct {
	Cases      []metrics.CaseScore `json:"cases"`
	PerClass   []metrics.ClassMean `json:"per_class_over_cases"`
	MeanDice   *float64            `json:"mean_dice_over_cases"`
	MeanDiceFG *float64            `json:"mean_dice_fg_over_cases"`
}

// report is the cases scored, the last one flushed.
func (s *caseScorer) report() CaseReport {
	s.flush()
	r := CaseReport{Cases: s.cases}
	r.PerClass, r.MeanDice, r.MeanDiceFG = metrics.CaseMeans(s.cases, s.classes)
	return r
}

// WriteCSV writes one row per case: its name, then per class its Dice,
// IoU, HD95 and reference and predicted voxels (empty where undefined),
// then the case's mean Dice with and without the background.
func (r CaseReport) WriteCSV(w io.Writer, classes int) error {
	cw := csv.NewWriter(w)
	head := []string{"case"}
	for c := range classes {
		for _, k := range []string{"dice", "iou", "hd95", "reference_voxels", "predicted_voxels"} {
			head = append(head, fmt.Sprintf("class%d_%s", c, k))
		}
	}
	cw.Write(append(head, "mean_dice", "mean_dice_fg"))
	num := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'g', 8, 64)
	}
	for _, cs := range r.Cases {
		row := []string{cs.Case}
		for _, cc := range cs.Classes {
			row = append(row, num(cc.Dice), num(cc.IoU), num(cc.HD95), strconv.FormatInt(cc.RefVoxels, 10), strconv.FormatInt(cc.PredVoxels, 10))
		}
		cw.Write(append(row, num(cs.MeanDice), num(cs.MeanDiceFG)))
	}
	cw.Flush()
	return cw.Error()
}

// CasesCSV is the per-case CSV written beside an eval report.
func CasesCSV(report string) string { return strings.TrimSuffix(report, ".json") + "-cases.csv" }
