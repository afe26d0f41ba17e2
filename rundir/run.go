package rundir

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/train"
)

// StepRecord is one line of metrics.jsonl per optimizer step.
type StepRecord struct {
	Type   string  `json:"type"` // "step"
	Step   int     `json:"step"`
	Epoch  int     `json:"epoch"`
	Loss   float64 `json:"loss"`
	LR     float64 `json:"lr"`
	StepMS float64 `json:"step_ms"`
	// CommMS is the step's data-parallel communication (absent alone).
	CommMS             float64 `json:"comm_ms,omitempty"`
	AllocatedBytes     int64   `json:"allocated_bytes"`
	ReservedBytes      int64   `json:"reserved_bytes"`
	PeakAllocatedBytes int64   `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64   `json:"peak_reserved_bytes"`
	// PeakByCategory splits PeakAllocatedBytes at the moment of the peak.
	PeakByCategory map[string]int64 `json:"peak_allocated_by_category"`
	// Phases is the memory after forward, backward and the optimizer step.
	Phases map[string]train.PhaseMemory `json:"phases"`
	config.Variant
	EffectiveBatch int     `json:"effective_batch"`
	LossScale      float64 `json:"loss_scale"`
	GrowthTracker  int     `json:"growth_tracker"`
	SkippedSteps   int     `json:"skipped_steps"`
	StepSkipped    bool    `json:"step_skipped"`
	Retried        bool    `json:"retried_after_oom"`
	// DeviceUsedBytes is the device's own count of memory in use, the
	// largest at the step's phase ends (a GPU: cuMemGetInfo, as nvidia-smi
	// shows it); absent on the CPU.
	DeviceUsedBytes int64 `json:"device_used_bytes,omitempty"`
	// Rebuilt marks a record written again from a checkpoint's history (the
	// file was gone when the run resumed): step, epoch and loss only.
	Rebuilt bool `json:"rebuilt,omitempty"`
}

// Summary is summary.json: the run's outcome and its memory.
type Summary struct {
	Steps              int     `json:"steps"`
	Epochs             int     `json:"epochs"`
	FinalLoss          float64 `json:"final_loss"`
	metrics.Validation         // the last validation
	PeakAllocatedBytes int64   `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64   `json:"peak_reserved_bytes"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`
	// Device is what the run computed on (device.Describe).
	Device string `json:"device"`
	// The device's own view of its memory where the backend reports it (a
	// GPU): the most in use at any step's phase ends, the device's total,
	// and what was in use before the pool's first allocation (context,
	// kernels, scratch: the overhead beside the pool's reserved bytes).
	DeviceUsedPeakBytes int64 `json:"device_used_peak_bytes,omitempty"`
	// OffloadedPeakBytes is the most the offloaded tensors held in host
	// memory (memory.offload).
	OffloadedPeakBytes   int64 `json:"offloaded_peak_bytes,omitempty"`
	DeviceTotalBytes     int64 `json:"device_total_bytes,omitempty"`
	ContextOverheadBytes int64 `json:"context_overhead_bytes,omitempty"`
	// CacheFlushes counts the times the pool gave wholly free segments back
	// to its allocator (cuMemFree on a GPU) to take a new one, or its cached
	// pages when the memory itself ran out.
	CacheFlushes int64 `json:"cache_flushes"`
	// Allocator is memory.allocator; SegmentAllocs the allocator calls the
	// pool made (segments, or the arena once); ArenaBytes the arena,
	// ArenaMisses the allocations its plan did not foresee (served by the
	// caching pool), ArenaMiss the first of them.
	Allocator     string `json:"allocator"`
	SegmentAllocs int64  `json:"segment_allocs"`
	ArenaBytes    int64  `json:"arena_bytes,omitempty"`
	ArenaMisses   int64  `json:"arena_misses,omitempty"`
	ArenaMiss     string `json:"arena_miss,omitempty"`
	AllocatorNote string `json:"allocator_note,omitempty"`
	// PageBytes is the caching pool's page where its memory pages (0:
	// segments); PagesMapped and PagesUnmapped count the pages it backed
	// and gave back (memory.Stats).
	PageBytes     int64 `json:"page_bytes,omitempty"`
	PagesMapped   int64 `json:"pages_mapped,omitempty"`
	PagesUnmapped int64 `json:"pages_unmapped,omitempty"`
	// World is the data-parallel processes (absent: one); Ranks each one's
	// peak memory.
	World int          `json:"world_size,omitempty"`
	Ranks []RankMemory `json:"ranks,omitempty"`
	// CommMSMedian is the median step's data-parallel communication.
	CommMSMedian            float64          `json:"comm_ms_median,omitempty"`
	StepMSMedian            float64          `json:"step_ms_median"`
	PeakAllocatedByCategory map[string]int64 `json:"peak_allocated_by_category"`
	// PeakByPhase is, per phase, the largest peak of any step with its split
	// by category and "total".
	PeakByPhase map[string]map[string]int64 `json:"peak_by_phase"`
	// Variant is what the run trained with (memory.fit: auto's last choice).
	config.Variant
	EffectiveBatch int     `json:"effective_batch"`
	LossScale      float64 `json:"loss_scale"`
	SkippedSteps   int     `json:"skipped_steps"`
	Params         int     `json:"params"`
	// WallSeconds is the run's wall time across its parts (a resumed run
	// continues the count its checkpoint recorded); PartWallSeconds this
	// part's, the process that wrote the summary, which ran PartSteps
	// steps from step PartFromStep (0: a run that was not resumed). The
	// memory figures and step times above are this part's: every part
	// trains steps of the same shape.
	WallSeconds     float64 `json:"wall_s"`
	PartWallSeconds float64 `json:"part_wall_s"`
	PartSteps       int     `json:"part_steps"`
	PartFromStep    int     `json:"part_from_step,omitempty"`
	Interrupted     bool    `json:"interrupted"`
	// ResumedFrom is the checkpoint this run continued; LastCheckpoint the
	// newest one it wrote (see checkpoint.go); BestCheckpoint the one with
	// the best val_miou (the run directory's link "best" points at it).
	ResumedFrom    string   `json:"resumed_from,omitempty"`
	LastCheckpoint string   `json:"last_checkpoint,omitempty"`
	BestCheckpoint string   `json:"best_checkpoint,omitempty"`
	BestValMIoU    *float64 `json:"best_val_miou,omitempty"`
	// Monitor is the score the best checkpoint was chosen by
	// (train.monitor), BestScore its value there.
	Monitor   string   `json:"monitor,omitempty"`
	BestScore *float64 `json:"best_score,omitempty"`
	// EarlyStopped says train.early_stop ended the run before its steps.
	EarlyStopped bool `json:"early_stopped,omitempty"`
	// Fit is what memory.fit: auto decided, one line per decision.
	Fit []string `json:"fit,omitempty"`
	// Loss is train.loss.kind; ClassWeights the weights of its terms
	// (auto's, computed from the training masks, or the configured ones).
	Loss         string    `json:"loss"`
	ClassWeights []float64 `json:"class_weights,omitempty"`
}

