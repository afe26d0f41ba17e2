// Package crossval is k-fold cross-validation: Run trains fold 0..k-1 of
// a configuration (data.folds k, data.fold f: package data cuts the
// folds) each as a run of its own in DIR/fold_f, and writes DIR/cv.json:
// each fold's final validation scores, and their mean and standard
// deviation over the folds.
//
// A cross-validation continues where it stopped: a fold whose run has
// finished is read, not trained again; an unfinished one resumes from its
// newest checkpoint as train --resume auto does (bit for bit the run it
// would have been); the others start. Files: crossval.go (Run), scores.go
// (the scores, their statistics, cv.json and the table).
package crossval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
)

// Options are a cross-validation's inputs.
type Options struct {
	// Dir receives a run directory per fold (DIR/fold_0, ...) and cv.json.
	Dir string
	// Folds is k, 2 or more.
	Folds int
	// Invocation is the configuration as the user gave it (--config and
	// --set); each fold loads it with data.folds=k and data.fold=f added.
	Invocation config.Invocation
	// Run is every fold's run's options; Run sets their OutDir, Resume and
	// OnStart, which calls OnStart (if set) with the fold's run directory.
	Run     rundir.Options
	OnStart func(dir string, cfg config.Config, device string)
	// Note, if set, is told of each fold as it is reached: finished
	// already, resumed or started.
	Note func(line string)
}

// Result is what Run did: the folds' scores, and where it stopped.
type Result struct {
	CV
	// Interrupted says a signal stopped fold Stopped (its checkpoint is
	// saved; Summary is its run's); the folds after it did not run, and
	// cv.json was not written.
	Interrupted bool
	Stopped     int
	Summary     *rundir.Summary
	// File is cv.json's path, once written.
	File string
}

// Run trains the folds in turn into opts.Dir, skipping those finished
// and resuming the one a checkpoint left unfinished, then writes
// cv.json. It holds opts.Dir's lock throughout (one cross-validation a
// folder), each fold's run its own. Cancelling ctx stops the current
// fold as it stops train (a checkpoint saved): the Result says so.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Folds < 2 || opts.Folds > maxFolds {
		return nil, fmt.Errorf("cv: --folds %d (data.folds): want the number of folds, 2 to %d, e.g. 5", opts.Folds, maxFolds)
	}
	lock, err := outdir.Acquire(opts.Dir, "memunet cv")
	if err != nil {
		return nil, err
	}
	defer lock.Clear() // the folder stays where it holds a fold's run
	if err := rundir.CheckNoRun(opts.Dir, "cv"); err != nil {
		return nil, err // a train run's files beside the folds'
	}
	res := &Result{CV: CV{Folds: opts.Folds}}
	for f := range opts.Folds {
		cfg, err := foldConfig(opts.Invocation, opts.Folds, f)
		if err != nil {
			return res, err
		}
		sum, err := runFold(ctx, cfg, f, opts)
		if err != nil {
			return res, fmt.Errorf("cv: fold %d of %d (%s): %w", f, opts.Folds, filepath.Join(opts.Dir, runfiles.FoldDir(f)), err)
		}
		if sum.Interrupted {
			res.Interrupted, res.Stopped, res.Summary = true, f, sum
			return res, nil
		}
		if opts.Note != nil {
			opts.Note(fmt.Sprintf("cv: fold %d of %d: done at step %d: val loss %.4f  miou %.4f  dice %.4f  dice_fg %.4f",
				f, opts.Folds, sum.Steps, float64(sum.ValLoss), sum.ValMIoU, sum.ValDice, sum.ValDiceFG))
		}
		res.add(f, sum, cfg.Data.ClassNames)
	}
	res.finish()
	res.File = filepath.Join(opts.Dir, runfiles.CrossValidation)
	if err := res.write(res.File); err != nil {
		return res, err
	}
	return res, nil
}

// maxFolds bounds k: data.folds' maximum.
const maxFolds = 1000

// foldConfig is the configuration of fold f of k: the user's with
// data.folds and data.fold set (after the user's --set flags, so they
// win).
func foldConfig(inv config.Invocation, k, f int) (config.Config, error) {
	inv.Sets = append(slices.Clip(inv.Sets), "data.folds="+strconv.Itoa(k), "data.fold="+strconv.Itoa(f))
	return inv.Load()
}

// runFold is fold f's summary: its run's, continued from its newest
// checkpoint as train --resume auto continues it. A finished run is
// refused by rundir.Run having read it only (a *FinishedError), and read
// here; one whose configuration differs from cfg (other folds, say) is
// refused naming the keys.
func runFold(ctx context.Context, cfg config.Config, f int, opts Options) (*rundir.Summary, error) {
	dir := filepath.Join(opts.Dir, runfiles.FoldDir(f))
	note := func(format string, args ...any) {
		if opts.Note != nil {
			opts.Note(fmt.Sprintf("cv: fold %d of %d: ", f, opts.Folds) + fmt.Sprintf(format, args...))
		}
	}
	ck, err := checkpoint.ResolveResume("auto", dir)
	if err != nil {
		return nil, err
	}
	ro := opts.Run
	ro.OutDir, ro.Resume = dir, "auto"
	ro.OnStart = func(cfg config.Config, device string) {
		if ck != "" {
			note("resuming %s", ck)
		}
		if opts.OnStart != nil {
			opts.OnStart(dir, cfg, device)
		}
	}
	sum, err := rundir.Run(ctx, cfg, ro)
	if fin := (*rundir.FinishedError)(nil); errors.As(err, &fin) {
		note("finished already (%d steps): %s", fin.Step, dir)
		return summaryOf(dir, ck)
	}
	return sum, err
}

// summaryOf is the summary of a finished run in dir: its summary.json
// where that has the step of ck, its newest checkpoint, else (the process
// ended between the two) the scores of ck's last validation.
func summaryOf(dir, ck string) (*rundir.Summary, error) {
	c, err := checkpoint.Open(ck)
	if err != nil {
		return nil, err
	}
	step := c.Manifest.Step
	if sum, err := rundir.ReadSummary(dir); err == nil && sum.Steps == step {
		sum.Interrupted = false // stopped at its last step: finished
		return sum, nil
	}
	vals := c.Manifest.Metrics.Val
	if len(vals) == 0 || vals[len(vals)-1].Step != step {
		return nil, fmt.Errorf("%s finished at step %d without a validation there, and %s does not hold it", ck, step, runfiles.Summary)
	}
	return &rundir.Summary{Steps: step, Epochs: c.Manifest.Epoch, Validation: vals[len(vals)-1].Validation, LastCheckpoint: ck}, nil
}

// Print writes a finished cross-validation for a reader: the folds'
// table and cv.json's path. An interrupted one it leaves to the caller,
// who knows the command that continues it.
func (r *Result) Print(w io.Writer) {
	if !r.Interrupted {
		r.CV.Print(w)
		if r.File != "" {
			fmt.Fprintf(w, "files: %s\n", r.File)
		}
	}
}
