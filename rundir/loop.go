package rundir

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/train"
)

// loop runs the steps from the one after the resumed checkpoint to the
// last, each followed by its validation when one is due and a checkpoint
// when one is due; it ends early on an interrupt (every rank at the same
// step) or when early stopping says so. Steps the device queues are told
// to the observers when they are read (settle): at least every
// output.log_every steps, and before anything that needs them read.
func (r *run) loop(ctx context.Context) error {
	every := r.cfg.Train.ValEvery
	for step := r.ckpt.start + 1; step <= r.total; step++ {
		stop, err := agree(r.comm, ctx.Err() != nil)
		if err != nil {
			return err
		}
		if stop {
			r.sum.Interrupted = true
			return r.settle()
		}
		res, err := r.trainStep(step)
		if err != nil {
			// The steps before it are told first: one of them may have
			// gone wrong before it.
			if serr := r.settle(); serr != nil {
				return serr
			}
			return err
		}
		if r.mustSettle(ctx, step) {
			if err := r.settle(); err != nil {
				return err
			}
		}
		if every > 0 && step%every == 0 && step != r.total {
			if err := r.validate(step, res.Epoch); err != nil {
				return err
			}
		}
		if err := r.ckpt.afterStep(step, res.Epoch, r.total); err != nil {
			return err
		}
		if r.ckpt.stopEarly && step < r.total {
			es := r.cfg.Train.EarlyStop
			r.sum.EarlyStopped = true
			r.prog.note(fmt.Sprintf("early stop: %s has not improved by more than %g for %d validations; stopping at step %d of %d",
				r.cfg.Train.Monitor, es.MinDelta, es.Patience, step, r.total))
			return nil
		}
	}
	return nil
}

// issuedStep is a step run and not yet told to the observers: its
// result (Pending while the device holds its answer) and the pool's
// memory after it.
type issuedStep struct {
	step                int
	res                 train.StepResult
	allocated, reserved int64
}

// trainStep runs one optimizer step; settle tells the observers.
func (r *run) trainStep(step int) (train.StepResult, error) {
	tr := r.tr
	if r.cfg.Memory.Timeline {
		tr.Pool().Timeline() // keep only the events of the step about to run
	}
	if len(r.issued) == 0 {
		r.issuedSince = time.Now()
	}
	r.ckpt.beginStep(step)
	res, err := tr.Step()
	if err != nil {
		return res, fmt.Errorf("step %d: %w", step, err)
	}
	r.ckpt.endStep(step)
	st := tr.Pool().Stats()
	r.issued = append(r.issued, issuedStep{step: step, res: res, allocated: st.Allocated.Current, reserved: st.Reserved.Current})
	return res, nil
}

// mustSettle says whether the steps issued are told now: where none
// waits on the device, at a logged step, before a validation, a
// checkpoint or the end, after an interrupt, with a timeline (each step's
// own), and where the device's window is full.
func (r *run) mustSettle(ctx context.Context, step int) bool {
	t, pending := r.cfg.Train, r.tr.Pending()
	return pending == 0 || step%r.cfg.Output.LogEvery == 0 || step == r.total || scheduled(t.ValEvery, step) ||
		scheduled(t.CheckpointEvery, step) || r.cfg.Memory.Timeline || ctx.Err() != nil || pending >= r.tr.QueueLimit()
}

// settle reads the queued steps (one copy for them all) and tells the
// observers of every step issued, in order, each queued one taking the
// window's mean time. A loss that is not finite stops the run before
// anything of its step is recorded.
func (r *run) settle() error {
	results, readErr := r.tr.Settle()
	issued := r.issued
	r.issued = nil
	mean := float64(time.Since(r.issuedSince).Microseconds()) / 1000 / float64(max(len(issued), 1))
	for _, s := range issued {
		if s.res.Pending {
			if len(results) == 0 {
				break // not read: readErr says why
			}
			s.res, results = results[0], results[1:]
		}
		if err := r.tellStep(s, mean); err != nil {
			return err
		}
	}
	return readErr
}

