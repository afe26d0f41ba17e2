package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/memunet/memunet/backend"
)

// The step queue (backend.StepQueue): a window of whole optimizer steps
// that the host issues without reading the device. Each step has an entry
// (its finite flag, loss scale, unscale factor, Adam's factors and the step
// count after it; see kernels/ops.cu) and its micro-batches' record
// slots; the state (the step count, the scaler's scale and tracker) and
// Adam's bias corrections are the window's. ReadQueue reads the entries'
// flags and the slots in one copy.

var _ backend.StepQueue = (*Backend)(nil)

// QueueSteps is how many steps a window holds: none with sync launches
// (SetSyncLaunches), where each step reads its own answer, so that a
// fault is reported by its step.
func (b *Backend) QueueSteps() int {
	if b.syncLaunches.Load() {
		return 0
	}
	return maxQueueSteps
}

// StartQueue writes s into the queue's state and bias-correction table in
// one upload (staged: the host does not wait).
func (b *Backend) StartQueue(s backend.QueueStart) {
	rows := len(s.BiasCorrections) / 2
	if len(s.BiasCorrections)%2 != 0 || rows > maxQueueSteps {
		panic(fmt.Sprintf("backend/cuda: %d bias corrections for a window of %d steps", len(s.BiasCorrections), maxQueueSteps))
	}
	raw := make([]byte, queueTableOffset-queueStateOffset+16*rows)
	binary.LittleEndian.PutUint64(raw, uint64(s.Steps))
	binary.LittleEndian.PutUint64(raw[8:], math.Float64bits(s.Scale))
	binary.LittleEndian.PutUint32(raw[16:], uint32(int32(s.Tracker)))
	for i, v := range s.BiasCorrections {
		binary.LittleEndian.PutUint64(raw[queueTableOffset-queueStateOffset+8*i:], math.Float64bits(v))
	}
	b.upload("StartQueue", b.scratchPtr(queueStateOffset, len(raw)), raw)
	b.queueBase.Store(s.Steps)
	b.queueRows.Store(int64(rows))
}

// entry is step j's entry.
func (b *Backend) entry(j int) devicePtr {
	if j < 0 || j >= maxQueueSteps {
		panic(fmt.Sprintf("backend/cuda: queued step %d of %d", j, maxQueueSteps))
	}
	return b.scratchPtr(queueEntryOffset+queueEntryBytes*j, queueEntryBytes)
}

// entryField is the 4 bytes of step j's entry from byte off.
func (b *Backend) entryField(j, off int) devicePtr {
	e := b.entry(j)
	return devicePtr{e.addr + uintptr(off), 4}
}

// entryPtr is the entry e names, none for none.
func (b *Backend) entryPtr(e backend.StepEntry) devicePtr {
	if e == 0 {
		return devicePtr{}
	}
	return b.entry(e.Index())
}

func (b *Backend) queueState() devicePtr { return b.scratchPtr(queueStateOffset, 32) }

// The entry's fields, by byte (kernels/ops.cu's ENTRY_LOSS_SCALE,
// ENTRY_INV, ENTRY_NORM and ENTRY_CLIP).
const (
	entryLossScale = 8
	entryInv       = 12
	entryNorm      = 32
	entryClip      = 40
)

func (b *Backend) OpenStep(j, accum int) {
	if accum < 1 {
		panic(fmt.Sprintf("backend/cuda: a step of %d micro-batches", accum))
	}
	b.launchGrid(KStepBegin, 1, 1, b.entry(j), b.queueState(), accum)
}

func (b *Backend) QueuedCrossEntropyBack(s backend.Shape4, dlogits, logits, target backend.View, slot, j int) {
	b.crossEntropyBack(s, dlogits, logits, target, 0, b.recordSlot(b.checkSlot(slot)), 0, b.entryField(j, entryLossScale))
}

func (b *Backend) QueuedLossBack(s backend.Shape4, dlogits, logits, target backend.View, terms backend.LossTerms, j int) {
	b.recordedLossBack(s, dlogits, logits, target, terms, 0, b.entryField(j, entryLossScale))
}

// QueuedUnscaleCheck launches unscale_check on every view, each reading
// the entry's factor and raising its flag.
func (b *Backend) QueuedUnscaleCheck(j int, gs []backend.View) {
	b.scaleAll(gs, 0, b.entryField(j, 0), b.entryField(j, entryInv))
}

