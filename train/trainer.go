package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/optim"
)

// Phases of an optimizer step whose memory is logged.
const (
	PhaseForward   = "forward"
	PhaseBackward  = "backward"
	PhaseOptimizer = "optimizer"
)

// PhaseStep is the pool phase (memory.Pool.BeginPhase) of a whole
// optimizer step; validation's is PhaseValidation.
const PhaseStep = "step"

// PhaseMemory is the pool's state at the end of a phase and its peak during
// the phase (for forward and backward: the largest over the micro-batches).
type PhaseMemory struct {
	AllocatedBytes      int64            `json:"allocated_bytes"`
	ReservedBytes       int64            `json:"reserved_bytes"`
	PeakAllocatedBytes  int64            `json:"peak_allocated_bytes"`
	PeakReservedBytes   int64            `json:"peak_reserved_bytes"`
	AllocatedByCategory map[string]int64 `json:"allocated_by_category"`
	// PeakByCategory splits PeakAllocatedBytes by category at the moment of the peak.
	PeakByCategory map[string]int64 `json:"peak_by_category"`
	// DeviceUsedBytes is the device's own count of memory in use at the
	// end of the phase (device.MemoryReporter: cuMemGetInfo on a GPU); 0
	// where the backend does not report it (the CPU).
	DeviceUsedBytes int64 `json:"device_used_bytes,omitempty"`
}

// PhaseMemoryOf is a pool snapshot as a PhaseMemory.
func PhaseMemoryOf(st memory.Stats) PhaseMemory {
	pm := PhaseMemory{
		AllocatedBytes: st.Allocated.Current, ReservedBytes: st.Reserved.Current,
		PeakAllocatedBytes: st.Allocated.Peak, PeakReservedBytes: st.Reserved.Peak,
		AllocatedByCategory: map[string]int64{}, PeakByCategory: map[string]int64{},
	}
	for _, c := range memory.Categories() {
		pm.AllocatedByCategory[c.String()] = st.ByCategory[c].Current
		pm.PeakByCategory[c.String()] = st.AtPeak[c]
	}
	return pm
}

// Trainer holds a run's state: model, optimizer, scaler, data order and the
// device (backend and pool) everything is allocated from.
type Trainer struct {
	Config config.Config
	Device *model.Device
	Net    *model.UNet
	Opt    optim.Optimizer
	Scaler *optim.GradScaler
	// DataFingerprint identifies the dataset it trains on (checkpoints
	// record it, so resuming on changed data is noticed).
	DataFingerprint data.Fingerprint
	// MaskValues is each class's raw value in the dataset's masks (nil when
	// classes are their own values), so predictions can be written in them.
	MaskValues []int
	// PreviewImages is how many of the first validation images Validate
	// keeps in Preview, with their masks and predicted classes (0: none).
	PreviewImages int
	Preview       *Preview

	data          data.Dataset
	whole         data.ImageSource // a data.patch run's images, whole: validated by tiles
	trainIdx      []int
	valIdx        []int
	images        *model.Tensor // one micro-batch, on the device
	masks         backend.View  // its targets (Uint8), on the device
	hostImages    []float32     // the loader fills these, then they are uploaded
	hostMasks     []uint8
	env           *model.Env
	microPerEpoch int
	micro         int          // micro-batches consumed so far
	loader        *data.Loader // the training micro-batches, decoded ahead; nil until the first
	// AfterBackward, if set, runs after the last micro-batch's backward of
	// every step, before the optimizer (a hook for tests).
	AfterBackward func()

	// OptimizerTime adds up unscaling, Adam and refreshing the 16-bit
	// weights; with EnableProfile, the layers' times are in Profile.
	OptimizerTime time.Duration
	Profile       *model.Profile

	// Schedule is the learning rate over the run (train.schedule);
	// SchedState its state (a plateau schedule's), StepsDone the optimizer
	// steps taken, whose rates it has given.
	Schedule   optim.Schedule
	SchedState optim.ScheduleState
	StepsDone  int

	// Loss is train.loss, with auto class weights computed (ClassWeights).
	Loss model.LossConfig
	// AllocatorNote says why memory.allocator: arena fell back to the
	// caching pool ("" when it did not).
	AllocatorNote string

	// comm is the data-parallel job (dist.Single: this process alone);
	// synced says rank 0's parameters were copied to every rank; bucket is
	// the host buffer of one all-reduce.
	comm   dist.Comm
	synced bool
	bucket []float32

	// pending are the queued steps not yet read (queue.go); settled those
	// a full window's read has settled, not yet taken by Settle.
	pending []pendingStep
	settled []StepResult

	// FitLog records memory.fit: auto's decisions, one line each.
	FitLog   []string
	fitFrom  config.Config  // the configuration as given
	fitQueue []FitCandidate // later candidates for an OOM during training
}

