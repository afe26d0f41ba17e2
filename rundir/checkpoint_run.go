package rundir

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/train"
)

// checkpointer is Run's checkpointing: resuming, saving on schedule, on a
// new best val_miou, at the end and on interrupt, and keeping the newest
// train.keep_last plus the best.
type checkpointer struct {
	tr      *train.Trainer
	parent  string // the run's checkpoints directory
	version string
	note    func(string)

	history     checkpoint.MetricsHistory
	best        *float64 // the best train.monitor score so far (nil: none)
	stop        checkpoint.EarlyStopState
	start       int    // steps done before this process (resumed)
	resumed     string // the checkpoint resumed from
	lastSaved   int    // step of the newest checkpoint written in parent (-1: none)
	lastPath    string
	dataNote    string  // what changed in the data, resumed with AllowDataChange
	bestPath    string  // the checkpoint runfiles.Best points at ("": none yet)
	bestMIoU    float64 // its val_miou
	bestScore   float64 // its train.monitor score
	bestMonitor string

	// priorWall is the run's wall time before this part (the resumed
	// checkpoint's); partStart when this part began.
	priorWall float64
	partStart time.Time

	ctx         context.Context
	doneAtStart bool // ctx was cancelled before the step in progress began
	requested   int  // the step during which ctx was cancelled (0: none)

	improvedAt int  // the step of the latest validation that improved the best score
	stopEarly  bool // train.early_stop: the run should stop
}

// openResume verifies the checkpoint opts.Resume names (nil when there is
// nothing to resume: no --resume, or auto and no checkpoint yet) and that
// cfg may continue it.
func openResume(cfg config.Config, opts Options) (*checkpoint.Checkpoint, error) {
	if opts.Resume == "" {
		return nil, nil
	}
	dir, err := checkpoint.ResolveResume(opts.Resume, opts.OutDir)
	if err != nil || dir == "" {
		return nil, err
	}
	ck, err := checkpoint.OpenToResume(dir)
	if err != nil {
		return nil, err
	}
	if err := checkResume(ck, cfg); err != nil {
		return nil, err
	}
	return ck, nil
}

// newCheckpointer restores tr from ck (if any) and watches ctx to tell
// whether an interrupt came during a step.
func newCheckpointer(ctx context.Context, tr *train.Trainer, opts Options, ck *checkpoint.Checkpoint, note func(string)) (*checkpointer, error) {
	c := &checkpointer{tr: tr, parent: filepath.Join(opts.OutDir, runfiles.Checkpoints), version: opts.Version, note: note, lastSaved: -1,
		partStart: time.Now()}
	if ck != nil {
		if err := Restore(tr, ck, opts.AllowDataChange); err != nil {
			return nil, err
		}
		if fp := ck.Manifest.Data; fp != nil && opts.AllowDataChange {
			if diffs := fp.Diff(tr.DataFingerprint); len(diffs) > 0 {
				c.dataNote = "--allow-data-change: the data changed since the checkpoint: " + strings.Join(diffs, "; ")
			}
		}
		c.start, c.resumed, c.history = ck.Manifest.Step, ck.Dir, ck.Manifest.Metrics
		c.priorWall = ck.Manifest.WallSeconds
		for _, v := range c.history.Val {
			c.improves(v)
		}
		if es := ck.Manifest.EarlyStop; es != nil {
			c.stop = *es
		}
		if abs, err := filepath.Abs(filepath.Dir(ck.Dir)); err == nil {
			if mine, err := filepath.Abs(c.parent); err == nil && abs == mine {
				c.lastSaved, c.lastPath = ck.Manifest.Step, ck.Dir
			}
		}
	}
	c.ctx = ctx
	return c, nil
}

func (c *checkpointer) beginStep(step int) { c.doneAtStart = c.ctx.Err() != nil }

// endStep notes a cancellation that came while the step ran (an interrupt
// in the middle of its accumulation cycle) for the checkpoint taken after
// it.
func (c *checkpointer) endStep(step int) {
	if !c.doneAtStart && c.ctx.Err() != nil && c.requested == 0 {
		c.requested = step
	}
}

// observeStep records the step in the history checkpoints keep.
func (c *checkpointer) observeStep(rec StepRecord, res train.StepResult) error {
	c.history.Steps = append(c.history.Steps, checkpoint.StepPoint{Step: rec.Step, Epoch: res.Epoch, Loss: checkpoint.JSONFloat(res.Loss), Skipped: res.Skipped})
	return nil
}

// observeValidation records a validation, counts a scheduled one for
// early stopping, and notes whether it improved the best score (for
// afterStep).
func (c *checkpointer) observeValidation(v checkpoint.ValRecord) error {
	if scheduled(c.tr.Config.Train.ValEvery, v.Step) {
		c.stopEarly = c.earlyStop(v)
	}
	if c.validated(v) {
		c.improvedAt = v.Step
	}
	return nil
}

// observeEnd saves after the last step and its validation (an interrupted
// run has saved already).
func (c *checkpointer) observeEnd(sum *Summary) error {
	if sum.Interrupted {
		return nil
	}
	return c.end(sum.Steps, sum.Epochs)
}

