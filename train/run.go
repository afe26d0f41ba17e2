package train

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
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// StepRecord is one line of metrics.jsonl per optimizer step.
type StepRecord struct {
	Type               string  `json:"type"` // "step"
	Step               int     `json:"step"`
	Epoch              int     `json:"epoch"`
	Loss               float64 `json:"loss"`
	LR                 float64 `json:"lr"`
	StepMS             float64 `json:"step_ms"`
	AllocatedBytes     int64   `json:"allocated_bytes"`
	ReservedBytes      int64   `json:"reserved_bytes"`
	PeakAllocatedBytes int64   `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64   `json:"peak_reserved_bytes"`
	// PeakByCategory splits PeakAllocatedBytes at the moment of the peak.
	PeakByCategory map[string]int64 `json:"peak_allocated_by_category"`
	// Phases is the memory after forward, backward and the optimizer step.
	Phases map[string]PhaseMemory `json:"phases"`
	config.Variant
	EffectiveBatch int     `json:"effective_batch"`
	LossScale      float64 `json:"loss_scale"`
	GrowthTracker  int     `json:"growth_tracker"`
	SkippedSteps   int     `json:"skipped_steps"`
	StepSkipped    bool    `json:"step_skipped"`
	Retried        bool    `json:"retried_after_oom"`
}

// ValRecord is one line of metrics.jsonl per validation.
type ValRecord struct {
	Type        string  `json:"type"` // "val"
	Step        int     `json:"step"`
	Epoch       int     `json:"epoch"`
	ValLoss     float64 `json:"val_loss"`
	ValPixelAcc float64 `json:"val_pixel_acc"`
	ValMIoU     float64 `json:"val_miou"`
	ValDice     float64 `json:"val_dice"`
}

// Summary is summary.json: the run's outcome and its memory.
type Summary struct {
	Steps                   int              `json:"steps"`
	Epochs                  int              `json:"epochs"`
	FinalLoss               float64          `json:"final_loss"`
	ValLoss                 float64          `json:"val_loss"`
	ValPixelAcc             float64          `json:"val_pixel_acc"`
	ValMIoU                 float64          `json:"val_miou"`
	ValDice                 float64          `json:"val_dice"`
	PeakAllocatedBytes      int64            `json:"peak_allocated_bytes"`
	PeakReservedBytes       int64            `json:"peak_reserved_bytes"`
	PeakRSSBytes            int64            `json:"peak_rss_bytes"`
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
	WallSeconds    float64 `json:"wall_s"`
	Interrupted    bool    `json:"interrupted"`
	// ResumedFrom is the checkpoint this run continued; LastCheckpoint the
	// newest one it wrote (see checkpoint.go).
	ResumedFrom    string `json:"resumed_from,omitempty"`
	LastCheckpoint string `json:"last_checkpoint,omitempty"`
	// Fit is what memory.fit: auto decided, one line per decision.
	Fit []string `json:"fit,omitempty"`
}

// Options are a run's inputs besides the configuration.
type Options struct {
	// OutDir receives config.yaml, metrics.jsonl and summary.json.
	OutDir string
	// Progress receives the progress bar or lines; nil discards them.
	Progress io.Writer
	// Terminal says Progress is a terminal (for output.progress: auto).
	Terminal bool
	// Resume is a checkpoint to continue: a path, or "auto" for the newest in
	// OutDir/checkpoints (none there: start from scratch). See ResolveResume.
	Resume string
	// Version is memunet's version, recorded in checkpoints.
	Version string
}

// Run trains as cfg says, writes the run's files into opts.OutDir and returns
// the summary. Cancelling ctx stops after the current step; the files are
// still written and Summary.Interrupted is set.
func Run(ctx context.Context, cfg config.Config, opts Options) (*Summary, error) {
	start := time.Now()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("output.dir %s: %w", opts.OutDir, err)
	}
	resolved, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.OutDir, "config.yaml"), resolved, 0o644); err != nil {
		return nil, fmt.Errorf("output.dir: %w", err)
	}
	resume, err := openResume(cfg, opts)
	if err != nil {
		return nil, err
	}
	tr, err := newTrainer(cfg) // cfg is validated above
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	if testTrainerHook != nil {
		testTrainerHook(tr)
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
	if line := ckpt.resumeNote(total); line != "" {
		prog.note(line)
		prog.resumeAt(ckpt.start)
	}
	metricsFile, err := openMetrics(opts.OutDir, ckpt.start)
	if err != nil {
		return nil, fmt.Errorf("output.dir: %w", err)
	}
	defer metricsFile.Close()
	enc := json.NewEncoder(metricsFile)

	for _, line := range tr.FitLog {
		prog.note(line)
	}
	sum := &Summary{
		Fit:    tr.FitLog,
		Params: tr.Net.NumParams(), PeakAllocatedByCategory: map[string]int64{}, PeakByPhase: map[string]map[string]int64{},
		Variant: cfg.Variant(), EffectiveBatch: cfg.Variant().EffectiveBatch(),
		ResumedFrom: ckpt.resumed, Steps: ckpt.start,
	}
	if n := len(ckpt.history.Steps); n > 0 {
		sum.Epochs, sum.FinalLoss = ckpt.history.Steps[n-1].Epoch, float64(ckpt.history.Steps[n-1].Loss)
	}
	var stepMS []float64
	notePeak := func(peak, reserved int64, split map[string]int64) {
		if peak > sum.PeakAllocatedBytes {
			sum.PeakAllocatedBytes = peak
			sum.PeakAllocatedByCategory = split
		}
		sum.PeakReservedBytes = max(sum.PeakReservedBytes, reserved)
	}
	improved := false
	validate := func(step, epoch int) error {
		tr.Pool.ResetPeak()
		v, err := tr.Validate()
		if err != nil {
			return err
		}
		st := tr.Pool.Stats()
		notePeak(st.Allocated.Peak, st.Reserved.Peak, phaseMemory(st).PeakByCategory)
		sum.ValLoss, sum.ValPixelAcc, sum.ValMIoU, sum.ValDice = v.ValLoss, v.ValPixelAcc, v.ValMIoU, v.ValDice
		v.Type, v.Step, v.Epoch = "val", step, epoch
		prog.validation(v)
		improved = ckpt.validated(v)
		return enc.Encode(v)
	}

	for step := ckpt.start + 1; step <= total; step++ {
		if ctx.Err() != nil {
			sum.Interrupted = true
			break
		}
		if cfg.Memory.Timeline {
			tr.Pool.Timeline() // keep only the events of the step about to run
		}
		t0 := time.Now()
		ckpt.beginStep(step)
		res, err := tr.Step()
		ckpt.endStep(step, res)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", step, err)
		}
		if cfg.Memory.Timeline {
			if err := writeTimeline(filepath.Join(opts.OutDir, "timeline.json"), step, tr.Pool.Timeline()); err != nil {
				return nil, err
			}
		}
		ms := float64(time.Since(t0).Microseconds()) / 1000
		stepMS = append(stepMS, ms)
		st := tr.Pool.Stats()
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
		rec := StepRecord{
			Type: "step", Step: step, Epoch: res.Epoch, Loss: res.Loss, LR: cfg.Train.LR, StepMS: ms,
			AllocatedBytes: st.Allocated.Current, ReservedBytes: st.Reserved.Current,
			PeakAllocatedBytes: res.Peak, PeakReservedBytes: res.PeakReserved, PeakByCategory: res.PeakByCategory,
			Phases: res.Phases, Variant: sum.Variant, EffectiveBatch: sum.EffectiveBatch,
			LossScale: tr.Scaler.LossScale(), GrowthTracker: tr.Scaler.GrowthTracker,
			SkippedSteps: tr.Scaler.Skipped, StepSkipped: res.Skipped, Retried: res.Retried,
		}
		if err := enc.Encode(rec); err != nil {
			return nil, fmt.Errorf("writing metrics.jsonl: %w", err)
		}
		if len(tr.FitLog) > len(sum.Fit) {
			for _, line := range tr.FitLog[len(sum.Fit):] {
				prog.note(line)
			}
			sum.Variant = tr.Config.Variant()
		}
		sum.Fit = tr.FitLog
		prog.step(rec)
		sum.Steps, sum.Epochs, sum.FinalLoss = step, res.Epoch, res.Loss
		improved = false
		if cfg.Train.ValEvery > 0 && step%cfg.Train.ValEvery == 0 && step != total {
			if err := validate(step, res.Epoch); err != nil {
				return nil, err
			}
		}
		if err := ckpt.afterStep(step, res.Epoch, total, improved); err != nil {
			return nil, err
		}
	}
	if sum.Interrupted {
		if err := ckpt.interrupted(sum.Steps, sum.Epochs); err != nil {
			return nil, err
		}
	}
	if err := validate(sum.Steps, sum.Epochs); err != nil {
		return nil, err
	}
	if !sum.Interrupted {
		if err := ckpt.end(sum.Steps, sum.Epochs); err != nil {
			return nil, err
		}
	}
	sum.LastCheckpoint = ckpt.lastPath
	prog.finish()
	sum.LossScale, sum.SkippedSteps = tr.Scaler.LossScale(), tr.Scaler.Skipped
	sum.StepMSMedian = median(stepMS)
	sum.PeakRSSBytes = PeakRSS()
	sum.WallSeconds = time.Since(start).Seconds()
	out, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.OutDir, "summary.json"), append(out, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("writing summary.json: %w", err)
	}
	return sum, nil
}

// evaluate runs the model in eval mode over idx in batches of batch and
// returns loss and metrics. Targets go into masks (a Uint8 view of at least
// batch*H*W values on the model's device: the training batch's), so
// validation allocates nothing but each batch's images and what the layers
// allocate.
func evaluate(env *model.Env, net *model.UNet, ds data.Dataset, idx []int, batch int, masks backend.View) (ValRecord, error) {
	H, W := ds.Size()
	K := net.Config.Classes
	counts := make([]int64, K*K)
	var lossSum float64
	hostImages, hostMasks := make([]float32, batch*ds.Channels()*H*W), make([]uint8, batch*H*W)
	for lo := 0; lo < len(idx); lo += batch {
		hi := min(lo+batch, len(idx))
		n := hi - lo
		images, err := model.NewTensor(env.Device, memory.Activations, backend.Float32, n, ds.Channels(), H, W)
		if err != nil {
			return ValRecord{}, err
		}
		target := masks.Slice(0, n*H*W)
		if !env.Pool.Virtual() { // a planned validation has no memory to fill
			if err = data.FillBatch(ds, idx[lo:hi], hostImages[:images.Len()], hostMasks[:n*H*W]); err == nil {
				images.Write(hostImages[:images.Len()])
				env.Backend.Upload(target, hostMasks[:n*H*W])
			}
		}
		var logits *model.Tensor
		if err == nil {
			logits, err = net.Forward(env, images)
		}
		images.Release()
		if err != nil {
			return ValRecord{}, err
		}
		var ce model.CrossEntropy
		loss, err := ce.Forward(env, logits, target)
		if err == nil {
			env.Backend.Confusion(backend.Shape4{N: n, C: K, H: H, W: W}, counts, logits.View(), target)
		}
		logits.Release()
		if err != nil {
			return ValRecord{}, err
		}
		lossSum += loss * float64(n)
	}
	conf := &Confusion{Classes: K, Counts: counts}
	return ValRecord{
		ValLoss: lossSum / float64(len(idx)), ValPixelAcc: conf.PixelAccuracy(),
		ValMIoU: conf.MeanIoU(), ValDice: conf.MeanDice(),
	}, nil
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

// TimelinePoint is one allocation or free in timeline.json.
type TimelinePoint struct {
	TimeMS         float64 `json:"t_ms"` // since the step's first event
	Category       string  `json:"category"`
	DeltaBytes     int64   `json:"delta_bytes"`
	AllocatedBytes int64   `json:"allocated_bytes"`
	ReservedBytes  int64   `json:"reserved_bytes"`
}

// Timeline is timeline.json: every allocation and free of one optimizer
// step (the last one run), written when memory.timeline is on.
type Timeline struct {
	Step   int             `json:"step"`
	Points []TimelinePoint `json:"points"`
}

func writeTimeline(path string, step int, events []memory.Event) error {
	tl := Timeline{Step: step, Points: make([]TimelinePoint, len(events))}
	for i, e := range events {
		tl.Points[i] = TimelinePoint{
			TimeMS: float64(e.At-events[0].At) / 1e6, Category: e.Category.String(), DeltaBytes: e.Delta,
			AllocatedBytes: e.Allocated, ReservedBytes: e.Reserved,
		}
	}
	out, err := json.Marshal(tl)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