// Target is the backend cfg trains on: config key device (device.Open),
// waiting after each kernel launch with cuda.sync_launches, its fp32
// convolutions on TF32 with cuda.tf32, its convolution provider resolved
// from cuda.conv (device.ResolveConv: cudnn without a usable cuDNN is an
// error here, before any training).
func Target(cfg config.Config) (backend.Backend, error) {
	b, err := device.Open(cfg.Device)
	if s, ok := b.(device.LaunchSyncer); ok && cfg.CUDA.SyncLaunches {
		s.SetSyncLaunches(true)
	}
	if s, ok := b.(device.TF32Setter); ok {
		s.SetTF32(cfg.CUDA.TF32)
	}
	if err == nil {
		if err := device.ResolveConv(b, cfg.CUDA.Conv, cfg.ConvPolicy()); err != nil {
			return nil, err
		}
	}
	return b, err
}

// Placement is where a Trainer trains: on Backend (nil: the backend the
// config key device names; another, say, for the CUDA emulator in tests)
// and as one rank of Comm (nil: one process; else comm's ranks train one
// model on their shares of every micro-batch, see Trainer.Comm).
type Placement struct {
	Backend backend.Backend
	Comm    dist.Comm
}

// NewTrainer builds the dataset, the model, the optimizer and the batch
// buffers where at places them. It trusts cfg: a loaded config is
// validated (config.Parse), and one changed by code is validated by the
// code that changed it.
//
// With memory.fit: auto it trains the first of FitCandidates that plan says
// fits memory.capacity (FitLog says which and why) and keeps the later ones
// for an out-of-memory error during training.
func NewTrainer(cfg config.Config, at Placement) (*Trainer, error) {
	b, comm := at.Backend, at.Comm
	if b == nil {
		var err error
		if b, err = Target(cfg); err != nil {
			return nil, err
		}
	}
	if comm == nil {
		comm = dist.Single{}
	}
	return fitTrainer(cfg, b, comm)
}

// fitTrainer is NewTrainer for a validated cfg on backend b: the capacity
// and model.checkpoint: auto resolved, memory.fit: auto's variant chosen.
func fitTrainer(cfg config.Config, b backend.Backend, comm dist.Comm) (*Trainer, error) {
	cfg, _ = ResolveCapacity(cfg, b)
	cfg, recomputeNote, err := ChooseRecompute(cfg, b)
	if err != nil {
		return nil, err
	}
	if cfg.Memory.Fit != "auto" {
		t, err := buildTrainer(cfg, b, comm)
		if t != nil && recomputeNote != "" {
			t.FitLog = []string{recomputeNote}
		}
		return t, err
	}
	chosen, why, err := Fit(cfg)
	if err != nil {
		return nil, err
	}
	t, err := buildTrainer(chosen, b, comm)
	if err != nil {
		return nil, err
	}
	t.FitLog, t.fitFrom = []string{why}, cfg
	if recomputeNote != "" {
		t.FitLog = append([]string{recomputeNote}, t.FitLog...)
	}
	cands := FitCandidates(cfg)
	for i, c := range cands {
		if describeChanges(cfg, c.Config) == describeChanges(cfg, chosen) {
			t.fitQueue = cands[i+1:]
			break
		}
	}
	return t, nil
}

// buildTrainer is fitTrainer without memory.fit; with the
// planning backend (noop) everything is allocated from a virtual pool and
// steps are dry runs (see Plan).
func buildTrainer(cfg config.Config, b backend.Backend, comm dist.Comm) (*Trainer, error) {
	var arena *memory.ArenaPlan
	var note string
	if cfg.Memory.Allocator == "arena" {
		plan, err := arenaPlan(cfg, b, dist.Planned{Of: comm.Rank(), Ranks: comm.Size()})
		var perr *memory.ArenaPlanError
		switch {
		case errors.As(err, &perr):
			// A run the arena cannot plan still trains, on the cache.
			note = fmt.Sprintf("memory.allocator: arena: %v; training with the caching pool instead", err)
		case err != nil:
			return nil, err
		default:
			arena = &plan
		}
	}
	t, err := buildTrainerWith(cfg, b, memory.Options{Arena: arena}, comm)
	if t != nil {
		t.AllocatorNote = note
	}
	return t, err
}