// validated records a validation and reports whether it improved the
// best train.monitor score.
func (c *checkpointer) validated(v checkpoint.ValRecord) bool {
	c.history.Val = append(c.history.Val, v)
	return c.improves(v)
}

// improves notes v's score and reports whether it is the best so far.
func (c *checkpointer) improves(v checkpoint.ValRecord) bool {
	monitor := c.tr.Config.Train.Monitor
	s := v.Score(monitor)
	if !metrics.Beats(monitor, s, c.best, 0) {
		return false
	}
	c.best = &s
	return true
}

// earlyStop counts a scheduled validation and reports whether the run
// should stop: train.monitor has not improved by more than min_delta for
// train.early_stop.patience validations (Lightning's EarlyStopping; a
// score that is not finite counts as not improving).
func (c *checkpointer) earlyStop(v checkpoint.ValRecord) bool {
	es, monitor := c.tr.Config.Train.EarlyStop, c.tr.Config.Train.Monitor
	if es.Patience == 0 {
		return false
	}
	s := v.Score(monitor)
	if metrics.Beats(monitor, s, c.stop.Best, es.MinDelta) {
		c.stop.Best, c.stop.Wait = &s, 0
		return false
	}
	c.stop.Wait++
	return c.stop.Wait >= es.Patience
}

// afterStep saves on schedule (train.checkpoint_every) or, with
// train.keep_best, after a validation that improved val_miou. The last step
// is left to end.
func (c *checkpointer) afterStep(step, epoch, total int) error {
	t := c.tr.Config.Train
	switch {
	case step == total:
		return nil
	case t.CheckpointEvery > 0 && step%t.CheckpointEvery == 0:
		return c.save(step, epoch, "every")
	case t.KeepBest && c.improvedAt == step:
		return c.save(step, epoch, "best")
	}
	return nil
}

// interrupted saves after SIGINT/SIGTERM stopped the loop (unless this step
// is saved already).
func (c *checkpointer) interrupted(step, epoch int) error {
	if step == c.lastSaved {
		return nil
	}
	return c.save(step, epoch, "interrupt")
}

// end saves after the last step and its validation.
func (c *checkpointer) end(step, epoch int) error {
	if step == c.lastSaved {
		return nil // resumed at the end: nothing new to save
	}
	return c.save(step, epoch, "end")
}

func (c *checkpointer) save(step, epoch int, reason string) error {
	if c.tr.Comm().Rank() != 0 {
		// Rank 0 writes the checkpoints of a data-parallel run; the others
		// hold the same state and would only write it again.
		c.lastSaved = step
		return nil
	}
	req := checkpoint.Request{Reason: reason}
	if step > 0 && c.requested == step {
		req.MidCycle = true
		req.Note = fmt.Sprintf("SIGINT/SIGTERM came during optimizer step %d, an accumulation cycle of %d micro-batch(es); the cycle was finished and the checkpoint taken at its end",
			step, c.tr.Config.Train.Accumulate)
	}
	var miou, score *float64
	if n := len(c.history.Val); n > 0 && c.history.Val[n-1].Step == step {
		v, s := c.history.Val[n-1].ValMIoU, c.history.Val[n-1].Score(c.tr.Config.Train.Monitor)
		miou = &v
		if metrics.Beats(c.tr.Config.Train.Monitor, s, nil, 0) { // finite: an overflowed val_loss ranks nothing
			score = &s
		}
	}
	var stop *checkpoint.EarlyStopState
	if c.tr.Config.Train.EarlyStop.Patience > 0 {
		st := c.stop
		stop = &st
	}
	path, err := saveCheckpoint(c.tr, c.parent, saveRequest{Step: step, Epoch: epoch, Request: req, ValMIoU: miou, Score: score,
		EarlyStop: stop, History: c.history, Version: c.version, WallSeconds: c.priorWall + time.Since(c.partStart).Seconds()})
	if err != nil {
		return fmt.Errorf("saving the checkpoint of step %d: %w", step, err)
	}
	c.lastSaved, c.lastPath = step, path
	if c.note != nil {
		c.note(fmt.Sprintf("checkpoint: %s (step %d, %s)", path, step, reason))
	}
	if err := c.prune(path); err != nil {
		return err
	}
	return c.linkBest()
}

// linkBest points the run directory's runfiles.Best link at its best checkpoint
// (replacing the link atomically), and notes it for the summary. Without
// train.keep_best the best may be pruned, so there is no link.
func (c *checkpointer) linkBest() error {
	if !c.tr.Config.Train.KeepBest {
		return nil
	}
	list, err := checkpoint.ListRun(c.parent)
	if err != nil {
		return err
	}
	best := checkpoint.Best(list)
	if best == nil {
		return nil
	}
	c.bestPath, c.bestMIoU = best.Path, *best.ValMIoU
	c.bestScore, c.bestMonitor = best.Score()
	run := filepath.Dir(c.parent)
	tmp := filepath.Join(run, "."+runfiles.Best+".tmp")
	os.Remove(tmp)
	if err := os.Symlink(filepath.Join(runfiles.Checkpoints, filepath.Base(best.Path)), tmp); err != nil {
		return nil // no symlinks here: summary.json still names it
	}
	return os.Rename(tmp, filepath.Join(run, runfiles.Best))
}

