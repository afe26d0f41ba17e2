package rundir

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/train"
)

// What Run refuses, and why: a directory that holds another run, a --force
// that would delete train.init's weights, a finished run, a loss that
// became NaN.

// runFilesIn lists the run files dir holds (checkpoint.RunFilesIn), then,
// where it holds any, the outputs made from that run
// (checkpoint.DerivedFiles): what --force deletes.
func runFilesIn(dir string) []string {
	out := checkpoint.RunFilesIn(dir)
	if len(out) > 0 {
		out = append(out, checkpoint.DerivedFiles(dir)...)
	}
	return out
}

// checkInitKept refuses a --force that would delete what train.init
// fine-tunes from: the run directory itself (its checkpoints) or anything
// inside the run files it deletes (earlier, as runFilesIn lists them).
func checkInitKept(inv config.Invocation, init, dir string, earlier []string) error {
	if init == "" || len(earlier) == 0 {
		return nil
	}
	doomed := outdir.Resolve(init) == outdir.Resolve(dir)
	for _, name := range earlier {
		name, _, _ = strings.Cut(name, "/")
		doomed = doomed || outdir.Within(init, filepath.Join(dir, name))
	}
	if !doomed {
		return nil
	}
	return fmt.Errorf("--force would delete the earlier run in %s, and train.init (--init %s) fine-tunes from it: train into another --out, or export the weights first (%s) and fine-tune from that file",
		dir, init, inv.Run("export", "--checkpoint", init, "--out", runfiles.Model))
}

// removeRunFiles deletes the run files named (as runFilesIn lists them)
// from dir.
func removeRunFiles(dir string, names []string) error {
	for _, name := range names {
		name, _, _ = strings.Cut(name, "/")
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("removing the earlier run's %s: %w", name, err)
		}
	}
	return nil
}

// FinishedError is a resume of a run that has already finished: its newest
// checkpoint is at the configured last step (or early stopping ended it).
// Nothing was changed; raising train.steps (or the patience) continues it.
type FinishedError struct {
	Dir         string // the run directory (or the checkpoint, when not in one)
	Step, Total int
	// EarlyStopped: train.early_stop ended it before Total.
	EarlyStopped bool
	// Further is a command that trains it further (twice the steps, or a
	// longer patience), as the user ran this one.
	Further string
}

func (e *FinishedError) Error() string {
	if e.EarlyStopped {
		return fmt.Sprintf("%s already finished: early stopping ended it at step %d of %d; to train further raise train.early_stop.patience%s", e.Dir, e.Step, e.Total, e.further())
	}
	if e.Further == "" && e.Step >= config.MaxSteps {
		return fmt.Sprintf("%s already finished: %d/%d steps, at or past train.steps' maximum of %d: it trains no further", e.Dir, e.Step, e.Total, config.MaxSteps)
	}
	return fmt.Sprintf("%s already finished: %d/%d steps; to train further raise train.steps%s", e.Dir, e.Step, e.Total, e.further())
}

func (e *FinishedError) further() string {
	if e.Further == "" {
		return ""
	}
	return ", e.g. " + e.Further
}

// checkFinished refuses, with a *FinishedError, to resume a checkpoint
// whose run has ended: at or past cfg's last step, or stopped early by
// train.early_stop with the same patience. It only reads; a checkpoint
// that does not open, or that cfg or this number of processes may not
// continue, is left for the resume to refuse.
func checkFinished(cfg config.Config, opts Options) error {
	if opts.Resume == "" {
		return nil
	}
	dir, err := checkpoint.ResolveResume(opts.Resume, opts.OutDir)
	if err != nil || dir == "" {
		return nil
	}
	world := 1
	if opts.Comm != nil {
		world = opts.Comm.Size()
	}
	ck, err := checkpoint.Open(dir)
	if err != nil || checkResume(ck, cfg) != nil || max(ck.Manifest.World, 1) != world {
		return nil // the resume refuses it, saying why
	}
	m := ck.Manifest
	total := cfg.Train.Steps
	if total == 0 && m.Position.Accumulate > 0 { // train.epochs: the checkpoint's epochs, as the data is unchanged
		// At most 10^6 epochs of checkpoint.MaxCount batches: no overflow.
		total = cfg.Train.Epochs * (m.Position.MicroBatchesPerEpoch / m.Position.Accumulate)
	}
	run := checkpoint.RunDirOf(dir)
	if run == "" {
		run = dir
	}
	es := cfg.Train.EarlyStop
	further := func(set string) string {
		return cfg.Invocation.Command("train", "--resume", "auto", "--out", opts.OutDir, "--set", set)
	}
	// The hints double the steps or the patience, saturating where a sum
	// would pass train.steps' maximum or int's: no hint overflows.
	switch {
	case total > 0 && m.Step >= total:
		e := &FinishedError{Dir: run, Step: m.Step, Total: total}
		if more := min(m.Step, config.MaxSteps-m.Step); more > 0 {
			e.Further = further(fmt.Sprintf("train.steps=%d", m.Step+more))
		}
		return e
	case m.Request.Reason == "end" && m.EarlyStop != nil && es.Patience > 0 && m.EarlyStop.Wait >= es.Patience:
		return &FinishedError{Dir: run, Step: m.Step, Total: total, EarlyStopped: true,
			Further: further(fmt.Sprintf("train.early_stop.patience=%d", es.Patience+min(es.Patience, math.MaxInt-es.Patience)))}
	}
	return nil
}