// Options are a run's inputs besides the configuration.
type Options struct {
	// OutDir receives config.yaml, metrics.jsonl and summary.json.
	OutDir string
	// Progress receives the progress bar or lines; nil discards them.
	Progress io.Writer
	// Terminal says Progress is a terminal (for output.progress: auto).
	Terminal bool
	// Columns is the terminal's width for the bar (0: asked of Progress's
	// terminal, else $COLUMNS, else 80).
	Columns int
	// Resume is a checkpoint to continue: a path, or "auto" for the newest in
	// OutDir/checkpoints (none there: start from scratch). See ResolveResume.
	Resume string
	// Version is memunet's version, recorded in checkpoints.
	Version string
	// AllowDataChange resumes a checkpoint although its dataset changed
	// since (files added, removed or resized; see data.Fingerprint).
	AllowDataChange bool
	// Force starts a new run in a directory that holds one (without Resume),
	// deleting the earlier run's files first.
	Force bool
	// OnStart, if set, is called once every check has passed, before the
	// run writes anything, with the configuration it trains (memory.fit:
	// auto may have changed the variant): the place for a start banner.
	OnStart func(cfg config.Config, device string)
	// Comm makes the run one rank of a data-parallel job (nil: one
	// process). Rank 0 writes the run's files into OutDir; the other ranks
	// read a resumed checkpoint from it and train the same steps, saving no
	// checkpoints or curves and writing their small files (config,
	// metrics, summary) into a scratch directory they remove at the end.
	Comm dist.Comm

	onTrainer  func(*train.Trainer) // tests: sees the trainer before the first step
	backend    backend.Backend      // tests: train on this instead of config key device
	barRefresh time.Duration        // tests: the bar's least time between redraws (0: 100ms)
}

