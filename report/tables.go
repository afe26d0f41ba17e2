package report

// The text tables the commands print.

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/train"
)

// PrintPhaseTable writes a run's peak allocated bytes per phase of a step
// (forward, backward, optimizer), split by category at each phase's peak
// (summary.json's peak_by_phase: category or "total" to bytes).
func PrintPhaseTable(w io.Writer, peakByPhase map[string]map[string]int64) {
	cats := memory.Categories()
	fmt.Fprintf(w, "%-10s", "peak")
	for _, c := range cats {
		fmt.Fprintf(w, " %12s", c)
	}
	fmt.Fprintf(w, " %12s\n", "total")
	for _, phase := range []string{train.PhaseForward, train.PhaseBackward, train.PhaseOptimizer} {
		row, ok := peakByPhase[phase]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "%-10s", phase)
		for _, c := range cats {
			fmt.Fprintf(w, " %12s", memory.FormatBytes(row[c.String()]))
		}
		fmt.Fprintf(w, " %12s\n", memory.FormatBytes(row["total"]))
	}
}

// PrintClassTable writes each class's IoU and Dice and its pixels in the
// masks and the predictions; a class in neither is shown as absent (it is
// left out of the means). Classes with names (data.class_names) are shown
// by name too.
func PrintClassTable(w io.Writer, scores []metrics.ClassScore) {
	if len(scores) == 0 {
		return
	}
	width := 0
	for _, s := range scores {
		width = max(width, len(s.Name))
	}
	label := func(s metrics.ClassScore) string {
		if width == 0 {
			return fmt.Sprintf("%-6d", s.Class)
		}
		return fmt.Sprintf("%-6d %-*s", s.Class, width, s.Name)
	}
	fmt.Fprintf(w, "%-*s %8s %8s %14s %14s\n", len(label(scores[0])), "class", "IoU", "Dice", "target px", "predicted px")
	for _, s := range scores {
		if !s.Present() {
			fmt.Fprintf(w, "%s %8s %8s %14d %14d  (in neither masks nor predictions: not in the means)\n", label(s), "absent", "-", 0, 0)
			continue
		}
		fmt.Fprintf(w, "%s %8.4f %8.4f %14d %14d\n", label(s), *s.IoU, *s.Dice, s.TargetPixels, s.PredictedPixels)
	}
}

// PrintValidationTable writes a line per run: its steps, validations, last
// and best val mIoU and the step of the best (compare --runs).
func PrintValidationTable(w io.Writer, names []string, runs []Curves) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tsteps\tvalidations\tlast val miou\tbest val miou\tat step\t")
	for i, c := range runs {
		steps := 0
		if n := len(c.Steps); n > 0 {
			steps = int(c.Steps[n-1])
		}
		if len(c.MIoU) == 0 {
			fmt.Fprintf(tw, "%s\t%d\t0\t-\t-\t-\t\n", names[i], steps)
			continue
		}
		best := 0
		for j, m := range c.MIoU {
			if m > c.MIoU[best] {
				best = j
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%.4f\t%d\t\n", names[i], steps, len(c.MIoU), c.MIoU[len(c.MIoU)-1], c.MIoU[best], int(c.ValSteps[best]))
	}
	return tw.Flush()
}