// prune keeps the newest train.keep_last checkpoints (by when they were
// written), the one with the best val_miou when train.keep_best, and the one
// just written; it removes the others. A checkpoint whose manifest cannot be
// read is never removed.
func (c *checkpointer) prune(keep string) error {
	t := c.tr.Config.Train
	if t.KeepLast == 0 {
		return nil
	}
	list, err := checkpoint.ListRun(c.parent)
	if err != nil {
		return err
	}
	var ok []checkpoint.Listed
	for _, e := range list {
		if e.Readable {
			ok = append(ok, e)
		}
	}
	keepSet := map[string]bool{keep: true}
	for i := max(0, len(ok)-t.KeepLast); i < len(ok); i++ {
		keepSet[ok[i].Path] = true
	}
	if best := checkpoint.Best(ok); t.KeepBest && best != nil {
		keepSet[best.Path] = true
	}
	for _, e := range ok {
		if !keepSet[e.Path] {
			if err := checkpoint.Remove(e.Path); err != nil {
				return fmt.Errorf("removing old checkpoint: %w", err)
			}
		}
	}
	return nil
}

// openMetrics opens the run's metrics.jsonl: a new file, or on resume the
// existing one cut back to the records of steps up to keepThrough (what
// came after the checkpoint is trained again; rewritten whole, see
// outdir.WriteFile), to append to. A resumed run's metrics.jsonl that is
// gone is written again from the checkpoint's history: every step's loss
// (records marked "rebuilt") and every validation. It also returns the
// validations at step keepThrough that the history lacks: the one an
// interrupt takes after saving its checkpoint.
func openMetrics(dir string, keepThrough int, history checkpoint.MetricsHistory) (*os.File, []checkpoint.ValRecord, error) {
	path := filepath.Join(dir, runfiles.Metrics)
	if keepThrough <= 0 {
		f, err := outdir.Append(path, true)
		return f, nil, err
	}
	var old io.Reader
	f, _, err := infile.Open(path, 0)
	switch {
	case os.IsNotExist(err):
		old = bytes.NewReader(rebuildMetrics(history))
	case err != nil:
		return nil, nil, err
	default:
		defer f.Close()
		old = f
	}
	known := map[int]bool{}
	for _, v := range history.Val {
		known[v.Step] = true
	}
	var recovered []checkpoint.ValRecord
	err = outdir.WriteFile(path, func(w io.Writer) error {
		sc := bufio.NewScanner(old)
		sc.Buffer(nil, 1<<26)
		for sc.Scan() {
			var r checkpoint.ValRecord
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.Step > keepThrough {
				continue // a later step, or a line cut short by a kill
			}
			if r.Type == "val" && r.Step == keepThrough && !known[r.Step] {
				recovered = append(recovered, r)
			}
			if _, err := w.Write(append(sc.Bytes(), '\n')); err != nil {
				return err
			}
		}
		return sc.Err()
	})
	if err != nil {
		return nil, nil, err
	}
	f, err = outdir.Append(path, false)
	return f, recovered, err
}

// recover takes validations metrics.jsonl kept beside the checkpoint (see
// openMetrics) into the history, as the run that took them had them.
func (c *checkpointer) recover(vals []checkpoint.ValRecord) {
	for _, v := range vals {
		c.validated(v)
	}
}

// lastGood is the newest checkpoint of the run so far: the last this
// process saved, or the one it resumed ("" for none).
func (c *checkpointer) lastGood() string {
	if c.lastPath != "" {
		return c.lastPath
	}
	return c.resumed
}

// resumeNote is the line Run prints when it resumes: where, and the latest
// validation (one an interrupt took included).
func (c *checkpointer) resumeNote(total int) string {
	if c.resumed == "" {
		return ""
	}
	s := fmt.Sprintf("resuming from %s: step %d of %d", c.resumed, c.start, total)
	if n := len(c.history.Val); n > 0 {
		v := c.history.Val[n-1]
		s += fmt.Sprintf(", last val miou %.4f (step %d)", v.ValMIoU, v.Step)
	}
	if c.dataNote != "" {
		s += "; " + c.dataNote
	}
	return strings.TrimSpace(s)
}

// rebuildMetrics is metrics.jsonl as a checkpoint's history knows it: a
// step record per step (step, epoch, loss, skipped; Rebuilt set) and the
// validations in full, in step order.
func rebuildMetrics(h checkpoint.MetricsHistory) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	v := 0
	for _, s := range h.Steps {
		enc.Encode(StepRecord{Type: "step", Step: s.Step, Epoch: s.Epoch, Loss: float64(s.Loss), StepSkipped: s.Skipped, Rebuilt: true})
		for ; v < len(h.Val) && h.Val[v].Step <= s.Step; v++ {
			enc.Encode(h.Val[v])
		}
	}
	for ; v < len(h.Val); v++ {
		enc.Encode(h.Val[v])
	}
	return b.Bytes()
}