// Run trains as cfg says, writes the run's files into opts.OutDir and returns
// the summary. Cancelling ctx stops after the current step; the files are
// still written and Summary.Interrupted is set.
//
// A run refused before it starts (an invalid configuration, a directory
// holding another run, a checkpoint that does not match, a plan that does
// not fit, a bad dataset) writes nothing; a new run that fails before its
// first step leaves nothing behind either.
func Run(ctx context.Context, cfg config.Config, opts Options) (sum *Summary, err error) {
	start := time.Now()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	comm := opts.Comm
	if comm == nil {
		comm = dist.Single{}
	}
	if err := checkFinished(cfg, opts); err != nil {
		return nil, err // read only: no lock, nothing touched
	}
	wrote := false // this process has written into opts.OutDir
	if comm.Rank() == 0 {
		// One process per run: held until Run returns, taken before the
		// folder is looked at, so that two starts cannot both find it
		// empty, nor --force delete what another run writes.
		if opts.OutDir == "" {
			return nil, fmt.Errorf("output.dir: name the run directory (--out DIR)")
		}
		lock, err := outdir.Acquire(opts.OutDir, "memunet train")
		if err != nil {
			return nil, err
		}
		defer func() {
			if wrote {
				lock.Release()
			} else {
				lock.Clear() // as it was found: a folder made for a refused run goes
			}
		}()
	}
	var earlier []string
	if opts.Resume == "" && comm.Rank() == 0 {
		if earlier = runFilesIn(opts.OutDir); len(earlier) > 0 && !opts.Force {
			return nil, &ExistingRunError{Dir: opts.OutDir, Files: earlier}
		}
		if err := checkInitKept(cfg.Train.Init, opts.OutDir, earlier); err != nil {
			return nil, err
		}
	}
	resume, err := openResume(cfg, opts)
	if err != nil {
		return nil, err
	}
	if resume != nil && max(resume.Manifest.World, 1) != comm.Size() {
		// Each rank's share of every batch depends on the world size.
		world := max(resume.Manifest.World, 1)
		return nil, fmt.Errorf("%s was trained by %d process(es) and this run has %d: resume it with the same number (mpirun -np %d, or one process for 1)",
			resume.Dir, world, comm.Size(), world)
	}
	if comm.Rank() != 0 {
		// Not rank 0: the same steps, the files into a scratch directory.
		scratch, err := os.MkdirTemp("", fmt.Sprintf("memunet-rank%d-", comm.Rank()))
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(scratch)
		opts.OutDir, opts.Progress, opts.OnStart = filepath.Join(scratch, "run"), nil, nil
	}
	b := opts.backend
	if b == nil {
		if b, err = train.Target(cfg); err != nil {
			return nil, err
		}
	}
	cfg, capNote := train.ResolveCapacity(cfg, b)
	if err := train.CheckFits(cfg, train.HostMemory()); err != nil {
		return nil, err
	}
	tr, err := train.NewTrainerOnComm(cfg, b, comm)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	initNote := ""
	if resume == nil { // a resumed run has its weights
		if initNote, err = LoadInit(tr); err != nil {
			return nil, err
		}
	}
	if opts.onTrainer != nil {
		opts.onTrainer(tr)
	}
	cfg = tr.Config // memory.fit: auto may have chosen another variant
	total := cfg.Train.Steps
	if total == 0 {
		total = cfg.Train.Epochs * tr.StepsPerEpoch()
	}

	prog := newProgress(cfg.Output, opts, total)
	ckpt, err := newCheckpointer(ctx, tr, opts, resume, prog.note)
	if err != nil {
		return nil, err
	}
	// Everything is checked: the run starts, and writes.
	if opts.OnStart != nil {
		opts.OnStart(cfg, device.Describe(tr.Device.Backend))
	}
	wrote = true
	if len(earlier) > 0 {
		if err := removeRunFiles(opts.OutDir, earlier); err != nil {
			return nil, err
		}
		prog.note(fmt.Sprintf("--force: deleted the earlier run in %s: %s", opts.OutDir, strings.Join(earlier, ", ")))
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil { // a data-parallel rank's scratch
		return nil, fmt.Errorf("output.dir %s: %w", opts.OutDir, err)
	}
	stepsRun := 0 // steps this process completed
	if opts.Resume == "" {
		defer func() {
			if err != nil && stepsRun == 0 {
				// A new run that failed before its first step leaves nothing.
				removeRunFiles(opts.OutDir, runFilesIn(opts.OutDir))
				wrote = false
			}
		}()
	}
	resolved, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	if err := outdir.WriteBytes(filepath.Join(opts.OutDir, "config.yaml"), resolved); err != nil {
		return nil, fmt.Errorf("output.dir: %w", err)
	}
	metricsFile, recovered, err := openMetrics(opts.OutDir, ckpt.start, ckpt.history)
	if err != nil {
		return nil, fmt.Errorf("output.dir: %w", err)
	}
	defer metricsFile.Close()
	ckpt.recover(recovered)
	if line := ckpt.resumeNote(total); line != "" {
		prog.note(line)
		prog.resumeAt(ckpt.start)
		if n := len(ckpt.history.Val); n > 0 {
			prog.miou = ckpt.history.Val[n-1].ValMIoU
		}
	}
	enc := json.NewEncoder(metricsFile)
	curves, err := ReadCurves(filepath.Join(opts.OutDir, "metrics.jsonl")) // a resumed run's earlier steps
	if err != nil {
		return nil, err
	}
	curvesTitle := fmt.Sprintf("%s: UNet base %d, depth %d; %s", filepath.Base(filepath.Clean(opts.OutDir)), cfg.Model.Base, cfg.Model.Depth, cfg.Variant())
	lastDraw := time.Now()
	// drawCurves redraws curves.png: at a validation unless the run started
	// or it was drawn less than a second ago (validations of tiny runs come
	// faster than a drawing), and always at the end (force).
	drawCurves := func(force bool) error {
		if comm.Rank() != 0 || len(curves.Steps) == 0 || !force && time.Since(lastDraw) < time.Second {
			return nil
		}
		lastDraw = time.Now()
		if err := report.WriteCurves(filepath.Join(opts.OutDir, CurvesFile), curves, curvesTitle); err != nil {
			return fmt.Errorf("writing %s: %w", CurvesFile, err)
		}
		return nil
	}

	if capNote != "" {
		prog.note(capNote)
	}
	if initNote != "" {
		prog.note(initNote)
	}
	for _, line := range tr.FitLog {
		prog.note(line)
	}
	if tr.AllocatorNote != "" {
		prog.note(tr.AllocatorNote)
	}
	if cfg.Train.Loss.ClassWeights.Auto {
		prog.note(fmt.Sprintf("train.loss.class_weights: auto: %s (inverse class frequency of the training masks)", formatWeights(tr.Loss.Weights)))
	}
	sum = &Summary{
		Loss: string(tr.Loss.Kind), ClassWeights: tr.Loss.Weights,
		Fit: tr.FitLog, Device: device.Describe(tr.Device.Backend),
		Params: tr.Net.NumParams(), PeakAllocatedByCategory: map[string]int64{}, PeakByPhase: map[string]map[string]int64{},
		Variant: cfg.Variant(), EffectiveBatch: cfg.Variant().EffectiveBatch(),
		ResumedFrom: ckpt.resumed, Steps: ckpt.start,
	}
	if n := len(ckpt.history.Steps); n > 0 {
		sum.Epochs, sum.FinalLoss = ckpt.history.Steps[n-1].Epoch, float64(ckpt.history.Steps[n-1].Loss)
	}
	lastVal := -1 // the step of the latest validation
	if n := len(ckpt.history.Val); n > 0 && ckpt.history.Val[n-1].Step == ckpt.start {
		lastVal, sum.Validation = ckpt.start, ckpt.history.Val[n-1].Validation
	}
	if ckpt.resumed != "" {
		sum.PartFromStep = ckpt.start
	}
	if r, ok := tr.Device.Backend.(device.MemoryReporter); ok {
		sum.ContextOverheadBytes = r.ContextOverhead()
		if _, total, err := r.DeviceMemory(); err == nil {
			sum.DeviceTotalBytes = total
		}
	}
	var stepMS, commsMS []float64
	notePeak := func(peak, reserved int64, split map[string]int64) {
		if peak > sum.PeakAllocatedBytes {
			sum.PeakAllocatedBytes = peak
			sum.PeakAllocatedByCategory = split
		}
		sum.PeakReservedBytes = max(sum.PeakReservedBytes, reserved)
	}
	improved, stopEarly := false, false
	validate := func(step, epoch int) error {
		tr.Pool().ResetPeak()
		v, err := tr.Validate()
		if err != nil {
			return err
		}
		st := tr.Pool().Stats()
		notePeak(st.Allocated.Peak, st.Reserved.Peak, train.PhaseMemoryOf(st).PeakByCategory)
		sum.Validation = v
		lastVal = step
		rec := checkpoint.ValRecord{Type: "val", Step: step, Epoch: epoch, Validation: v}
		if every := cfg.Train.ValEvery; every > 0 && step%every == 0 {
			// Only the scheduled validations feed the schedule and early
			// stopping: a run's last step off the schedule (a shorter run,
			// an interrupt) must not change what its continuation does.
			tr.Validated(v)
			stopEarly = ckpt.earlyStop(rec)
		}
		prog.validation(rec)
		improved = ckpt.validated(rec)
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("writing metrics.jsonl: %w", err)
		}
		addVal(&curves, rec)
		return drawCurves(false)
	}

	for step := ckpt.start + 1; step <= total; step++ {
		stop, err := agree(comm, ctx.Err() != nil)
		if err != nil {
			return nil, err
		}
		if stop {
			sum.Interrupted = true
			break
		}
		if cfg.Memory.Timeline {
			tr.Pool().Timeline() // keep only the events of the step about to run
		}
		t0 := time.Now()
		ckpt.beginStep(step)
		res, err := tr.Step()
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", step, err)
		}
		if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
			return nil, diverged(cfg, step, res, ckpt.lastGood())
		}
		ckpt.endStep(step, res)
		if cfg.Memory.Timeline {
			if err := writeTimeline(filepath.Join(opts.OutDir, "timeline.json"), step, tr.Pool().Timeline()); err != nil {
				return nil, err
			}
		}
		ms := float64(time.Since(t0).Microseconds()) / 1000
		stepMS = append(stepMS, ms)
		st := tr.Pool().Stats()
		notePeak(res.Peak, res.PeakReserved, res.PeakByCategory)
		for phase, pm := range res.Phases {
			if cur, ok := sum.PeakByPhase[phase]; !ok || pm.PeakAllocatedBytes > cur["total"] {
				row := map[string]int64{"total": pm.PeakAllocatedBytes}
				for k, v := range pm.PeakByCategory {
					row[k] = v
				}
				sum.PeakByPhase[phase] = row
			}
		}
		commMS := float64(res.CommTime.Microseconds()) / 1000
		if comm.Size() > 1 {
			commsMS = append(commsMS, commMS)
		}
		rec := StepRecord{
			Type: "step", Step: step, Epoch: res.Epoch, Loss: res.Loss, LR: res.LR, StepMS: ms, CommMS: commMS,
			AllocatedBytes: st.Allocated.Current, ReservedBytes: st.Reserved.Current,
			PeakAllocatedBytes: res.Peak, PeakReservedBytes: res.PeakReserved, PeakByCategory: res.PeakByCategory,
			Phases: res.Phases, Variant: sum.Variant, EffectiveBatch: sum.EffectiveBatch,
			LossScale: tr.Scaler.LossScale(), GrowthTracker: tr.Scaler.GrowthTracker,
			SkippedSteps: tr.Scaler.Skipped, StepSkipped: res.Skipped, Retried: res.Retried,
			DeviceUsedBytes: res.DeviceUsedPeak,
		}
		sum.DeviceUsedPeakBytes = max(sum.DeviceUsedPeakBytes, res.DeviceUsedPeak)
		if err := enc.Encode(rec); err != nil {
			return nil, fmt.Errorf("writing metrics.jsonl: %w", err)
		}
		addStep(&curves, rec)
		if len(tr.FitLog) > len(sum.Fit) {
			for _, line := range tr.FitLog[len(sum.Fit):] {
				prog.note(line)
			}
			sum.Variant = tr.Config.Variant()
		}
		sum.Fit = tr.FitLog
		prog.step(rec)
		sum.Steps, sum.Epochs, sum.FinalLoss = step, res.Epoch, res.Loss
		stepsRun++
		improved = false
		if cfg.Train.ValEvery > 0 && step%cfg.Train.ValEvery == 0 && step != total {
			if err := validate(step, res.Epoch); err != nil {
				return nil, err
			}
		}
		if err := ckpt.afterStep(step, res.Epoch, total, improved); err != nil {
			return nil, err
		}
		if stopEarly && step < total {
			es := cfg.Train.EarlyStop
			sum.EarlyStopped = true
			prog.note(fmt.Sprintf("early stop: %s has not improved by more than %g for %d validations; stopping at step %d of %d",
				cfg.Train.Monitor, es.MinDelta, es.Patience, step, total))
			break
		}
	}
	if sum.Interrupted {
		if err := ckpt.interrupted(sum.Steps, sum.Epochs); err != nil {
			return nil, err
		}
	}
	if lastVal != sum.Steps { // an early stop has just validated
		if err := validate(sum.Steps, sum.Epochs); err != nil {
			return nil, err
		}
	}
	if err := drawCurves(true); err != nil {
		return nil, err
	}
	if !sum.Interrupted {
		if err := ckpt.end(sum.Steps, sum.Epochs); err != nil {
			return nil, err
		}
	}
	sum.OffloadedPeakBytes = tr.OffloadedPeak()
	sum.LastCheckpoint = ckpt.lastPath
	if ckpt.bestPath != "" {
		sum.BestCheckpoint, sum.BestValMIoU = ckpt.bestPath, &ckpt.bestMIoU
		sum.Monitor, sum.BestScore = ckpt.bestMonitor, &ckpt.bestScore
	}
	st := tr.Pool().Stats()
	sum.Allocator, sum.SegmentAllocs, sum.ArenaBytes, sum.ArenaMisses, sum.ArenaMiss =
		cfg.Memory.Allocator, st.SegmentAllocs, st.ArenaBytes, st.ArenaMisses, tr.Pool().ArenaMiss()
	sum.PageBytes, sum.PagesMapped, sum.PagesUnmapped = st.PageBytes, st.PagesMapped, st.PagesUnmapped
	sum.AllocatorNote = tr.AllocatorNote
	if sum.ArenaMisses > 0 {
		prog.note(fmt.Sprintf("memory.allocator: arena: %d allocations the plan did not foresee went to the caching pool; the first: %s",
			sum.ArenaMisses, sum.ArenaMiss))
	}
	prog.finish()
	sum.LossScale, sum.SkippedSteps = tr.Scaler.LossScale(), tr.Scaler.Skipped
	sum.StepMSMedian = median(stepMS)
	if len(commsMS) > 0 {
		sum.CommMSMedian = median(commsMS)
	}
	sum.PeakRSSBytes = PeakRSS()
	sum.CacheFlushes = st.CacheFlushes
	sum.PartWallSeconds = time.Since(start).Seconds()
	sum.WallSeconds = ckpt.priorWall + sum.PartWallSeconds
	sum.PartSteps = stepsRun
	if comm.Size() > 1 {
		if sum.Ranks, err = gatherRanks(comm, sum.PeakAllocatedBytes, sum.PeakReservedBytes); err != nil {
			return nil, err
		}
		sum.World = comm.Size()
	}
	if stepsRun == 0 && ckpt.resumed != "" {
		// This part added no step (interrupted before its first): the
		// summary of the same step stands, rather than one of nothing.
		if prev, err := readSummary(opts.OutDir); err == nil && prev.Steps == sum.Steps {
			prev.Interrupted = sum.Interrupted
			return prev, nil
		}
	}
	out, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := outdir.WriteBytes(filepath.Join(opts.OutDir, SummaryFile), append(out, '\n')); err != nil {
		return nil, fmt.Errorf("writing %s: %w", SummaryFile, err)
	}
	return sum, nil
}

