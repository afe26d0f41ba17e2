package train

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/optim"
)

// On a device that queues steps (backend.StepQueue: the CUDA backend), a
// plain cross-entropy step of one process issues everything with no read
// of the device (gradient clipping included): the device decides
// whether its optimizer kernels update, and keeps the step count and the
// grad scaler. Its StepResult is Pending until Settle reads the window
// in one copy, where the host learns the losses and the skipped steps and
// brings its optimizer count and scaler up to date, as the step itself
// would have. A caller settles before it reads the optimizer or the
// scaler (a checkpoint, a validation, the end).

// pendingStep is a queued step not yet read.
type pendingStep struct {
	res    StepResult
	slot   int // its first micro-batch's record slot
	accum  int
	number int  // its StepsDone once run
	clip   bool // it clipped its gradients (train.clip_grad_norm)
}

// stepQueue is the device's step queue where this trainer's steps queue
// (nil where each reads its own answer), and how many of them a window
// holds.
func (t *Trainer) stepQueue() (backend.StepQueue, int) {
	r, recorded := t.recorder()
	q, ok := r.(backend.StepQueue)
	if !ok || !recorded || t.Pool().Virtual() {
		return nil, 0
	}
	if n := min(q.QueueSteps(), q.RecordSlots()/t.Config.Train.Accumulate); n > 0 {
		return q, n
	}
	return nil, 0
}

// recorder is the backend's step record where this trainer's steps keep
// their losses and finite check on the device (one process, a cycle that
// fits its slots), read in one copy at the step's end or, queued, a
// window's.
func (t *Trainer) recorder() (backend.StepRecorder, bool) {
	r, ok := t.Loss.Recordable(t.env)
	return r, ok && t.Config.Train.Accumulate <= r.RecordSlots() && t.comm.Size() == 1
}

// QueueLimit is how many steps may wait to be read: a Step past it reads
// them itself (0: steps are not queued, each reads its own answer).
func (t *Trainer) QueueLimit() int {
	_, n := t.stepQueue()
	return n
}

// Pending is how many queued steps wait to be read.
func (t *Trainer) Pending() int { return len(t.pending) }

// Settle reads the queued steps and returns, in order, the results of
// every step Step left pending (a Step past QueueLimit may have read some
// already). A bad target or a device fault is an error naming its step,
// with the results before it.
func (t *Trainer) Settle() ([]StepResult, error) {
	err := t.settle()
	out := t.settled
	t.settled = nil
	return out, err
}

// settle reads the window in one copy (then waits for the device, which
// reports any fault of the steps) and replays each step's decision on the
// host: the optimizer's count and the scaler's update.
func (t *Trainer) settle() error {
	if len(t.pending) == 0 {
		return nil
	}
	pending, last := t.pending, t.pending[len(t.pending)-1]
	t.pending = nil
	q := t.Device.Backend.(backend.StepQueue)
	entries, recs, err := q.ReadQueue(len(pending), last.slot+last.accum, t.Net.Config.Classes)
	if err == nil {
		err = t.Device.Backend.Sync()
	}
	if err != nil && len(pending) == 1 {
		return fmt.Errorf("step %d: %w", last.number, err)
	}
	if err != nil { // one of them: the device ran them as one
		return fmt.Errorf("steps %d-%d: %w", pending[0].number, last.number, err)
	}
	for j, p := range pending {
		res := p.res
		res.Pending = false
		for _, r := range recs[p.slot : p.slot+p.accum] {
			if r.Err != nil {
				return fmt.Errorf("step %d: %w", p.number, r.Err)
			}
			loss := r.Sum
			if r.Count > 0 {
				loss /= float64(r.Count)
			}
			res.Loss += loss / float64(p.accum)
		}
		finite := entries[j].Finite
		if finite {
			t.Opt.SetSteps(t.Opt.Steps() + 1)
		}
		if finite && p.clip {
			res.GradNorm, res.Clipping = entries[j].GradNorm, true
		}
		t.Scaler.Update(finite)
		res.Skipped = !finite
		t.noteScaler(&res)
		t.settled = append(t.settled, res)
	}
	return nil
}

// openQueued settles the window first where this step cannot join it
// (it is full, or the step is not queued), starts a window from the
// host's state, and opens the step's entry: its index and first slot.
func (t *Trainer) openQueued(q backend.StepQueue, limit, accum int) (j, slot int, err error) {
	if n := len(t.pending); n > 0 && (q == nil || n >= limit || t.pending[n-1].slot+t.pending[n-1].accum+accum > q.RecordSlots()) {
		if err := t.settle(); err != nil {
			return 0, 0, err
		}
	}
	if q == nil {
		return 0, 0, nil
	}
	if len(t.pending) == 0 {
		q.StartQueue(backend.QueueStart{Steps: t.Opt.Steps(), Scale: t.Scaler.LossScale(), Tracker: t.Scaler.GrowthTracker,
			BiasCorrections: t.Opt.BiasCorrections(q.QueueSteps())})
	} else {
		p := t.pending[len(t.pending)-1]
		j, slot = len(t.pending), p.slot+p.accum
	}
	q.OpenStep(j, accum)
	return j, slot, nil
}

// closeQueued checks step j's gradients, clips them (PyTorch's order:
// scaler.unscale_, clip_grad_norm_, scaler.step) and decides the step on
// the device, then issues the optimizer's kernels, which skip it there
// where it failed.
func (t *Trainer) closeQueued(q backend.StepQueue, j int, lr float64) {
	grads := optim.Grads(t.Net.Params())
	q.QueuedUnscaleCheck(j, grads)
	if limit := t.Config.Train.ClipGradNorm; limit > 0 {
		q.QueuedClip(j, grads, limit, optim.ClipEps)
	}
	q.CloseStep(j, lr, t.Scaler.Rule())
	t.Opt.Update(lr, backend.EntryOf(j))
	t.Net.SyncWorkingWeights()
}

// noteScaler copies the scaler's state after a step into its result.
func (t *Trainer) noteScaler(res *StepResult) {
	res.LossScale, res.GrowthTracker, res.SkippedSteps = t.Scaler.LossScale(), t.Scaler.GrowthTracker, t.Scaler.Skipped
}
