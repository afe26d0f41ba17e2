package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/memunet/memunet/backend"
)

// A step's record in the scratch area: the finite flag at its start
// (UnscaleCheck's); the step queue's state, bias corrections and entries
// (queue.go); then from slotsOffset slots of recordSlotBytes, each a
// cross-entropy's loss and count (float64) and its first bad sample and
// value (int32, +1; loss_record's). The last slot is CrossEntropy's own.
const (
	queueStateOffset = 256
	queueTableOffset = 512
	maxQueueSteps    = 64
	queueEntryOffset = queueTableOffset + 16*maxQueueSteps
	queueEntryBytes  = 48
	slotsOffset      = 8192
	recordSlotBytes  = 32
	maxRecordSlots   = (countsOffset - slotsOffset) / recordSlotBytes
)

var _ backend.StepRecorder = (*Backend)(nil)

// recordSlot is slot i of the record.
func (b *Backend) recordSlot(i int) devicePtr {
	if i < 0 || i >= maxRecordSlots {
		panic(fmt.Sprintf("backend/cuda: record slot %d of %d", i, maxRecordSlots))
	}
	return b.scratchPtr(slotsOffset+recordSlotBytes*i, recordSlotBytes)
}

// crossEntropyInto sums a cross-entropy into slot: loss_partials over
// chunks of the pixels, then loss_record adding the chunks in order.
func (b *Backend) crossEntropyInto(s backend.Shape4, logits, target backend.View, slot int) {
	partials, bad, chunks := b.lossPartials(lossCE, 1, s, logits, target, 0)
	b.launchGrid(KLossRecord, 1, 1, b.recordSlot(slot), partials, bad, s.N, chunks)
}

// decodeSlot reads a slot's sum and count, or its bad target's
// *backend.TargetError.
func decodeSlot(raw []byte, classes int) (float64, int, error) {
	if first := int32(binary.LittleEndian.Uint32(raw[16:])); first != 0 {
		value := int32(binary.LittleEndian.Uint32(raw[20:]))
		return 0, 0, &backend.TargetError{Value: int(value) - 1, Sample: int(first) - 1, Classes: classes}
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(raw)), int(math.Float64frombits(binary.LittleEndian.Uint64(raw[8:]))), nil
}

// RecordSlots is how many micro-batches a step's record holds.
func (b *Backend) RecordSlots() int { return maxRecordSlots - 1 }

// RecordCrossEntropy is CrossEntropy into slot, not read.
func (b *Backend) RecordCrossEntropy(s backend.Shape4, logits, target backend.View, slot int) {
	b.crossEntropyInto(s, logits, target, b.checkSlot(slot))
}

// RecordedCrossEntropyBack is CrossEntropyBack with k from slot's count.
func (b *Backend) RecordedCrossEntropyBack(s backend.Shape4, dlogits, logits, target backend.View, slot int, scale float32) {
	b.crossEntropyBack(s, dlogits, logits, target, 0, b.recordSlot(b.checkSlot(slot)), scale, devicePtr{})
}

// checkSlot panics unless slot is one of RecordSlots.
func (b *Backend) checkSlot(slot int) int {
	if slot < 0 || slot >= b.RecordSlots() {
		panic(fmt.Sprintf("backend/cuda: record slot %d; a step has %d", slot, b.RecordSlots()))
	}
	return slot
}

// RecordUnscaleCheck unscales gs and raises the record's finite flag
// where a value is not finite, every view's kernel into one flag, unread
// (UnscaleCheck reads it at once).
func (b *Backend) RecordUnscaleCheck(gs []backend.View, inv float32) {
	flag := b.scratchPtr(0, 4)
	b.memsetD32(flag, 0, 1)
	b.scaleAll(gs, inv, flag, devicePtr{})
}

// scaleAll launches unscale_check on every view of gs: multiplied by inv,
// or by the float at invAt where that is set; raising flag where that is
// set and a value is not finite.
func (b *Backend) scaleAll(gs []backend.View, inv float32, flag, invAt devicePtr) {
	for _, g := range gs {
		b.launch(KUnscaleCheck, g.Len, ptr(g, backend.Float32), g.Len, inv, flag, invAt)
	}
}