// buildTrainerWith is buildTrainer with the pool's arena plan, tracing and
// hooks given (capacity and timeline come from cfg).
func buildTrainerWith(cfg config.Config, b backend.Backend, opts memory.Options, comm dist.Comm) (*Trainer, error) {
	set, err := OpenSet(cfg)
	if err != nil {
		return nil, err
	}
	t := &Trainer{Config: cfg, data: set.Data, DataFingerprint: set.Fingerprint(), MaskValues: set.Report.ClassValues(cfg.Model.Classes), comm: comm}
	t.trainIdx, t.valIdx = set.Train, set.Val
	t.whole, _ = data.WholeImages(set.Data)
	batch, accum, ranks := cfg.Train.BatchSize, cfg.Train.Accumulate, comm.Size()
	if len(t.trainIdx) < batch*accum*ranks {
		more := "raise data.count"
		if cfg.Data.Source != data.SourceSynthetic { // data.count sizes synthetic data only
			more = fmt.Sprintf("add samples to %s (or lower data.val_fraction, or move samples from val/ to train/)", cfg.Data.Path)
		}
		return nil, fmt.Errorf("train.batch_size %d x train.accumulate %d x %d ranks needs %d training samples, there are %d; lower them or %s",
			batch, accum, ranks, batch*accum*ranks, len(t.trainIdx), more)
	}
	// Whole accumulation cycles per epoch; the rest of an epoch is dropped so
	// that every micro-batch has the same size and memory.
	if _, h, w := data.SampleShape(set.Data); cfg.Data.Augment.Validate(h, w, cfg.Model.Volumes()) != nil {
		return nil, cfg.Data.Augment.Validate(h, w, cfg.Model.Volumes())
	}
	t.microPerEpoch = len(t.trainIdx) / (batch * accum * ranks) * accum // each covers batch x ranks samples
	total := cfg.Train.Steps
	if total == 0 && t.microPerEpoch > 0 {
		total = cfg.Train.Epochs * t.microPerEpoch / accum
	}
	t.Schedule = cfg.LRSchedule(max(total, 1))
	t.SchedState = t.Schedule.Start()

	opts.Capacity, opts.Timeline = int64(cfg.Memory.Capacity), cfg.Memory.Timeline
	if cfg.Memory.Poison {
		opts.OnFree = func(buf *memory.Buffer) {
			if n := int(buf.Len() / 4); n > 0 {
				b.Fill(backend.View{Buf: buf, DT: backend.Float32, Len: n}, float32(math.NaN()))
			}
		}
	}
	t.Device = model.NewDevice(b, opts)
	if cfg.Memory.Offload == config.OffloadCheckpoints {
		off, ok := b.(backend.Offloader)
		if !ok {
			return nil, fmt.Errorf("memory.offload: checkpoints: the %s backend has no host memory to offload to", b.Name())
		}
		t.Device.Host = memory.NewPool(off.HostAllocator(), memory.Options{})
	}
	var weights []float64
	if cfg.Train.Loss.ClassWeights.Auto && !t.Pool().Virtual() { // a plan's loss has no values to weight
		if weights, err = ClassWeights(set.Data, t.trainIdx, cfg.Model.Classes); err != nil {
			return nil, fmt.Errorf("train.loss.class_weights: auto: %w", err)
		}
	}
	t.Loss = cfg.LossConfig(weights)
	prec := cfg.Train.Precision
	t.env = &model.Env{Device: t.Device, Training: true, Precision: prec}
	if cfg.Dist.SyncBatchNorm && comm.Size() > 1 {
		t.env.SyncSum = comm.AllReduceSum64
	}
	if t.Net, err = model.New(t.Device, cfg.ModelConfig(), cfg.Model.Seed); err != nil {
		return nil, t.ExplainOOM(err, "building the model")
	}
	if err := t.Net.SetPrecision(prec); err != nil {
		t.Close()
		return nil, t.ExplainOOM(err, "the 16-bit weight copies")
	}
	learned, err := unfrozen(t.Net.Params(), cfg.Train.Freeze)
	if err != nil {
		t.Close()
		return nil, err
	}
	if t.Opt, err = optim.New(t.Device, learned, cfg.OptimizerConfig()); err != nil {
		t.Close()
		return nil, t.ExplainOOM(err, "the optimizer's state")
	}
	sc := cfg.Train.Scaler
	t.Scaler = &optim.GradScaler{Enabled: cfg.ScalerEnabled(), Scale: sc.InitScale, GrowthFactor: sc.GrowthFactor,
		BackoffFactor: sc.BackoffFactor, GrowthInterval: sc.GrowthInterval}
	if what, err := t.allocBatch(batch); err != nil {
		t.Close()
		return nil, t.ExplainOOM(err, what)
	}
	return t, nil
}

