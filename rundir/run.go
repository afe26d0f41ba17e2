package rundir

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/train"
)

// StepRecord is one line of metrics.jsonl per optimizer step.
type StepRecord struct {
	Type  string  `json:"type"` // "step"
	Step  int     `json:"step"`
	Epoch int     `json:"epoch"`
	Loss  float64 `json:"loss"`
	LR    float64 `json:"lr"`
	// StepMS is the step's time; where steps queue on the device, the
	// mean of the steps read together (rundir's settle).
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
	// GradNorm is the gradients' global L2 norm before clipping, in a run
	// that clips (train.clip_grad_norm); absent otherwise and on a skipped
	// step.
	GradNorm *float64 `json:"grad_norm,omitempty"`
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
	// HostMemoryBytes is what this process could use as the run started
	// (memlimit: MemAvailable, its cgroups, its rlimits); HostMemorySource
	// what set it.
	HostMemoryBytes  int64  `json:"host_memory_bytes,omitempty"`
	HostMemorySource string `json:"host_memory_source,omitempty"`
	// Device is what the run computed on (device.Describe).
	Device string `json:"device"`
	// Conv is who computed the convolutions on a GPU (cudnn or
	// memunet: its own kernels; config key cuda.conv) and CUDNN the cuDNN
	// library that did ("cuDNN 9.6.0 (CUDA 12.6) from /path"); both absent
	// on the CPU, CUDNN where none did.
	Conv  string `json:"conv,omitempty"`
	CUDNN string `json:"cudnn,omitempty"`
	// ConvChoices are the algorithms the library chose for each
	// convolution of the run (or why memunet's kernels computed it), and
	// ConvWorkspaceBytes the most any one takes: the workspace it took
	// from the pool (cuda.workspace bounds it).
	ConvChoices        []cuda.LibraryChoice `json:"conv_choices,omitempty"`
	ConvWorkspaceBytes int64                `json:"conv_workspace_bytes,omitempty"`
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

// DirOf is a run's directory: out (--out), else output.dir, else
// runs/<now as 20060102-150405>.
func DirOf(out string, cfg config.Config, now time.Time) string {
	if out == "" {
		out = cfg.Output.Dir
	}
	if out == "" {
		out = filepath.Join("runs", now.Format("20060102-150405"))
	}
	return out
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
	// since (files added, removed, resized or rewritten; see data.Fingerprint).
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
// holding another run or in use by another process, a checkpoint that does
// not match, a plan that does not fit, a bad dataset) writes nothing; a new
// run that fails before its first step leaves nothing behind either. A
// resume of a finished run is refused with a *FinishedError, reading only.
//
// Its parts: setUp (setup.go) claims the directory and builds the trainer
// and the observers, loop (loop.go) runs the steps and validations and
// tells the observers (observe.go), finish validates, saves and writes the
// summary.
func Run(ctx context.Context, cfg config.Config, opts Options) (sum *Summary, err error) {
	start := time.Now()
	if err := checkFinished(cfg, opts); err != nil {
		return nil, err // read only: no lock, nothing touched
	}
	r := &run{opts: opts, comm: opts.Comm, start: start, lastVal: -1}
	if r.comm == nil {
		r.comm = dist.Single{}
	}
	defer func() { r.close(err) }()
	if err := r.setUp(ctx, cfg); err != nil {
		return nil, err
	}
	if err := r.loop(ctx); err != nil {
		return nil, err
	}
	return r.finish()
}

// run is one process's part of a training run: what setUp prepares and
// the loop, the observers and finish share.
type run struct {
	opts  Options
	comm  dist.Comm
	start time.Time
	cfg   config.Config // as the trainer resolved it (memory.fit: auto)
	total int           // the last step

	lock    *outdir.Lock // rank 0's hold on opts.OutDir
	wrote   bool         // this process has written into opts.OutDir
	scratch string       // a data-parallel rank's own directory, removed at the end

	host      memlimit.Limit // what this process could use as it started
	tr        *train.Trainer
	ckpt      *checkpointer
	prog      *progress
	tally     *tally
	observers []observer // told of every step, validation and the end, in order

	sum      *Summary
	lastVal  int // the step of the latest validation (-1: none)
	stepsRun int // steps this process completed

	// issued are the steps run and not yet told to the observers (settle),
	// issuedSince when the first of them began.
	issued      []issuedStep
	issuedSince time.Time

	saidLossNotFinite bool // a validation's loss was not finite, and the user told
}

// close gives back what setUp took. A new run that failed before its first
// step leaves nothing: its files are removed and the directory is cleared
// of the lock (and removed, if it was made for the run).
func (r *run) close(err error) {
	for _, o := range r.observers {
		if c, ok := o.(io.Closer); ok {
			c.Close()
		}
	}
	if err != nil && r.wrote && r.opts.Resume == "" && r.stepsRun == 0 {
		removeRunFiles(r.opts.OutDir, runFilesIn(r.opts.OutDir))
		r.wrote = false
	}
	if r.tr != nil {
		r.tr.Close()
	}
	if r.scratch != "" {
		os.RemoveAll(r.scratch)
	}
	if r.wrote {
		r.lock.Release()
	} else {
		r.lock.Clear() // as it was found: a folder made for a refused run goes
	}
}

// MaxSummaryBytes bounds reading a summary (a few KiB; the per-rank table
// of a large data-parallel run more).
const MaxSummaryBytes = 16 << 20

// ReadSummary reads dir's summary.json.
func ReadSummary(dir string) (*Summary, error) {
	b, err := infile.ReadFile(filepath.Join(dir, runfiles.Summary), MaxSummaryBytes)
	if err != nil {
		return nil, err
	}
	var sum Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, runfiles.Summary), err)
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

// writeSummary writes summary.json, unless this part added no step to a
// resumed run (interrupted before its first): then the summary of the same
// step stands, rather than one of nothing, and is returned.
func (r *run) writeSummary() (*Summary, error) {
	if r.stepsRun == 0 && r.ckpt.resumed != "" {
		if prev, err := ReadSummary(r.opts.OutDir); err == nil && prev.Steps == r.sum.Steps {
			prev.Interrupted = r.sum.Interrupted
			return prev, nil
		}
	}
	if cr, ok := r.tr.Device.Backend.(device.ConvResolver); ok && cr.ConvProvider().CUDNN != "" {
		r.sum.ConvChoices, r.sum.ConvWorkspaceBytes = cr.ConvChoices(), 0
		for _, c := range r.sum.ConvChoices {
			r.sum.ConvWorkspaceBytes = max(r.sum.ConvWorkspaceBytes, c.WorkspaceBytes)
		}
	}
	if rep, ok := r.tr.Device.Backend.(device.MemoryReporter); ok {
		// At the end: a convolution library's first Find and first runs
		// (in the first step, where no plan ran before it) add what they load.
		r.sum.ContextOverheadBytes = rep.ContextOverhead()
	}
	out, err := json.MarshalIndent(r.sum, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := outdir.WriteBytes(filepath.Join(r.opts.OutDir, runfiles.Summary), append(out, '\n')); err != nil {
		return nil, fmt.Errorf("writing %s: %w", runfiles.Summary, err)
	}
	return r.sum, nil
}