// ReadRecord reads the finite flag and the first slots in one copy.
func (b *Backend) ReadRecord(slots, classes int) (sums []float64, counts []int, finite bool, err error) {
	if slots < 0 || slots > b.RecordSlots() {
		panic(fmt.Sprintf("backend/cuda: %d record slots; a step has %d", slots, b.RecordSlots()))
	}
	n := slotsOffset + recordSlotBytes*slots
	raw, err := b.fetch(b.scratchPtr(0, n), n)
	if err != nil {
		return nil, nil, false, err
	}
	for i := range slots {
		sum, count, err := decodeSlot(raw[slotsOffset+recordSlotBytes*i:], classes)
		if err != nil {
			return nil, nil, false, err
		}
		sums, counts = append(sums, sum), append(counts, count)
	}
	return sums, counts, binary.LittleEndian.Uint32(raw) == 0, nil
}

// A recorded loss's sums, coefficients and class weights in the scratch
// area (after the confusion counts' first bytes: neither is used while
// the other is).
const (
	lossSumsOffset    = countsOffset + 16<<10
	lossCoefOffset    = countsOffset + 32<<10
	lossWeightsOffset = countsOffset + 48<<10
)

// termBits are terms as loss_finish's and loss_coefs' terms (ops.cu's
// TERM_*), and where the classes are weighted, the weights' place in the
// scratch area (RecordLoss uploads them there; none for none).
func (b *Backend) termBits(terms backend.LossTerms, K int) (bits int, weights devicePtr) {
	if terms.CE {
		bits |= 1
	}
	if terms.Focal {
		bits |= 2
	}
	if terms.Dice {
		bits |= 4
	}
	if terms.Weights != nil {
		if len(terms.Weights) != K {
			panic(fmt.Sprintf("backend/cuda: %d class weights for %d classes", len(terms.Weights), K))
		}
		weights = b.scratchPtr(lossWeightsOffset, 8*K)
	}
	return bits, weights
}

// RecordLoss launches loss_partials and loss_finish.
func (b *Backend) RecordLoss(s backend.Shape4, logits, target backend.View, terms backend.LossTerms, slot int) {
	K := s.C
	if K > 256 {
		panic(fmt.Sprintf("backend/cuda: a recorded loss of %d classes; at most 256", K))
	}
	bits, weights := b.termBits(terms, K)
	if terms.Weights != nil { // loss_coefs reads them too
		raw := make([]byte, 8*K)
		for i, w := range terms.Weights {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(w))
		}
		b.upload("RecordLoss", weights, raw)
	}
	partials, bad, chunks := b.lossPartials(lossSums, K, s, logits, target, terms.Gamma)
	b.launchGrid(KLossFinish, 1, 1, b.recordSlot(b.checkSlot(slot)), b.scratchPtr(lossSumsOffset, 32*K), partials, bad, weights,
		s.N, K, chunks, bits, terms.Smooth)
}

func (b *Backend) RecordedLossBack(s backend.Shape4, dlogits, logits, target backend.View, terms backend.LossTerms, scale float32) {
	b.recordedLossBack(s, dlogits, logits, target, terms, scale, devicePtr{})
}

// recordedLossBack launches loss_coefs (the scale, or the float at
// scaleAt; the sums and weights RecordLoss left) and loss_back on its
// coefficients.
func (b *Backend) recordedLossBack(s backend.Shape4, dlogits, logits, target backend.View, terms backend.LossTerms, scale float32,
	scaleAt devicePtr) {
	K := s.C
	checkLen(dlogits, s.Len(), logits, s.Len(), target, s.N*s.H*s.W)
	bits, weights := b.termBits(terms, K)
	coefs := b.scratchPtr(lossCoefOffset, 12*K)
	b.launchGrid(KLossCoefs, 1, 1, coefs, b.scratchPtr(lossSumsOffset, 32*K), weights, K, bits, terms.Smooth, scale, scaleAt)
	b.launch(KLossBack, s.N*s.H*s.W, ptr(dlogits, logits.DT), floatPtr(logits), ptr(target, backend.Uint8), coefs, logits.DT,
		s.N, K, s.H*s.W, terms.Gamma)
}
