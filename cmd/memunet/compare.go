package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/memunet/memunet/compare"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/train"
)

const compareUsage = "usage: memunet compare --config FILE [--variants baseline,checkpoint,fp16,bf16,accum4,all,gorgonia] [--steps N] [--out DIR] [--force] [--set k=v ...] [--device D] | memunet compare --runs RUN,RUN,... [--out DIR]"

// compareCommand runs every variant (and plain gorgonia) for a few steps,
// each in a fresh process so that its peak RSS is its own, and writes the
// table, compare.csv, compare.json, memory.png and timeline.png; with
// --runs it draws existing runs' validation curves together instead.
// SIGINT/SIGTERM go on to the running child (a train child saves a
// checkpoint); compare waits for it and exits 130/143.
func compareCommand(args []string, stdout io.Writer, sig *rundir.Interrupt) error {
	sig.AtOnce("compare", "nothing was written")
	cmd := newConfigCommand("compare", compareUsage)
	cmd.addDevice()
	fs := cmd.Flags
	variants := fs.String("variants", strings.Join(append(train.VariantNames(), compare.Gorgonia), ","), "comma-separated variants")
	steps := fs.Int("steps", 5, "optimizer steps per variant")
	outDir := fs.String("out", "", "output directory (default runs/compare-<timestamp>)")
	runs := fs.String("runs", "", "instead of training: existing run directories (comma-separated) whose validation curves to plot together into val-curves.png")
	force := fs.Bool("force", false, "compare into an --out that holds an earlier compare, replacing its files and variant runs")
	cmd.noConfig = func() bool { return *runs != "" }
	cfg, err := cmd.load(args)
	dir := *outDir
	if dir == "" {
		dir = compare.DefaultDir(time.Now())
	}
	if errors.Is(err, errNoConfig) {
		sig.AtOnce("compare", "") // it may be writing val-curves.png
		return compareRuns(strings.Split(*runs, ","), dir, stdout)
	}
	if err != nil {
		return err
	}
	if *runs != "" {
		return cmd.usageError("--runs compares existing runs: give it without --config")
	}
	if *steps < 1 {
		return cmd.usageError("--steps must be at least 1")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("compare: cannot find its own executable to run the variants: %w", err)
	}
	// The same compare, with the user's flags: again into dir, or fresh.
	inv := config.Invocation{Program: config.InvokedAs(), Config: cmd.path, Sets: cmd.sets}
	given := config.GivenFlags(fs, "config", "set", "device", "out", "force")
	again := inv.Command("compare", append(given, "--out", dir, "--force")...)
	stop := sig.Cooperate("stopping at once; the running variant gets it too and stops without saving")
	c, err := compare.New(compare.Options{Exe: exe, ConfigPath: cmd.path, Sets: cmd.sets, Config: cfg,
		Variants: strings.Split(*variants, ","), Steps: *steps, Dir: dir, Force: *force, Stop: stop})
	if used := (*compare.UsedError)(nil); errors.As(err, &used) {
		return fmt.Errorf("%w: replace it with %s, or compare into a new folder with %s", err, again, inv.Command("compare", given...))
	}
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(stdout, "memunet compare: %s, %s, effective batch %d, %d steps per variant, writing to %s\n",
		cmd.path, cfg.SampleSize(), cfg.Train.BatchSize*cfg.Train.Accumulate, *steps, dir)
	rows, err := c.Run(func(row report.CompareRow) { fmt.Fprintf(stdout, "  %-10s %s\n", row.Name, row.Status()) })
	if st := sig.Stopped(err, "compare", fmt.Sprintf("%d of %d variants done, the running one got the signal and has ended; no compare files written; run it again with %s",
		len(rows), len(c.RunDirs()), again)); st != 0 {
		return exitStatus(st)
	}
	if rows != nil {
		report.PrintCompareTable(stdout, rows)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "files: %s; the variants' runs: %s\n", strings.Join(c.Files(), ", "), strings.Join(c.RunDirs(), ", "))
	return nil
}

// compareRuns draws existing runs' validation curves together into
// <out>/val-curves.png and prints each run's last and best val mIoU.
func compareRuns(dirs []string, out string, stdout io.Writer) error {
	r, err := compare.Runs(dirs, out)
	if errors.Is(err, compare.ErrNoRuns) {
		return usageError{"compare: --runs names no run directory; " + compareUsage}
	}
	if err != nil {
		return err
	}
	return r.Print(stdout)
}
