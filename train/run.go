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
	Params                  int              `json:"params"`
	WallSeconds             float64          `json:"wall_s"`
	Interrupted             bool             `json:"interrupted"`
}

// Options are a run's inputs besides the configuration.
type Options struct {
	// OutDir receives config.yaml, metrics.jsonl and summary.json.
	OutDir string
	// Progress receives the progress bar or lines; nil discards them.
	Progress io.Writer
	// Terminal says Progress is a terminal (for output.progress: auto).
	Terminal bool
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
	ds, err := data.NewSynthetic(data.SyntheticConfig{
		Count: cfg.Data.Count, Size: cfg.Data.Size, Classes: cfg.Model.Classes, Seed: cfg.Data.Seed, Noise: cfg.Data.Noise,
	})
	if err != nil {
		return nil, err
	}
	trainIdx, valIdx := data.Split(ds.Len(), cfg.Data.ValFraction, cfg.Data.Seed)
	batch := cfg.Train.BatchSize
	if len(trainIdx) < batch {
		return nil, fmt.Errorf("train.batch_size %d is larger than the %d training samples; lower train.batch_size or raise data.count", batch, len(trainIdx))
	}
	stepsPerEpoch := len(trainIdx) / batch // the last partial batch is dropped, so every step has the same memory
	total := cfg.Train.Steps
	if total == 0 {
		total = cfg.Train.Epochs * stepsPerEpoch
	}

	pool := memory.NewPool(memory.Options{Capacity: int64(cfg.Memory.Capacity), Timeline: cfg.Memory.Timeline})
	net, err := model.New(pool, cfg.ModelConfig(), cfg.Model.Seed)
	if err != nil {
		return nil, err
	}
	defer net.Free()
	opt, err := NewAdam(pool, net.Params(), AdamConfig{
		LR: cfg.Train.LR, Beta1: cfg.Train.Betas[0], Beta2: cfg.Train.Betas[1], Eps: cfg.Train.Eps, WeightDecay: cfg.Train.WeightDecay,
	})
	if err != nil {
		return nil, err
	}
	defer opt.Free()
	H, W := ds.Size()
	C := ds.Channels()
	images, err := model.NewTensor(pool, memory.Activations, batch, C, H, W)
	if err != nil {
		return nil, err
	}
	defer images.Release()
	masksBuf, err := pool.AllocBytes(memory.Activations, batch*H*W)
	if err != nil {
		return nil, err
	}
	defer pool.MustFree(masksBuf)

	metricsFile, err := os.Create(filepath.Join(opts.OutDir, "metrics.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("output.dir: %w", err)
	}
	defer metricsFile.Close()
	enc := json.NewEncoder(metricsFile)

	prog := newProgress(cfg.Output, opts, total)
	sum := &Summary{Params: net.NumParams(), PeakAllocatedByCategory: map[string]int64{}}
	var stepMS []float64
	trackPeak := func() {
		st := pool.Stats()
		if st.Allocated.Peak > sum.PeakAllocatedBytes {
			sum.PeakAllocatedBytes = st.Allocated.Peak
			for _, c := range memory.Categories() {
				sum.PeakAllocatedByCategory[c.String()] = st.AtPeak[c]
			}
		}
		sum.PeakReservedBytes = max(sum.PeakReservedBytes, st.Reserved.Peak)
	}
	validate := func(step, epoch int) error {
		pool.ResetPeak()
		v, err := evaluate(pool, net, ds, valIdx, batch)
		if err != nil {
			return err
		}
		trackPeak()
		sum.ValLoss, sum.ValPixelAcc, sum.ValMIoU, sum.ValDice = v.ValLoss, v.ValPixelAcc, v.ValMIoU, v.ValDice
		v.Type, v.Step, v.Epoch = "val", step, epoch
		prog.validation(v)
		return enc.Encode(v)
	}

	env := &model.Env{Pool: pool, Training: true}
	var order []int
	for step := 1; step <= total; step++ {
		if ctx.Err() != nil {
			sum.Interrupted = true
			break
		}
		epoch, pos := (step-1)/stepsPerEpoch, (step-1)%stepsPerEpoch
		if pos == 0 {
			order = data.Shuffle(trainIdx, cfg.Train.Seed, epoch)
		}
		pool.ResetPeak()
		t0 := time.Now()
		if err := data.FillBatch(ds, order[pos*batch:(pos+1)*batch], images.Data(), masksBuf.Bytes()); err != nil {
			return nil, err
		}
		loss, err := trainStep(env, net, images, masksBuf.Bytes())
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", step, err)
		}
		opt.Update()
		ms := float64(time.Since(t0).Microseconds()) / 1000
		stepMS = append(stepMS, ms)
		st := pool.Stats()
		trackPeak()
		rec := StepRecord{
			Type: "step", Step: step, Epoch: epoch + 1, Loss: loss, LR: cfg.Train.LR, StepMS: ms,
			AllocatedBytes: st.Allocated.Current, ReservedBytes: st.Reserved.Current, PeakAllocatedBytes: st.Allocated.Peak,
		}
		if err := enc.Encode(rec); err != nil {
			return nil, fmt.Errorf("writing metrics.jsonl: %w", err)
		}
		prog.step(rec)
		sum.Steps, sum.Epochs, sum.FinalLoss = step, epoch+1, loss
		if cfg.Train.ValEvery > 0 && step%cfg.Train.ValEvery == 0 && step != total {
			if err := validate(step, epoch+1); err != nil {
				return nil, err
			}
		}
	}
	if err := validate(sum.Steps, sum.Epochs); err != nil {
		return nil, err
	}
	prog.finish()
	sum.StepMSMedian = median(stepMS)
	sum.PeakRSSBytes = peakRSS()
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

// trainStep zeroes the gradients, runs forward, the loss and backward, and
// returns the loss; every activation is freed when it returns.
func trainStep(env *model.Env, net *model.UNet, images *model.Tensor, masks []uint8) (float64, error) {
	net.ZeroGrad()
	logits, err := net.Forward(env, images)
	if err != nil {
		return 0, err
	}
	var ce model.CrossEntropy
	loss, err := ce.Forward(env, logits, masks)
	logits.Release()
	if err != nil {
		return 0, err
	}
	dlogits, err := ce.Backward(env, 1)
	if err != nil {
		return 0, err
	}
	return loss, net.Backward(env, dlogits)
}

// evaluate runs the model in eval mode over idx and returns loss and metrics.
func evaluate(pool *memory.Pool, net *model.UNet, ds data.Dataset, idx []int, batch int) (ValRecord, error) {
	env := &model.Env{Pool: pool}
	H, W := ds.Size()
	conf := NewConfusion(net.Config.Classes)
	var lossSum float64
	for lo := 0; lo < len(idx); lo += batch {
		hi := min(lo+batch, len(idx))
		n := hi - lo
		images, err := model.NewTensor(pool, memory.Activations, n, ds.Channels(), H, W)
		if err != nil {
			return ValRecord{}, err
		}
		masks := make([]uint8, n*H*W)
		err = data.FillBatch(ds, idx[lo:hi], images.Data(), masks)
		var logits *model.Tensor
		if err == nil {
			logits, err = net.Forward(env, images)
		}
		images.Release()
		if err != nil {
			return ValRecord{}, err
		}
		var ce model.CrossEntropy
		loss, err := ce.Forward(env, logits, masks)
		if err == nil {
			conf.Add(logits.Data(), masks, n, H, W)
		}
		logits.Release()
		if err != nil {
			return ValRecord{}, err
		}
		lossSum += loss * float64(n)
	}
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