// allocBatch allocates the device buffers of one micro-batch of b samples
// (images, then targets) and their host staging; on failure it says which.
func (t *Trainer) allocBatch(b int) (string, error) {
	H, W := t.data.Size()
	var err error
	if t.images, err = newInput(t.Device, t.Config.Model.Arch, t.data, b); err != nil {
		return "the input batch", err
	}
	masks, err := t.Pool().Alloc(memory.Activations, int64(b*H*W))
	if err != nil {
		return "the mask batch", err
	}
	t.masks = backend.Whole(masks, backend.Uint8)
	t.hostImages, t.hostMasks = nil, nil // made by the first nextBatch that fills them
	return "", nil
}

// Split is the trainer's split by name.
func (t *Trainer) Split() data.SplitNames {
	return data.SplitNames{Train: data.SampleNames(t.data, t.trainIdx), Val: data.SampleNames(t.data, t.valIdx)}
}

// newInput allocates n samples of ds as the model takes them: images
// (n,C,H,W), or volumes (n,C,D,H,W) for a 3D UNet.
func newInput(dev *model.Device, arch model.Arch, ds data.Dataset, n int) (*model.Tensor, error) {
	d, h, w := data.SampleShape(ds)
	if !arch.Volumes() {
		d = 0
	}
	return model.NewVolume(dev, memory.Activations, backend.Float32, n, ds.Channels(), d, h, w)
}

// freeBatch frees what allocBatch allocated.
func (t *Trainer) freeBatch() {
	if !t.masks.None() {
		t.Pool().MustFree(t.masks.Buf)
		t.masks = backend.View{}
	}
	t.images.Release()
	t.images = nil
}