// DivergedError stops a run whose loss became NaN or infinite: nothing of
// that step is recorded or saved, and the checkpoints before it stand.
type DivergedError struct {
	Step int
	Loss float64
	LR   float64
	// LastCheckpoint is the newest checkpoint before the step ("": none).
	LastCheckpoint string
	// Try is what may keep the loss finite, for this configuration.
	Try []string
}

func (e *DivergedError) Error() string {
	last := "no checkpoint was saved before it"
	if e.LastCheckpoint != "" {
		last = "the last checkpoint before it is " + e.LastCheckpoint
	}
	return fmt.Sprintf("loss became %v at step %d (lr %g): training diverged; %s; try %s",
		e.Loss, e.Step, e.LR, last, strings.Join(e.Try, ", or "))
}

// diverged is the DivergedError of res, the result of step.
func diverged(cfg config.Config, step int, res train.StepResult, last string) *DivergedError {
	t := cfg.Train
	try := []string{fmt.Sprintf("a lower train.lr (%g now, e.g. %.3g)", t.LR, t.LR/10)}
	if c := t.ClipGradNorm; c == 0 {
		try = append(try, "gradient clipping (train.clip_grad_norm: 12, nnU-Net's)")
	} else {
		try = append(try, fmt.Sprintf("a lower train.clip_grad_norm (%g now, e.g. %.3g)", c, c/10))
	}
	if t.Precision != backend.Float32 {
		try = append(try, "train.precision: fp32")
	}
	if t.Precision == backend.Float16 && !cfg.ScalerEnabled() {
		try = append(try, "the grad scaler (train.scaler.enabled: true)")
	}
	return &DivergedError{Step: step, Loss: res.Loss, LR: res.LR, LastCheckpoint: last, Try: try}
}

// ExistingRunError refuses to start a new run in a directory that holds one.
// Its message ends with the two commands on, as the user ran train: continue
// that run (with its own configuration, which its checkpoint holds), or
// delete its files and start again (the same --config and --set flags).
type ExistingRunError struct {
	Dir   string
	Files []string
	// Invocation is how the user ran train (zero: "memunet" and no config
	// flags); the caller that knows it sets it.
	Invocation config.Invocation
	// Command is the command refused where it is not train: "gorgonia",
	// whose summary.json would replace the run's.
	Command string
}

// CheckNoRun is an *ExistingRunError for command where dir holds a run's
// files (checkpoint.RunFiles, checkpoints/ only if it has entries), else
// nil: for a writer other than train that must not mix its files into a
// run.
func CheckNoRun(dir, command string) error {
	if files := runFilesIn(dir); len(files) > 0 {
		return &ExistingRunError{Dir: dir, Files: files, Command: command}
	}
	return nil
}

func (e *ExistingRunError) Error() string {
	if e.Command != "" {
		return fmt.Sprintf("%s already holds a run (%s), whose files memunet %s would mix with its own: choose another --out DIR",
			e.Dir, strings.Join(e.Files, ", "), e.Command)
	}
	return fmt.Sprintf("%s already holds a run (%s): train into another --out DIR; or continue it: %s; or delete those files and start again: %s",
		e.Dir, strings.Join(e.Files, ", "),
		e.Invocation.Run("train", "--resume", "auto", "--out", e.Dir),
		e.Invocation.Command("train", "--out", e.Dir, "--force"))
}

// lossNotFinite is the note for a validation whose loss is not finite:
// the run goes on (the training loss is finite, or it would have stopped),
// the loss is written as null, and the likely cause named.
func lossNotFinite(cfg config.Config, step int, loss metrics.Loss) string {
	why := "the model's outputs overflow in evaluation mode"
	switch cfg.Train.Precision {
	case backend.Float16:
		why = "fp16 overflows beyond 65504, and evaluation uses BatchNorm's running statistics, young early in a run; " +
			"bf16 (train.precision: bf16) keeps fp32's range"
	case backend.Float32:
		why += " (BatchNorm's running statistics are young early in a run; a lower train.lr helps)"
	}
	return fmt.Sprintf("validation at step %d: the loss is %v, written as null; training goes on: %s", step, float64(loss), why)
}
