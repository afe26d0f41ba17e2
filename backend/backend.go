package backend

import (
	"fmt"
	"time"

	"github.com/memunet/memunet/memory"
)

// Backend is one device: its memory (an Allocator under the pool) and every
// numeric operation a training step, validation and predict need, on Views
// of buffers from a pool over that allocator. Layout is NCHW throughout.
//
// Contract, for every operation:
//   - Operations never allocate: outputs and workspace are views the caller
//     allocated from the pool, sized by the Sizer.
//   - Outputs named d* for parameters (dw, dbias, dgamma, dbeta) are
//     accumulated into (+=); every other output is overwritten. An output may
//     be the same view as an input only where the method says so.
//   - Float tensors of the layer and metric operations are fp32, or any
//     storage type for which Stages reports false for the operation's Op
//     (the caller stages the others through fp32 scratch with Convert).
//     The operations in no Op family take every float type as it is (their
//     contracts in ops.go say so).
//   - A shape that does not match its views is a programmer error and
//     panics. Operations may run asynchronously: their errors (other than
//     the data errors some return) surface at Sync; methods that return host
//     values (CrossEntropy, UnscaleCheck, Confusion, Download) wait for the
//     work before them.
type Backend interface {
	// Name says which device, e.g. "cpu" or "noop(cpu)".
	Name() string
	// Allocator is the memory this backend's views live in; pools for it
	// are made with memory.NewPool(b.Allocator(), ...).
	Allocator() memory.Allocator
	Sizer
	Transfer
	Layers
	Metrics
	Optimizer
	// Sync waits for every operation issued so far and returns the first
	// error among them.
	Sync() error
}

// Sizer is what the caller must know to allocate for a backend: pure
// functions of shapes and operations, shared with the planner, which sizes
// a run for its target backend.
type Sizer interface {
	// ConvWorkspace is the float32 count Conv and ConvBack take as ws.
	ConvWorkspace(s ConvShape) int
	// UpConvWorkspace is the float32 count UpConv and UpConvBack take as ws.
	UpConvWorkspace(s UpConvShape) int
	// Stages reports whether the operations of family op take tensors of
	// type dt only as fp32 copies (staging), one image at a time for
	// convolutions. It is false for Float32. Where it is false for a 16-bit
	// dt, the activations and their gradients (and, for OpConv, the
	// weights) reach those operations in dt; biases, parameter gradients,
	// norm parameters and statistics and workspace are fp32 always.
	Stages(op Op, dt DType) bool
	// Supports reports whether the backend runs operation m itself; it is
	// false only for an optional operation (ops.go) that the backend runs
	// as Composed's composition of required ones, which allocates nothing,
	// so a plan is the same either way.
	Supports(m Method) bool
}

// Op is a family of layer operations that a backend takes 16-bit tensors
// for directly or only through fp32 staging (Sizer.Stages). The operations
// in none take every float type.
type Op uint8

const (
	// OpConv is Conv, ConvBack, UpConv and UpConvBack.
	OpConv Op = iota
	// OpNorm is BatchNorm, BatchNormEval, BatchNormBack, GroupNorm and
	// GroupNormBack.
	OpNorm
	// OpPool is MaxPool2, MaxPool2Back, MaxPool3 and MaxPool3Back.
	OpPool
	// OpUpsample is Upsample2, Upsample2Back, Upsample3 and Upsample3Back.
	OpUpsample
	// OpAdd is Add.
	OpAdd
	// OpLoss is CrossEntropy, CrossEntropyBack, LossSums and LossBack.
	OpLoss
)

// Ops is every Op, in order.
var Ops = [...]Op{OpConv, OpNorm, OpPool, OpUpsample, OpAdd, OpLoss}

