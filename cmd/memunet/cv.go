package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/crossval"
	"github.com/memunet/memunet/rundir"
)

const cvUsage = "usage: memunet cv --config FILE --folds K [--out DIR] [--set section.key=value ...] [--device D]"

// cvCommand is k-fold cross-validation: crossval.Run trains the folds
// into DIR/fold_0 .. fold_{K-1}; this prints their table.
func cvCommand(args []string, stdout io.Writer, sig *rundir.Interrupt) error {
	sig.AtOnce("cv", "the folds' runs stay as they were")
	c := newConfigCommand("cv", cvUsage)
	c.addDevice()
	folds := c.Flags.Int("folds", 0, "the number of folds K, 2 or more (default: the config's data.folds)")
	out := c.Flags.String("out", "", "the folder of the folds' runs, DIR/fold_0 ... and cv.json (default: output.dir, else runs/cv-<timestamp>)")
	cfg, err := c.load(args)
	if err != nil {
		return err
	}
	if *folds == 0 {
		*folds = cfg.Data.Folds
	}
	if *folds < 0 || *folds == 1 {
		return c.usageError(fmt.Sprintf("--folds %d: the number of folds is 2 or more, e.g. --folds 5", *folds))
	}
	if *folds < 2 {
		return c.usageError("--folds K: the number of folds, 2 or more, is required (or data.folds in the config)")
	}
	dir := *out
	if dir == "" {
		dir = rundir.DirOf("", cfg, time.Now())
		if cfg.Output.Dir == "" {
			dir = filepath.Join(filepath.Dir(dir), "cv-"+filepath.Base(dir))
		}
	}
	again := cfg.Invocation.Command("cv", "--folds", strconv.Itoa(*folds), "--out", dir)
	ctx := sig.CooperateTrain()
	res, err := crossval.Run(ctx, crossval.Options{Dir: dir, Folds: *folds, Invocation: cfg.Invocation,
		Note: func(line string) { fmt.Fprintln(stdout, line) },
		Run:  rundir.Options{Progress: stdout, Terminal: rundir.IsTerminal(stdout), Version: version},
		OnStart: func(dir string, cfg config.Config, device string) {
			fmt.Fprintln(stdout, rundir.Banner(version, cfg, device, nil, dir))
		}})
	if st := sig.Stopped(err, "cv", "the finished folds and the newest checkpoint stay; continue with "+again); st != 0 {
		return exitStatus(st)
	}
	if err != nil {
		return err
	}
	if res.Interrupted {
		fmt.Fprintf(stdout, "interrupted in fold %d after step %d; saved %s; continue with: %s\n", res.Stopped, res.Summary.Steps, res.Summary.LastCheckpoint, again)
		return exitStatus(sig.Status())
	}
	res.Print(stdout)
	return nil
}