func (b *Backend) CloseStep(j int, lr float64, rule backend.ScalerRule) {
	table := b.scratchPtr(queueTableOffset, 16*maxQueueSteps)
	b.launchGrid(KStepFactors, 1, 1, b.entry(j), b.queueState(), table, int(b.queueBase.Load()), int(b.queueRows.Load()), lr,
		rule.Growth, rule.Backoff, rule.Interval)
}

// QueuedClip sums the squares on the device (SumSquares' kernels), the
// finish leaving the norm and the factor in the entry, then multiplies
// every gradient by the entry's factor.
func (b *Backend) QueuedClip(j int, gs []backend.View, maxNorm, eps float64) {
	if !b.sumSquaresInto(gs, b.entry(j), maxNorm, eps) {
		panic(fmt.Sprintf("backend/cuda: clipping gradients of more than %d blocks of %d values", maxSumBlocks, backend.SumSquaresBlock))
	}
	b.scaleAll(gs, 0, devicePtr{}, b.entryField(j, entryClip))
}

// ReadQueue reads from the first entry through the last slot asked for.
func (b *Backend) ReadQueue(steps, slots, classes int) ([]backend.QueuedStep, []backend.SlotRecord, error) {
	if steps < 0 || steps > maxQueueSteps || slots < 0 || slots > b.RecordSlots() {
		panic(fmt.Sprintf("backend/cuda: reading %d queued steps and %d slots", steps, slots))
	}
	n := slotsOffset - queueEntryOffset + recordSlotBytes*slots
	raw, err := b.fetch(b.scratchPtr(queueEntryOffset, n), n)
	if err != nil {
		return nil, nil, err
	}
	entries := make([]backend.QueuedStep, steps)
	for j := range entries {
		e := raw[queueEntryBytes*j:]
		entries[j] = backend.QueuedStep{Finite: binary.LittleEndian.Uint32(e) == 0,
			GradNorm: math.Float64frombits(binary.LittleEndian.Uint64(e[entryNorm:]))}
	}
	recs := make([]backend.SlotRecord, slots)
	for i := range recs {
		r := &recs[i]
		r.Sum, r.Count, r.Err = decodeSlot(raw[slotsOffset-queueEntryOffset+recordSlotBytes*i:], classes)
	}
	return entries, recs, nil
}

// Failed is the first error the backend has recorded so far.
func (b *Backend) Failed() error { return b.failed() }

// maxSumBlocks is how many blocks' sums of squares the scratch holds.
const maxSumBlocks = 16 * maxPartials / 8

// SumSquares sums each view's blocks on the device (sum_squares) and the
// blocks in order (sum_squares_finish), and reads the total: one copy.
// More blocks than the scratch holds are composed (downloaded).
func (b *Backend) SumSquares(gs []backend.View) float64 {
	if !b.sumSquaresInto(gs, devicePtr{}, 0, 0) {
		return backend.Composed{Backend: b}.SumSquares(gs)
	}
	raw, err := b.fetch(b.scratchPtr(countsOffset, 8), 8)
	if err != nil {
		return math.NaN() // Sync returns the error
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(raw))
}

// sumSquaresInto launches the blocks' sums of gs and their finish into
// the scratch (and, with an entry, the norm and clipping factor for
// maxNorm there); false, launching nothing, where they are too many.
func (b *Backend) sumSquaresInto(gs []backend.View, entry devicePtr, maxNorm, eps float64) bool {
	const block = backend.SumSquaresBlock
	blocks := 0
	for _, g := range gs {
		blocks += (g.Len + block - 1) / block
	}
	if blocks > maxSumBlocks {
		return false
	}
	at := 0
	for _, g := range gs {
		n := (g.Len + block - 1) / block
		b.launch(KSumSquares, n, b.scratchPtr(partialsOffset+8*at, 8*n), ptr(g, backend.Float32), g.Len, block)
		at += n
	}
	b.launchGrid(KSumSquaresFinish, 1, 1, b.scratchPtr(countsOffset, 8), b.scratchPtr(partialsOffset, 8*max(blocks, 1)), blocks,
		entry, maxNorm, eps)
	return true
}