// SummaryFile is a run directory's summary.
const SummaryFile = "summary.json"

// MaxSummaryBytes bounds reading a summary (a few KiB; the per-rank table
// of a large data-parallel run more).
const MaxSummaryBytes = 16 << 20

// readSummary reads dir's summary.json.
func readSummary(dir string) (*Summary, error) {
	b, err := infile.ReadFile(filepath.Join(dir, SummaryFile), MaxSummaryBytes)
	if err != nil {
		return nil, err
	}
	var sum Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SummaryFile), err)
	}
	return &sum, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeTimeline writes timeline.json: the step's allocations, frees and
// phases (report.Timeline).
func writeTimeline(path string, step int, events []memory.Event) error {
	out, err := json.Marshal(report.TimelineOf(step, events))
	if err != nil {
		return err
	}
	if err := outdir.WriteBytes(path, out); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// runFilesIn lists the run files dir holds (checkpoints/ only if it has
// entries), in checkpoint.RunFiles order.
func runFilesIn(dir string) []string {
	var out []string
	for _, name := range checkpoint.RunFiles() {
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		if st.IsDir() {
			entries, err := os.ReadDir(path)
			if err != nil || len(entries) == 0 {
				continue
			}
			name += fmt.Sprintf("/ (%d entries)", len(entries))
		}
		out = append(out, name)
	}
	return out
}

// checkInitKept refuses a --force that would delete what train.init
// fine-tunes from: the run directory itself (its checkpoints) or anything
// inside the run files it deletes (earlier, as runFilesIn lists them).
func checkInitKept(init, dir string, earlier []string) error {
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
	return fmt.Errorf("--force would delete the earlier run in %s, and train.init (--init %s) fine-tunes from it: train into another --out, or export the weights first (memunet export --checkpoint %s --out FILE) and fine-tune from that file",
		dir, init, init)
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
}

func (e *FinishedError) Error() string {
	if e.EarlyStopped {
		return fmt.Sprintf("%s already finished: early stopping ended it at step %d of %d; to train further raise train.early_stop.patience", e.Dir, e.Step, e.Total)
	}
	return fmt.Sprintf("%s already finished: %d/%d steps; to train further raise train.steps", e.Dir, e.Step, e.Total)
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
		total = cfg.Train.Epochs * (m.Position.MicroBatchesPerEpoch / m.Position.Accumulate)
	}
	run := checkpoint.RunDirOf(dir)
	if run == "" {
		run = dir
	}
	es := cfg.Train.EarlyStop
	switch {
	case total > 0 && m.Step >= total:
		return &FinishedError{Dir: run, Step: m.Step, Total: total}
	case m.Request.Reason == "end" && m.EarlyStop != nil && es.Patience > 0 && m.EarlyStop.Wait >= es.Patience:
		return &FinishedError{Dir: run, Step: m.Step, Total: total, EarlyStopped: true}
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
	return fmt.Sprintf("loss became %v at step %d (lr %g): training diverged; %s; try %s (gradient clipping, the other usual remedy, is not in memunet yet)",
		e.Loss, e.Step, e.LR, last, strings.Join(e.Try, ", or "))
}

// diverged is the DivergedError of res, the result of step.
func diverged(cfg config.Config, step int, res train.StepResult, last string) *DivergedError {
	t := cfg.Train
	try := []string{fmt.Sprintf("a lower train.lr (%g now, e.g. %.3g)", t.LR, t.LR/10)}
	if t.Precision != backend.Float32 {
		try = append(try, "train.precision: fp32")
	}
	if t.Precision == backend.Float16 && !cfg.ScalerEnabled() {
		try = append(try, "the grad scaler (train.scaler.enabled: true)")
	}
	return &DivergedError{Step: step, Loss: res.Loss, LR: res.LR, LastCheckpoint: last, Try: try}
}

// ExistingRunError refuses to start a new run in a directory that holds one.
type ExistingRunError struct {
	Dir   string
	Files []string
}

func (e *ExistingRunError) Error() string {
	return fmt.Sprintf("%s already holds a run (%s): continue it with --resume auto, train into a new --out DIR, or add --force to delete those files and start again",
		e.Dir, strings.Join(e.Files, ", "))
}

// formatWeights writes weights as [w0, w1, ...] with 4 significant digits.
func formatWeights(w []float64) string {
	parts := make([]string, len(w))
	for i, v := range w {
		parts[i] = strconv.FormatFloat(v, 'g', 4, 64)
	}
	return "[" + strings.Join(parts, ", ") + "]"
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
