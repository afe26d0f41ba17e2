package report

// The text tables the commands print.

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/predict"
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

// BenchTable is memunet bench's table: a row per variant as it is
// measured, aligned when Finish writes it.
type BenchTable struct {
	w        io.Writer
	tw       *tabwriter.Writer
	peak     float64
	winograd bool     // a row may have taken Winograd's way (Finish says what that means for GFLOP/s)
	counts   []string // each counted row's device work, for Finish
}

// NewBenchTable starts bench's table; peak is the FMA peak in GFLOP/s
// that the "% peak" column is a share of (0: none measured, shown as "-").
func NewBenchTable(w io.Writer, peak float64) *BenchTable {
	t := &BenchTable{w: w, tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight), peak: peak}
	head := []string{"variant", "micro x acc", "step ms", "GFLOP/s", "% peak"}
	for k := range model.NumKinds {
		head = append(head, k.String())
	}
	fmt.Fprintln(t.tw, strings.Join(append(head, "optimizer", "other"), "\t")+"\t")
	return t
}

// Row adds the measured row of the variant name.
func (t *BenchTable) Row(name string, r train.BenchRow) {
	ms := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	share := "-"
	if t.peak > 0 {
		share = fmt.Sprintf("%.0f", 100*r.GFLOPs/t.peak)
	}
	t.winograd = t.winograd || r.Winograd
	if r.Counted {
		t.counts = append(t.counts, fmt.Sprintf("  %s: %.1f kernel launches, %.1f blocking copies to the host, %.1f waits for all work",
			name, r.LaunchesPerStep, r.CopiesPerStep, r.SyncsPerStep))
	}
	cells := []string{name, r.Variant, ms(r.StepMS), ms(r.GFLOPs), share}
	for _, v := range r.KindMS {
		cells = append(cells, ms(v))
	}
	fmt.Fprintln(t.tw, strings.Join(append(cells, ms(r.OptimizerMS), ms(r.OtherMS)), "\t")+"\t")
}

// Failed adds a row saying why the variant name did not run.
func (t *BenchTable) Failed(name string, err error) {
	fmt.Fprintf(t.tw, "%s\t%s\t\n", name, err)
}

// Finish writes the table and what its per-kind columns mean.
func (t *BenchTable) Finish() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(t.w, "per-kind columns: ms per optimizer step, mean over the timed steps; other = data, gradient sums and bookkeeping.")
	if err == nil && t.winograd {
		_, err = fmt.Fprintln(t.w, "GFLOP/s counts every 3x3 convolution's direct FLOPs; where model.conv_algo (auto, winograd) takes Winograd's way it multiplies 2.25x fewer, so % peak can pass 100.")
	}
	if err == nil && len(t.counts) > 0 {
		_, err = fmt.Fprintf(t.w, "device work per optimizer step, mean over the timed steps:\n%s\n", strings.Join(t.counts, "\n"))
	}
	return err
}

// Wrap joins words into lines of at most width columns (a longer word
// stays whole on its own line), the first after first, the others after
// indent; each line ends in a newline.
func Wrap(words []string, width int, first, indent string) string {
	var b strings.Builder
	line := first
	empty := true
	for _, w := range words {
		if !empty && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line += w
		empty = false
	}
	b.WriteString(line + "\n")
	return b.String()
}

// PrintPredicted is predict's summary of rep, written into outDir: what
// was predicted with which checkpoint, the memory beside its plan, and for
// a dataset split its scores beside training's, with the per-class table.
func PrintPredicted(w io.Writer, rep *predict.Report, outDir string) {
	fmt.Fprintf(w, "predicted %d images with %s (step %d, %s) into %s (legend.png: the class colors); %s%s\n",
		rep.Images, rep.Checkpoint, rep.Step, rep.Precision, outDir, rep.MemoryNote(), rep.SkippedNote())
	m := rep.Metrics
	if m == nil {
		return
	}
	fmt.Fprintf(w, "%s: loss %.4f  pixel acc %.4f  miou %.4f  dice %.4f", rep.Input, m.ValLoss, m.ValPixelAcc, m.ValMIoU, m.ValDice)
	if rep.TrainingValMIoU != nil {
		fmt.Fprintf(w, "  (training's val miou at step %d: %.4f", rep.Step, *rep.TrainingValMIoU)
		if rep.UnlikeTraining != "" {
			fmt.Fprintf(w, "; they differ as %s", rep.UnlikeTraining)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	PrintClassTable(w, m.PerClass)
}
