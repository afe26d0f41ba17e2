package crossval

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
)

// CV is cv.json: each fold's final validation, and over the folds the
// mean and the standard deviation (sample, n-1) of each score.
type CV struct {
	Folds int `json:"folds"`
	// Classes names the classes of ClassDice (data.class_names, else
	// "class K").
	Classes []string `json:"classes"`
	Runs    []Fold   `json:"fold_runs"`
	Mean    Scores   `json:"mean"`
	Std     Scores   `json:"std"`
}

// Fold is one fold's run: its folder in the cross-validation's, its steps
// and its final validation's scores.
type Fold struct {
	Fold  int    `json:"fold"`
	Dir   string `json:"dir"`
	Steps int    `json:"steps"`
	Scores
}

// Scores are the scores cross-validation compares: a run's last
// validation, or their mean or standard deviation over the folds.
// ClassDice is each class's Dice, null where the class was in neither
// the masks nor the predictions (in every fold, for the mean), as
// metrics.ClassScore has it.
type Scores struct {
	ValLoss   metrics.Loss `json:"val_loss"`
	ValMIoU   float64      `json:"val_miou"`
	ValDice   float64      `json:"val_dice"`
	ValMIoUFG float64      `json:"val_miou_fg"`
	ValDiceFG float64      `json:"val_dice_fg"`
	ClassDice []*float64   `json:"class_dice"`
}

// add records fold f's summary.
func (cv *CV) add(f int, sum *rundir.Summary, names []string) {
	v := sum.Validation
	s := Scores{ValLoss: v.ValLoss, ValMIoU: v.ValMIoU, ValDice: v.ValDice, ValMIoUFG: v.ValMIoUFG, ValDiceFG: v.ValDiceFG}
	for k, c := range v.PerClass {
		s.ClassDice = append(s.ClassDice, c.Dice)
		if len(cv.Classes) <= k {
			name := fmt.Sprintf("class %d", k)
			if k < len(names) {
				name = names[k]
			}
			cv.Classes = append(cv.Classes, name)
		}
	}
	cv.Runs = append(cv.Runs, Fold{Fold: f, Dir: runfiles.FoldDir(f), Steps: sum.Steps, Scores: s})
}

// finish sets the means and standard deviations over the folds.
func (cv *CV) finish() {
	stat := func(get func(Scores) *float64) (mean, std *float64) {
		var xs []float64
		for _, r := range cv.Runs {
			if x := get(r.Scores); x != nil {
				xs = append(xs, *x)
			}
		}
		if len(xs) == 0 {
			return nil, nil
		}
		m, s := meanStd(xs)
		return &m, &s
	}
	set := func(get func(Scores) *float64, mean, std *float64) {
		m, s := stat(get)
		*mean, *std = *m, *s
	}
	m, s := &cv.Mean, &cv.Std
	loss, lossStd := float64(0), float64(0)
	set(func(x Scores) *float64 { v := float64(x.ValLoss); return &v }, &loss, &lossStd)
	m.ValLoss, s.ValLoss = metrics.Loss(loss), metrics.Loss(lossStd)
	set(func(x Scores) *float64 { return &x.ValMIoU }, &m.ValMIoU, &s.ValMIoU)
	set(func(x Scores) *float64 { return &x.ValDice }, &m.ValDice, &s.ValDice)
	set(func(x Scores) *float64 { return &x.ValMIoUFG }, &m.ValMIoUFG, &s.ValMIoUFG)
	set(func(x Scores) *float64 { return &x.ValDiceFG }, &m.ValDiceFG, &s.ValDiceFG)
	m.ClassDice, s.ClassDice = make([]*float64, len(cv.Classes)), make([]*float64, len(cv.Classes))
	for k := range cv.Classes {
		m.ClassDice[k], s.ClassDice[k] = stat(func(x Scores) *float64 {
			if k < len(x.ClassDice) {
				return x.ClassDice[k]
			}
			return nil
		})
	}
}

// meanStd is xs' mean and sample standard deviation (0 for one value).
func meanStd(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// write writes cv.json whole (outdir.WriteBytes).
func (cv *CV) write(path string) error {
	b, err := json.MarshalIndent(cv, "", "  ")
	if err != nil {
		return err
	}
	return outdir.WriteBytes(path, append(b, '\n'))
}

// Print writes the folds' table: a row per fold and the mean and standard
// deviation over them, then each class's Dice per fold with its mean and
// standard deviation.
func (cv *CV) Print(w io.Writer) {
	num := func(x float64) string {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprintf("%10s", "-")
		}
		return fmt.Sprintf("%10.4f", x)
	}
	row := func(label, steps string, s Scores) {
		fmt.Fprintf(w, "%-6s %7s %s %s %s %s %s\n", label, steps, num(float64(s.ValLoss)), num(s.ValMIoU), num(s.ValDice), num(s.ValMIoUFG), num(s.ValDiceFG))
	}
	fmt.Fprintf(w, "%-6s %7s %10s %10s %10s %10s %10s\n", "fold", "steps", "val_loss", "val_miou", "val_dice", "miou_fg", "dice_fg")
	for _, r := range cv.Runs {
		row(fmt.Sprint(r.Fold), fmt.Sprint(r.Steps), r.Scores)
	}
	row("mean", "", cv.Mean)
	row("std", "", cv.Std)
	if len(cv.Classes) == 0 {
		return
	}
	width := len("Dice")
	for _, c := range cv.Classes {
		width = max(width, len(c))
	}
	head := []string{fmt.Sprintf("%-*s", width, "Dice")}
	for _, r := range cv.Runs {
		head = append(head, fmt.Sprintf("%8s", fmt.Sprintf("fold %d", r.Fold)))
	}
	fmt.Fprintln(w, strings.Join(append(head, fmt.Sprintf("%8s", "mean"), fmt.Sprintf("%8s", "std")), " "))
	opt := func(x *float64) string {
		if x == nil {
			return fmt.Sprintf("%8s", "-")
		}
		return fmt.Sprintf("%8.4f", *x)
	}
	for k, name := range cv.Classes {
		cells := []string{fmt.Sprintf("%-*s", width, name)}
		for _, r := range cv.Runs {
			var d *float64
			if k < len(r.ClassDice) {
				d = r.ClassDice[k]
			}
			cells = append(cells, opt(d))
		}
		cells = append(cells, opt(cv.Mean.ClassDice[k]), opt(cv.Std.ClassDice[k]))
		fmt.Fprintln(w, strings.Join(cells, " "))
	}
}
