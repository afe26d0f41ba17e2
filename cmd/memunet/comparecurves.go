package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/rundir"
)

// compareRuns plots existing runs' validation curves together into
// <out>/val-curves.png and prints each run's last and best val mIoU.
func compareRuns(dirs []string, out string, stdout io.Writer) error {
	var names []string
	var curves []report.Curves
	for _, d := range dirs {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		c, err := rundir.ReadCurves(filepath.Join(d, "metrics.jsonl"))
		if err != nil {
			if os.IsNotExist(err) {
				return fmt.Errorf("compare --runs: %s has no metrics.jsonl: is it a run directory (train --out)?", d)
			}
			return fmt.Errorf("compare --runs: %w", err)
		}
		names, curves = append(names, filepath.Base(filepath.Clean(d))), append(curves, c)
	}
	if len(curves) == 0 {
		return usageError{"compare: --runs names no run directory; " + compareUsage}
	}
	if out == "" {
		out = filepath.Join("runs", "compare-"+time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	path := filepath.Join(out, "val-curves.png")
	if err := report.WriteValidations(path, names, curves); err != nil {
		return fmt.Errorf("compare --runs: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tsteps\tvalidations\tlast val miou\tbest val miou\tat step\t")
	for i, c := range curves {
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
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	return nil
}
