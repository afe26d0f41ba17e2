package report

// The text tables the commands print.

import (
	"fmt"
	"io"
	"text/tabwriter"
)

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