// String is the family's name.
func (op Op) String() string {
	switch op {
	case OpConv:
		return "conv"
	case OpNorm:
		return "norm"
	case OpPool:
		return "pool"
	case OpUpsample:
		return "upsample"
	case OpAdd:
		return "add"
	case OpLoss:
		return "loss"
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// IgnoreIndex is the target value whose pixels the loss and metrics skip.
const IgnoreIndex = 255

// Clock is a backend that times its own work as it runs it (the CUDA
// backend: events on its compute stream), for profiles: where operations
// run asynchronously, the host's clock measures only their issuing.
type Clock interface {
	// Mark is a point in the work issued so far.
	Mark() Mark
	// Between is the time the work issued from mark from to mark to took,
	// waiting for it to run.
	Between(from, to Mark) time.Duration
	// ReleaseMark gives a mark back.
	ReleaseMark(m Mark)
}

// Mark is a point in a Clock's work.
type Mark uintptr

// Offloader is a backend with host memory its device copies to and from
// directly (pinned memory on a GPU, plain memory on the CPU): where tensors
// wait outside the device's memory until they are needed again
// (memory.offload).
type Offloader interface {
	// HostAllocator is that memory; a pool over it holds the offloaded
	// tensors, apart from the device's pool.
	HostAllocator() memory.Allocator
	// ToHost copies src (device memory) into dst (HostAllocator's memory):
	// same type and length. ToDevice copies back.
	ToHost(dst, src View)
	ToDevice(dst, src View)
}

// StepRecorder is a backend that can leave a training step's plain
// cross-entropy sums and its gradients' finite check on the device, to be
// read in one copy at the step's end (the CUDA backend, where each read
// stalls the device until its work is done). Slot i is the step's
// micro-batch i, fewer than RecordSlots.
type StepRecorder interface {
	RecordSlots() int
	// RecordCrossEntropy is CrossEntropy with its sum, count and bad
	// targets left in slot.
	RecordCrossEntropy(s Shape4, logits, target View, slot int)
	// RecordedCrossEntropyBack is CrossEntropyBack with k =
	// scale/float32(count) of slot's count (0 where it is 0), as
	// CrossEntropy's caller computes it from the count it returns.
	RecordedCrossEntropyBack(s Shape4, dlogits, logits, target View, slot int, scale float32)
	// RecordLoss is LossSums for a loss of terms with the value formed on
	// the device: left in slot as a sum with a count of 1 (bad targets as
	// RecordCrossEntropy's), the sums kept for RecordedLossBack.
	RecordLoss(s Shape4, logits, target View, terms LossTerms, slot int)
	// RecordedLossBack is LossBack with the coefficients of the last
	// RecordLoss's sums times scale, formed on the device.
	RecordedLossBack(s Shape4, dlogits, logits, target View, terms LossTerms, scale float32)
	// RecordUnscaleCheck is UnscaleCheck with its answer left for
	// ReadRecord.
	RecordUnscaleCheck(gs []View, inv float32)
	// ReadRecord returns the first slots' sums and counts and whether
	// every gradient the last RecordUnscaleCheck saw was finite, in one
	// copy; a bad target is the first such slot's *TargetError (classes:
	// the logits' K).
	ReadRecord(slots, classes int) (sums []float64, counts []int, finite bool, err error)
}

// StepQueue is a StepRecorder that runs whole optimizer steps with no
// read of the device: each step's finite check decides on the device
// whether its optimizer kernels update (they skip where it failed), the
// optimizer's step count and the grad scaler's scale and growth tracker
// live there, and a window of steps is read in one copy (ReadQueue), where
// the host learns the losses and which steps were skipped. Step j of the
// window (below QueueSteps) has one entry; its micro-batches take
// consecutive record slots.
type StepQueue interface {
	StepRecorder
	// QueueSteps is how many steps a window holds.
	QueueSteps() int
	// StartQueue begins a window from the host's state: the device's step
	// count, scale and tracker become s's.
	StartQueue(s QueueStart)
	// OpenStep begins step j: its flag cleared, its loss scale (the
	// scaler's scale over accum) and unscale factor (1 over it) taken from
	// the device's scaler, as float32 of the float64 quotients.
	OpenStep(j, accum int)
	// QueuedCrossEntropyBack is RecordedCrossEntropyBack with the loss
	// scale of step j's entry.
	QueuedCrossEntropyBack(s Shape4, dlogits, logits, target View, slot, j int)
	// QueuedLossBack is RecordedLossBack with the loss scale of step j's
	// entry.
	QueuedLossBack(s Shape4, dlogits, logits, target View, terms LossTerms, j int)
	// QueuedUnscaleCheck is RecordUnscaleCheck with the unscale factor
	// and the flag of step j's entry.
	QueuedUnscaleCheck(j int, gs []View)
	// QueuedClip is clip_grad_norm_ on step j's gradients gs, after
	// QueuedUnscaleCheck: their global L2 norm (SumSquares' sum) and the
	// factor for maxNorm (optim.ClipCoef's, eps its epsilon) are kept in
	// the entry, and every gradient is multiplied by the factor.
	QueuedClip(j int, gs []View, maxNorm, eps float64)
	// CloseStep decides step j once its gradients are checked: the step
	// count advances where they were finite, Adam's factors at lr follow
	// from it (StartQueue's bias corrections), then the scaler updates
	// by rule. The optimizer's kernels, given EntryOf(j), come after.
	CloseStep(j int, lr float64, rule ScalerRule)
	// ReadQueue reads the window's first steps' entries and its first
	// slots (as ReadRecord's) in one copy.
	ReadQueue(steps, slots, classes int) ([]QueuedStep, []SlotRecord, error)
	// Failed is the error the host already knows the device met (a launch
	// that failed, a library that fits no algorithm), without waiting for
	// the device; nil if none.
	Failed() error
}

// LossTerms is a loss other than the plain cross-entropy, which a
// StepRecorder forms on the device from LossSums' sums (model.LossConfig's
// value and coefficients, the same float64 expressions).
type LossTerms struct {
	// CE and Dice are its terms: the cross-entropy, weighted or (Focal,
	// with Gamma) focal; soft Dice with Smooth.
	CE, Focal, Dice bool
	Gamma           float32
	Smooth          float64
	// Weights are the classes' weights (nil: 1 each).
	Weights []float64
}

// StepEntry names a queued step's entry on the device (StepQueue) for
// the optimizer kernels; the zero value names none.
type StepEntry int

// EntryOf is step j's entry.
func EntryOf(j int) StepEntry { return StepEntry(j + 1) }

// Index is the entry's step in its window, -1 for none.
func (e StepEntry) Index() int { return int(e) - 1 }

// QueueStart is the host's state a StepQueue window starts from.
type QueueStart struct {
	// Steps is the optimizer's step count (its updates so far).
	Steps int64
	// Scale and Tracker are the grad scaler's (Scale 1 where it is off).
	Scale   float64
	Tracker int
	// BiasCorrections holds Adam's (1-beta1^t, 1-beta2^t) for t = Steps+1,
	// Steps+2, ..., at least QueueSteps pairs; none for other optimizers.
	BiasCorrections []float64
}

// ScalerRule is the grad scaler's update (optim.GradScaler): backoff on a
// step that was not finite, growth after Interval finite ones in a row;
// the zero value (Growth 0) leaves the scale alone.
type ScalerRule struct {
	Growth, Backoff float64
	Interval        int
}

// QueuedStep is one queued step's entry as read: whether its gradients
// were all finite (it updated), and their norm where QueuedClip clipped
// them.
type QueuedStep struct {
	Finite   bool
	GradNorm float64
}

// SlotRecord is one record slot as read: a cross-entropy's sum and
// count, or its bad target (*TargetError).
type SlotRecord struct {
	Sum   float64
	Count int
	Err   error
}

// WorkCounts are what the host asked of a device (device.WorkCounter).
type WorkCounts struct {
	// Launches are the kernels launched (a library's call counts as one).
	Launches int64
	// CopiesToHost are the blocking copies to the host and BlockingUploads
	// the uploads that wait for the work before them (pageable memory's
	// cuMemcpyHtoD): each a stall, the device idle until the host issues
	// more. Syncs are the waits for all work.
	CopiesToHost, BlockingUploads, Syncs int64
}

// Minus is the counts from o to c.
func (c WorkCounts) Minus(o WorkCounts) WorkCounts {
	return WorkCounts{c.Launches - o.Launches, c.CopiesToHost - o.CopiesToHost, c.BlockingUploads - o.BlockingUploads, c.Syncs - o.Syncs}
}
