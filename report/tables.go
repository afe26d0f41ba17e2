package report

// The text tables the commands print.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/memunet/memunet/bench"
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

// PrintBench writes memunet bench's table of one process's result: a row
// per variant (its median step, the spread of its steps, GFLOP/s and their
// share of the FMA peak's best sample, ms per layer kind), what the
// columns mean, the peak's samples, whether the machine held its speed,
// and where the device counts its work, that work per step.
func PrintBench(w io.Writer, r bench.Result) error {
	median, least, most := r.Peak()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"variant", "micro x acc", "step ms", "min..max", "GFLOP/s", "% peak", "conv % peak"}
	for k := range model.NumKinds {
		head = append(head, k.String())
	}
	fmt.Fprintln(tw, strings.Join(append(head, "optimizer", "other"), "\t")+"\t")
	ms := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	var counts, waits []string
	winograd, unbounded := false, false
	share := func(gflops float64, mayWinograd bool) string {
		p, ok := r.Share(gflops, mayWinograd)
		switch {
		case most <= 0 || gflops <= 0:
			return "-"
		case !ok:
			unbounded = true
			return "?"
		}
		return fmt.Sprintf("%.0f", p)
	}
	for _, row := range r.Rows {
		if row.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t\n", row.Name, row.Error)
			continue
		}
		winograd = winograd || row.Winograd
		if row.LoopWaitMS > 0 {
			waits = append(waits, fmt.Sprintf("%s %.1f ms (%.0f%%)", row.Name, row.LoopWaitMS, 100*row.LoopWaitMS/row.StepMS))
		}
		if row.Counted {
			line := fmt.Sprintf("  %s: %.1f kernel launches, %.1f blocking copies to the host, %.1f blocking uploads, %.1f waits for all work",
				row.Name, row.LaunchesPerStep, row.CopiesPerStep, row.BlockingUploadsPerStep, row.SyncsPerStep)
			if row.StepsPerRead > 1 {
				line += fmt.Sprintf(" (steps queue on the device, read once every %d: output.log_every)", row.StepsPerRead)
			}
			counts = append(counts, line)
		}
		cells := []string{row.Name, row.Variant, ms(row.StepMS), ms(row.StepMSMin) + ".." + ms(row.StepMSMax), ms(row.GFLOPs),
			share(row.GFLOPs, row.Winograd), share(row.ConvGFLOPs, row.Winograd)}
		for _, v := range row.KindMS {
			cells = append(cells, ms(v))
		}
		fmt.Fprintln(tw, strings.Join(append(cells, ms(row.OptimizerMS), ms(row.OtherMS)), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	lines := []string{"step ms: the median timed step, min..max the fastest and slowest; per-kind columns: ms per optimizer step, mean over the timed steps; other = data, gradient sums and bookkeeping.",
		"conv % peak: the convolutions' FLOPs over their own time (conv forward + conv backward), of the peak."}
	if len(r.PeakSamples) > 0 {
		lines = append(lines, fmt.Sprintf("%% peak: of the FMA peak's best, %.1f GFLOP/s, of %d samples taken between the variants (%.1f..%.1f, median %.1f; %s micro-kernel from L1 on %d cores): load only slows a sample",
			most, len(r.PeakSamples), least, most, median, r.Kernel, r.Cores))
	}
	if winograd {
		lines = append(lines, fmt.Sprintf("GFLOP/s counts every 3x3 convolution's direct FLOPs; where model.conv_algo (auto, winograd) takes Winograd's way it multiplies up to %gx fewer, so %% peak can pass 100.", bench.WinogradGain))
	}
	if unbounded {
		lines = append(lines, "?: more than the arithmetic allows of the peak's best sample: the machine was slower while the peak was sampled than while the steps ran.")
	}
	if spread, ok := r.Steady(); !ok || unbounded {
		lines = append(lines, fmt.Sprintf("unsteady: the peak's samples differ by %.2fx, so this machine's speed changed while the bench ran (another process, or the host's other guests): compare variants within one run, or use --repeat.", spread))
	}
	if len(waits) > 0 {
		lines = append(lines, "loop wait per optimizer step, the calling core idle at the parallel loops' ends until the other cores finish (imbalance, or a core the host took away): "+strings.Join(waits, ", ")+".")
	}
	if len(counts) > 0 {
		lines = append(lines, "device work per optimizer step, mean over the timed steps:\n"+strings.Join(counts, "\n"))
	}
	_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}

// PrintBenchRepeats writes bench --repeat's summary of results, one a
// process: each variant's median step and the FMA peak's best sample and
// spread in every process, how many processes ran on an unsteady machine,
// then each variant's fastest, median and slowest process and their
// ratio, which a machine whose speed is set per process (two modes) shows
// far from 1.
func PrintBenchRepeats(w io.Writer, results []bench.Result) error {
	if len(results) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var names []string
	for _, row := range results[0].Rows {
		if row.Error == "" {
			names = append(names, row.Name)
		}
	}
	waits := slices.ContainsFunc(results, func(r bench.Result) bool {
		return slices.ContainsFunc(r.Rows, func(row bench.Row) bool { return row.LoopWaitMS > 0 })
	})
	head := append(append([]string{"process"}, names...), "peak GFLOP/s", "peak spread")
	if waits {
		head = append(head, "loop wait")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	unsteady := 0
	steps := make([][]float64, len(names))
	for i, r := range results {
		cells := []string{fmt.Sprint(i + 1)}
		var stepSum, waitSum float64
		for j, name := range names {
			cell := "-"
			for _, row := range r.Rows {
				if row.Name == name && row.Error == "" {
					cell = fmt.Sprintf("%.1f", row.StepMS)
					steps[j] = append(steps[j], row.StepMS)
					stepSum, waitSum = stepSum+row.StepMS, waitSum+row.LoopWaitMS
				}
			}
			cells = append(cells, cell)
		}
		peak, spread := "-", "-"
		if _, _, p := r.Peak(); p > 0 {
			x, ok := r.Steady()
			peak, spread = fmt.Sprintf("%.1f", p), fmt.Sprintf("%.2f", x)
			if !ok {
				spread += "!"
				unsteady++
			}
		}
		cells = append(cells, peak, spread)
		if waits {
			wait := "-"
			if stepSum > 0 {
				wait = fmt.Sprintf("%.0f%%", 100*waitSum/stepSum)
			}
			cells = append(cells, wait)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if waits {
		fmt.Fprintln(w, "loop wait: of the median steps, the time the calling core sat idle at the parallel loops' ends until the other cores finished (imbalance, or a core the host took away).")
	}
	if unsteady > 0 {
		fmt.Fprintf(w, "unsteady: in %d of %d processes the peak's samples differ by more than %.2fx (!), so the machine's speed changed while they ran: its steps do not say which process was faster.\n", unsteady, len(results), bench.Unsteady)
	}
	fmt.Fprintf(w, "step ms (the median step of each process), over %d processes:\n", len(results))
	for j, name := range names {
		s := slices.Sorted(slices.Values(steps[j]))
		if len(s) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s: fastest %.1f, median %.1f, slowest %.1f (slowest/fastest %.2f)\n", name, s[0], s[len(s)/2], s[len(s)-1], s[len(s)-1]/s[0])
	}
	return nil
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
	fmt.Fprintf(w, "predicted %s with %s into %s (legend.png: the class colors); %s%s\n",
		rep.Counted(), rep.ModelNote(), outDir, rep.MemoryNote(), rep.SkippedNote())
	PrintVolumeScores(w, rep)
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

// PrintVolumeScores prints the Dice of the volumes a predict scored
// against their references (--references): the means over the volumes,
// with and without background (class 0), then each volume's, each class's
// Dice after it ("-": a class in neither mask, or no foreground class
// present); nothing where none was scored.
func PrintVolumeScores(w io.Writer, rep *predict.Report) {
	vs := rep.VolumeScores
	if vs == nil {
		return
	}
	score := func(d *float64) string {
		if d == nil {
			return "-"
		}
		return fmt.Sprintf("%.4f", *d)
	}
	classes := func(ds []*float64) string {
		parts := make([]string, len(ds))
		for k, d := range ds {
			parts[k] = fmt.Sprintf("%d %s", k, score(d))
		}
		return strings.Join(parts, "  ")
	}
	n := "1 volume"
	if vs.Volumes != 1 {
		n = fmt.Sprintf("%d volumes", vs.Volumes)
	}
	fmt.Fprintf(w, "dice over %s: mean %s with background, %s without; per class %s\n", n, score(vs.MeanDice), score(vs.MeanDiceForeground), classes(vs.Dice))
	for _, o := range rep.Outputs {
		if s := o.Score; s != nil {
			fmt.Fprintf(w, "  %s: mean %s with background, %s without; per class %s\n", o.Input, score(s.MeanDice), score(s.MeanDiceForeground), classes(s.Dice))
		}
	}
}