// tellStep tells the observers of one step.
func (r *run) tellStep(s issuedStep, stepMS float64) error {
	res := s.res
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return diverged(r.cfg, s.step, res, r.ckpt.lastGood())
	}
	var commMS float64 // data-parallel only: alone, the no-op syncs are no communication
	if r.comm.Size() > 1 {
		commMS = float64(res.CommTime.Microseconds()) / 1000
	}
	rec := StepRecord{
		Type: "step", Step: s.step, Epoch: res.Epoch, Loss: res.Loss, LR: res.LR,
		StepMS: stepMS, CommMS: commMS,
		AllocatedBytes: s.allocated, ReservedBytes: s.reserved,
		PeakAllocatedBytes: res.Peak, PeakReservedBytes: res.PeakReserved, PeakByCategory: res.PeakByCategory,
		Phases: res.Phases, Variant: r.sum.Variant, EffectiveBatch: r.sum.EffectiveBatch,
		LossScale: res.LossScale, GrowthTracker: res.GrowthTracker,
		SkippedSteps: res.SkippedSteps, StepSkipped: res.Skipped, Retried: res.Retried,
		DeviceUsedBytes: res.DeviceUsedPeak,
	}
	if res.Clipping {
		rec.GradNorm = &res.GradNorm
	}
	for _, o := range r.observers {
		if err := o.observeStep(rec, res); err != nil {
			return err
		}
	}
	r.stepsRun++
	return nil
}

// validate scores the model on the validation split and tells the
// observers. Only the scheduled validations (train.val_every) feed the
// schedule and early stopping: a run's last step off the schedule (a
// shorter run, an interrupt) must not change what its continuation does.
func (r *run) validate(step, epoch int) error {
	tr := r.tr
	tr.Pool().ResetPeak()
	v, err := tr.Validate()
	if err != nil {
		return err
	}
	st := tr.Pool().Stats()
	r.tally.notePeak(st.Allocated.Peak, st.Reserved.Peak, train.PhaseMemoryOf(st).PeakByCategory)
	if !v.ValLoss.Finite() && !r.saidLossNotFinite {
		r.prog.note(lossNotFinite(r.cfg, step, v.ValLoss))
		r.saidLossNotFinite = true
	}
	r.lastVal = step
	if scheduled(r.cfg.Train.ValEvery, step) {
		tr.Validated(v)
	}
	rec := checkpoint.ValRecord{Type: "val", Step: step, Epoch: epoch, Validation: v}
	for _, o := range r.observers {
		if err := o.observeValidation(rec); err != nil {
			return err
		}
	}
	return nil
}

// scheduled reports whether a validation at step is one train.val_every
// asks for.
func scheduled(every, step int) bool { return every > 0 && step%every == 0 }

// finish ends the part: an interrupt's checkpoint first (a second signal
// may end the process any moment after), the last step's validation if it
// had none, the observers' ends (curves, the end's checkpoint, the
// summary's figures), then summary.json.
func (r *run) finish() (*Summary, error) {
	if r.sum.Interrupted {
		if err := r.ckpt.interrupted(r.sum.Steps, r.sum.Epochs); err != nil {
			return nil, err
		}
	}
	if r.lastVal != r.sum.Steps { // an early stop has just validated
		if r.sum.Interrupted {
			// Said at once: on a large validation split this takes a while,
			// and the user should know the checkpoint is already safe.
			r.prog.note(fmt.Sprintf("interrupted: validating step %d before stopping (the checkpoint is saved; a second Ctrl-C stops now)", r.sum.Steps))
		}
		if err := r.validate(r.sum.Steps, r.sum.Epochs); err != nil {
			return nil, err
		}
	}
	for _, o := range r.observers {
		if err := o.observeEnd(r.sum); err != nil {
			return nil, err
		}
	}
	return r.writeSummary()
}

// agree is true on every rank when stop is true on any: the ranks of a
// data-parallel run stop at the same step (an interrupt reaches them at
// different times).
func agree(comm dist.Comm, stop bool) (bool, error) {
	if comm.Size() == 1 {
		return stop, nil
	}
	flag := []float64{0}
	if stop {
		flag[0] = 1
	}
	if err := comm.AllReduceSum64(flag); err != nil {
		return false, err
	}
	return flag[0] > 0, nil
}

// RankMemory is one data-parallel rank's peak memory.
type RankMemory struct {
	Rank               int   `json:"rank"`
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64 `json:"peak_reserved_bytes"`
}

// gatherRanks gives every rank every rank's peaks (each fills its own slots
// of a zeroed vector; the sum is the table).
func gatherRanks(comm dist.Comm, allocated, reserved int64) ([]RankMemory, error) {
	buf := make([]float64, 2*comm.Size())
	buf[2*comm.Rank()], buf[2*comm.Rank()+1] = float64(allocated), float64(reserved)
	if err := comm.AllReduceSum64(buf); err != nil {
		return nil, err
	}
	out := make([]RankMemory, comm.Size())
	for r := range out {
		out[r] = RankMemory{Rank: r, PeakAllocatedBytes: int64(buf[2*r]), PeakReservedBytes: int64(buf[2*r+1])}
	}
	return out, nil
}