// OpenData opens the configured dataset (synthetic, folder or voc; resized,
// scaled and normalized as data.* says) and splits it. A file source is read
// and checked in full first, so a bad file stops the run here, naming it;
// its one-line summary (with the mask values a scan found) goes to stderr.
func OpenData(cfg config.Config) (ds data.Dataset, trainIdx, valIdx []int, err error) {
	set, err := OpenSet(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return set.Data, set.Train, set.Val, nil
}

// OpenSet is OpenData's data.Set (with the test split, where there is one).
func OpenSet(cfg config.Config) (*data.Set, error) {
	return OpenSetContext(context.Background(), cfg)
}

// OpenSetContext is OpenSet that stops reading the files, with ctx's
// error, once ctx is done (a signal during the scan of a large folder). An
// open set is kept (data.OpenCached), so the trainer built after it reads
// nothing again.
func OpenSetContext(ctx context.Context, cfg config.Config) (*data.Set, error) {
	set, fresh, err := data.OpenCachedContext(ctx, cfg.DataConfig())
	if problems := (*data.ProblemsError)(nil); errors.As(err, &problems) {
		problems.Check = cfg.Invocation.Command("data check")
	}
	if err != nil {
		return nil, err
	}
	if fresh && cfg.Data.Source != data.SourceSynthetic {
		fmt.Fprintln(os.Stderr, set.Report.Summary(cfg.Invocation.Command("data check")))
	}
	return set, nil
}

// Close returns everything to the pool.
func (t *Trainer) Close() {
	if t.loader != nil {
		t.loader.Close()
		t.loader = nil
	}
	t.freeBatch()
	if t.Opt != nil {
		t.Opt.Free()
		t.Opt = nil
	}
	if t.Net != nil {
		t.Net.Free()
		t.Net = nil
	}
	if t.Device != nil && t.Device.Host != nil {
		t.Device.Host.EmptyCache() // pinned memory is scarce: give it back now
	}
	if t.Device != nil {
		t.Device.Pool.Release() // the trainer's own: the next one takes as much
	}
}

// OffloadedPeak is the most the host pool of offloaded tensors held
// (memory.offload), 0 without offloading.
func (t *Trainer) OffloadedPeak() int64 {
	if t.Device == nil || t.Device.Host == nil {
		return 0
	}
	return t.Device.Host.Stats().Allocated.Peak
}

// EnableProfile starts adding up the time per layer kind in t.Profile:
// on the backend's own clock where it has one (a GPU's events).
func (t *Trainer) EnableProfile() {
	clock, _ := t.env.Backend.(backend.Clock)
	t.Profile = model.NewProfile(clock)
	t.env.Profile = t.Profile
}

// Pool is the device's pool, where everything the trainer holds lives.
func (t *Trainer) Pool() *memory.Pool { return t.Device.Pool }

// Position is where the trainer is in the data: micro-batches consumed since
// the start of training, and micro-batches per epoch (both in the current
// micro-batch size).
func (t *Trainer) Position() (consumed, perEpoch int) { return t.micro, t.microPerEpoch }

// Seek makes the next micro-batch number consumed (resuming a checkpoint).
func (t *Trainer) Seek(consumed int) { t.micro = consumed }

// FitFrom is the configuration memory.fit: auto started from.
func (t *Trainer) FitFrom() config.Config { return t.fitFrom }

// StepsPerEpoch is the number of optimizer steps in one pass over the
// training samples.
func (t *Trainer) StepsPerEpoch() int { return t.microPerEpoch / t.Config.Train.Accumulate }

// StepResult is what one optimizer step did.
type StepResult struct {
	Loss    float64 // mean of the micro-batch losses
	Epoch   int     // 1-based epoch of the step's micro-batches
	Skipped bool    // gradients were not finite; weights and Adam untouched
	Retried bool    // an out-of-memory error was met and the step run again
	// CommTime is the time spent in data-parallel communication: rank 0's
	// parameters and buffers, the gradients' all-reduce, the loss's.
	CommTime time.Duration
	Phases   map[string]PhaseMemory
	// Peak is the step's peak allocated bytes, PeakByCategory its split.
	Peak           int64
	PeakReserved   int64
	PeakByCategory map[string]int64
	// LR is the learning rate the step's update used (train.schedule).
	LR float64
	// GradNorm is the global L2 norm of the step's gradients before
	// clipping, where it clipped (train.clip_grad_norm set and the
	// gradients finite); Clipping says whether it did.
	GradNorm float64
	Clipping bool
	// DeviceUsedPeak is the largest device memory in use the phases' ends
	// saw (device.MemoryReporter); 0 on the CPU.
	DeviceUsedPeak int64
	// LossScale, GrowthTracker and SkippedSteps are the grad scaler's
	// after the step.
	LossScale     float64
	GrowthTracker int
	SkippedSteps  int
	// Pending says the step is queued on the device (queue.go): Loss,
	// Skipped and the scaler's state are known once Settle returns it.
	Pending bool
}

// Step runs one optimizer step: accumulate micro-batches of forward and
// backward, unscale and check the gradients, clip them (train.clip_grad_norm),
// then Adam (or skip) and the scaler's update.
func (t *Trainer) Step() (StepResult, error) {
	// A step is a phase: an arena pool places its buffers by the plan.
	t.Pool().BeginPhase(PhaseStep)
	defer t.Pool().EndPhase()
	defer t.Pool().TimelinePhase("")
	retry, fit := t.Config.Memory.EmptyCache == config.EmptyOOM, t.Config.Memory.Fit == "auto"
	var restore func()
	if retry || fit {
		restore = t.Net.SaveBuffers()
	}
	samples := t.micro * t.Config.Train.BatchSize
	mark := t.Pool().Mark()
	res, err := t.step()
	var oom *memory.OutOfMemoryError
	abandon := func() {
		// Drop the failed attempt wholesale and rewind to where it started.
		t.Net.Forget()
		t.Pool().FreeSince(mark, memory.Activations, memory.Workspace)
		restore()
		t.micro = samples / t.Config.Train.BatchSize
		t.Pool().BeginPhase(PhaseStep) // the retry starts the step's plan over
	}
	if err != nil && retry && errors.As(err, &oom) {
		abandon()
		t.Pool().EmptyCache()
		res, err = t.step()
		res.Retried = true
	}
	for err != nil && fit && errors.As(err, &oom) {
		abandon()
		ok, why := t.fitNext()
		if !ok {
			break
		}
		t.FitLog = append(t.FitLog, why)
		mark = t.Pool().Mark()
		res, err = t.step()
		res.Retried = true
	}
	if err != nil {
		t.Net.Forget()
		t.Pool().FreeSince(mark, memory.Activations, memory.Workspace)
		return res, t.ExplainOOM(err, "a training step")
	}
	if t.Config.Memory.EmptyCache == config.EmptyStep {
		t.Pool().EmptyCache()
	}
	t.StepsDone++
	return res, nil
}

// Validated tells the schedule a validation's train.monitor score (a
// plateau schedule decays on it).
func (t *Trainer) Validated(v metrics.Validation) {
	t.Schedule.Validated(v.Score(t.Config.Train.Monitor), &t.SchedState)
}

func (t *Trainer) step() (StepResult, error) {
	accum := t.Config.Train.Accumulate
	res := StepResult{Phases: map[string]PhaseMemory{}}
	mem := stepMemory{res: &res}
	mem.reporter, _ = t.Device.Backend.(device.MemoryReporter)
	keep := mem.keep
	// Divide each micro-batch's loss by accum, and scale it for fp16; the
	// scale stays the same over the whole cycle.
	lossScale := float32(t.Scaler.LossScale() / float64(accum))
	commStart := time.Now()
	if err := t.syncFromRankZero(); err != nil {
		return res, err
	}
	res.CommTime += time.Since(commStart)
	t.Net.ZeroGrad()
	// A device that records the step keeps each micro-batch's plain
	// cross-entropy and the finite check there, read in one copy below;
	// one that queues steps reads them a window at a time (queue.go).
	recorder, recorded := t.recorder()
	queue, limit := t.stepQueue()
	j, slot0, err := t.openQueued(queue, limit, accum)
	if err != nil {
		return res, err
	}
	var at backend.StepEntry
	if queue != nil {
		at = backend.EntryOf(j)
	}
	for k := 0; k < accum; k++ {
		t.Pool().TimelinePhase(PhaseForward)
		epoch, err := t.nextBatch()
		if err != nil {
			return res, err
		}
		res.Epoch = epoch
		t.Pool().ResetPeak()
		logits, err := t.Net.Forward(t.env, t.images)
		if err != nil {
			return res, err
		}
		keep(PhaseForward, t.Pool().Stats())
		t.Pool().TimelinePhase(PhaseBackward)
		t.Pool().ResetPeak()
		l := model.Loss{Config: t.Loss}
		var loss float64
		if recorded {
			err = l.ForwardRecorded(t.env, logits, t.masks, recorder, slot0+k, at)
		} else {
			loss, err = l.Forward(t.env, logits, t.masks)
		}
		logits.Release()
		if err != nil {
			return res, err
		}
		dlogits, err := l.Backward(t.env, lossScale)
		if err != nil {
			return res, err
		}
		if err := t.Net.Backward(t.env, dlogits); err != nil {
			return res, err
		}
		keep(PhaseBackward, t.Pool().Stats())
		if !recorded {
			res.Loss += loss / float64(accum)
		}
	}
	// Data parallel: every rank's gradients become their mean over the
	// ranks, so every rank takes the same step (a non-finite gradient on one
	// is non-finite on all after the sum: all skip).
	commStart = time.Now()
	if err := t.allReduceGradients(); err != nil {
		return res, err
	}
	if n := t.comm.Size(); n > 1 {
		loss := []float64{res.Loss}
		if err := t.comm.AllReduceSum64(loss); err != nil {
			return res, err
		}
		res.Loss = loss[0] / float64(n)
	}
	res.CommTime += time.Since(commStart)
	if t.AfterBackward != nil {
		t.AfterBackward()
	}
	t.Pool().TimelinePhase(PhaseOptimizer)
	t.Pool().ResetPeak()
	optStart := time.Now()
	res.LR = t.Schedule.At(t.StepsDone, t.SchedState)
	if queue != nil {
		t.closeQueued(queue, j, res.LR)
		res.Pending = true
	} else if err := t.optimizerStep(recorder, recorded, accum, &res); err != nil {
		return res, err
	}
	t.OptimizerTime += time.Since(optStart)
	// Everything the step issued has run: an error the device reported
	// (a GPU fault, named by its kernel where known) fails the step. A
	// queued step's are reported where it is read.
	if queue == nil {
		if err := t.Device.Backend.Sync(); err != nil {
			return res, err
		}
	}
	keep(PhaseOptimizer, t.Pool().Stats())
	res.Peak = mem.best.Allocated.Peak
	res.PeakByCategory = PhaseMemoryOf(mem.best).PeakByCategory
	if queue != nil {
		if err := queue.Failed(); err != nil {
			t.pending = nil // known before any read: the window's answers are lost with it
			return res, err
		}
		t.pending = append(t.pending, pendingStep{res: res, slot: slot0, accum: accum, number: t.StepsDone + 1,
			clip: t.Config.Train.ClipGradNorm > 0})
	}
	return res, nil
}

// stepMemory gathers a step's memory at its phases' ends: each phase's
// largest, the step's peak and its split (best: the stats at the peak).
type stepMemory struct {
	res      *StepResult
	best     memory.Stats
	reporter device.MemoryReporter // the device's own count, where it has one
}

func (m *stepMemory) keep(phase string, st memory.Stats) {
	res, pm := m.res, PhaseMemoryOf(st)
	if m.reporter != nil {
		if used, _, err := m.reporter.DeviceMemory(); err == nil {
			pm.DeviceUsedBytes = used
			res.DeviceUsedPeak = max(res.DeviceUsedPeak, used)
		}
	}
	if prev, ok := res.Phases[phase]; !ok || pm.PeakAllocatedBytes > prev.PeakAllocatedBytes {
		res.Phases[phase] = pm
	}
	if st.Allocated.Peak > m.best.Allocated.Peak {
		m.best = st
	}
	res.PeakReserved = max(res.PeakReserved, st.Reserved.Peak)
}

// optimizerStep is a step's end where the host decides it: unscale and
// check the gradients (reading the step's record where it has one), clip
// them (train.clip_grad_norm), then the optimizer (or skip) and the
// scaler's update.
func (t *Trainer) optimizerStep(recorder backend.StepRecorder, recorded bool, accum int, res *StepResult) error {
	finite, err := t.unscale(recorder, recorded, accum, res)
	if err != nil {
		return err
	}
	if limit := t.Config.Train.ClipGradNorm; finite && limit > 0 {
		// PyTorch's order: scaler.unscale_, clip_grad_norm_, scaler.step;
		// a step with an inf or NaN was skipped above, so the norm is finite.
		res.GradNorm, res.Clipping = optim.ClipGradNorm(t.Device.Backend, optim.Grads(t.Net.Params()), limit), true
	}
	if finite {
		t.Opt.Update(res.LR, 0)
		t.Net.SyncWorkingWeights()
	}
	t.Scaler.Update(finite)
	res.Skipped = !finite
	t.noteScaler(res)
	return nil
}

// unscale unscales the gradients and reports whether they are all finite:
// where the step is recorded, with each micro-batch's loss into res.Loss,
// read in one copy.
func (t *Trainer) unscale(r backend.StepRecorder, recorded bool, accum int, res *StepResult) (bool, error) {
	if !recorded {
		return t.Scaler.Unscale(t.Device.Backend, t.Net.Params()), nil
	}
	t.Scaler.UnscaleRecorded(r, t.Net.Params())
	return t.readRecord(r, accum, res)
}

// readRecord reads the step's record in one copy: each micro-batch's
// loss (its sum over its count, as CrossEntropy's caller makes it) into
// res.Loss, in order, and whether the gradients were finite.
func (t *Trainer) readRecord(r backend.StepRecorder, accum int, res *StepResult) (bool, error) {
	sums, counts, finite, err := r.ReadRecord(accum, t.Net.Config.Classes)
	if err != nil {
		return false, err
	}
	for k := range accum {
		loss := sums[k]
		if counts[k] > 0 {
			loss /= float64(counts[k])
		}
		res.Loss += loss / float64(accum)
	}
	return finite, nil
}

// nextBatch fills the input buffers with the next micro-batch and returns its
// 1-based epoch.
// The micro-batch is number t.micro: position t.micro % microPerEpoch of
// epoch t.micro / microPerEpoch, the same whether or not the run was resumed.
func (t *Trainer) nextBatch() (int, error) {
	epoch := t.micro/t.microPerEpoch + 1
	if !t.Pool().Virtual() { // a planned step has no memory to fill
		b := t.Config.Train.BatchSize
		if l := t.loader; l == nil || l.Config().Batch != b || l.Config().PerEpoch != t.microPerEpoch {
			if l != nil {
				l.Close() // the micro-batch size changed (memory.fit)
			}
			var err error
			if t.loader, err = data.NewLoader(t.data, t.trainIdx, data.LoaderConfig{
				Batch: b, PerEpoch: t.microPerEpoch, Seed: t.Config.Train.Seed, Flip: t.Config.Data.Flip,
				Augment: t.Config.Data.Augment, Rank: t.comm.Rank(), World: t.comm.Size()}); err != nil {
				return 0, err
			}
		}
		if len(t.hostImages) != t.images.Len() {
			t.hostImages, t.hostMasks = make([]float32, t.images.Len()), make([]uint8, t.masks.Len)
		}
		var err error
		if epoch, err = t.loader.Batch(t.micro, t.hostImages, t.hostMasks); err != nil {
			return 0, err
		}
		t.images.Write(t.hostImages)
		t.Device.Backend.Upload(t.masks, t.hostMasks)
	}
	t.micro++
	return epoch, nil
}

// ExplainOOM adds to an out-of-memory error what to change: the variant
// memunet plan recommends under the capacity, or, when none fits, the
// smallest one. Other errors, and one already explained, pass unchanged.
func (t *Trainer) ExplainOOM(err error, during string) error {
	var o *memory.OutOfMemoryError
	if !errors.As(err, &o) || o.Hint != "" {
		return err
	}
	o.Hint = fmt.Sprintf("(during %s; memory.capacity is %s) %s", during, memory.FormatBytes(o.Capacity), fitAdvice(t.Config, o.Capacity))
	if err != error(o) {
		// A wrapping error wrote its message already (fmt.Errorf does).
		return fmt.Errorf("%w %s", err, o.Hint)
	}
	return err
}

// fitAdvice says which variant of cfg fits in capacity, from the plan.
func fitAdvice(cfg config.Config, capacity int64) string {
	plan := cfg.Invocation.Command("plan", "--capacity", compactBytes(capacity))
	rows, rec, err := Plan(cfg, VariantNames(), capacity)
	if err != nil {
		return "Run " + plan + " to see what fits."
	}
	var smallest *PlanRow
	for i := range rows {
		r := &rows[i]
		if r.Error != "" {
			continue
		}
		if r.Name == rec {
			return fmt.Sprintf("To fit, plan recommends the %s variant: %s (predicted peak %s reserved); %s shows every variant, memory.fit: auto picks one.",
				r.Name, describeChanges(cfg, r.Config), memory.FormatBytes(r.PeakReservedBytes), plan)
		}
		if smallest == nil || r.PeakReservedBytes < smallest.PeakReservedBytes {
			smallest = r
		}
	}
	if smallest == nil {
		return "Run " + plan + " to see what fits."
	}
	return fmt.Sprintf("No variant fits: the smallest, %s (%s), needs %s; raise memory.capacity, or lower train.batch_size, %s or model.base.",
		smallest.Name, describeChanges(cfg, smallest.Config), memory.FormatBytes(smallest.PeakReservedBytes), SizeKey(cfg))
}

// describeChanges lists the memory-saving keys in which to differs from from.
func describeChanges(from, to config.Config) string { return to.Variant().Changes(from.Variant()) }

// compactBytes writes n the way a capacity is written in a config: 6GiB.
func compactBytes(n int64) string {
	v, _ := config.ByteSize(n).MarshalYAML()
	return fmt.Sprint(v)
}

// EncoderPrefixes are what train.freeze: [encoder] stands for: the UNet's
// input block and its down blocks.
var encoderPrefixes = []string{"inc.", "down"}

// unfrozen is params less those train.freeze names (prefixes of their
// names, or encoder); a prefix that names no parameter is an error listing
// the blocks there are.
func unfrozen(params []*model.Param, freeze []string) ([]*model.Param, error) {
	if len(freeze) == 0 {
		return params, nil
	}
	var prefixes []string
	for _, f := range freeze {
		if f == "encoder" {
			prefixes = append(prefixes, encoderPrefixes...)
			continue
		}
		found := false
		for _, p := range params {
			found = found || strings.HasPrefix(p.Name, f)
		}
		if !found {
			blocks := map[string]bool{}
			var names []string
			for _, p := range params {
				if b, _, _ := strings.Cut(p.Name, "."); !blocks[b] {
					blocks[b] = true
					names = append(names, b)
				}
			}
			return nil, fmt.Errorf("train.freeze: %q names no parameter; the blocks are %s, or encoder", f, strings.Join(names, ", "))
		}
		prefixes = append(prefixes, f)
	}
	var out []*model.Param
	for _, p := range params {
		if !slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(p.Name, pre) }) {
			out = append(out, p)
		}
	}
	return out, nil
}
