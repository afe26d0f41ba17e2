package train

import (
	"errors"
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
)

// FitCandidate is one configuration memory.fit: auto may train.
type FitCandidate struct {
	Name   string // what was added, e.g. "+ checkpoint all"
	Config config.Config
}

// FitCandidates lists, in order, what memory.fit: auto tries: the
// configuration as it is; plus recompute of every level; plus 16-bit
// storage (bf16, or fp16 if fp16 was configured); then, on top of those,
// the micro-batch halved and accumulation doubled, again and again down to a
// micro-batch of 1, keeping the effective batch (an odd micro-batch stops the
// halving).
func FitCandidates(cfg config.Config) []FitCandidate {
	c := cfg
	out := []FitCandidate{{"as configured", c}}
	if !c.Model.Checkpoint.All && len(c.Model.Checkpoint.Levels) < c.Model.Depth+1 {
		c.Model.Checkpoint = config.Checkpoint{All: true}
		out = append(out, FitCandidate{"+ model.checkpoint: all", c})
	}
	if c.Train.Precision == backend.Float32 {
		c.Train.Precision = backend.BFloat16
		out = append(out, FitCandidate{"+ train.precision: bf16", c})
	}
	for c.Train.BatchSize > 1 && c.Train.BatchSize%2 == 0 {
		c.Train.BatchSize /= 2
		c.Train.Accumulate *= 2
		out = append(out, FitCandidate{fmt.Sprintf("+ train.batch_size: %d, train.accumulate: %d", c.Train.BatchSize, c.Train.Accumulate), c})
	}
	return out
}

// Fit picks the first of FitCandidates(cfg) whose planned peak fits in
// memory.capacity, and says why in one line. It fails, naming the smallest
// need, when none fits.
func Fit(cfg config.Config) (config.Config, string, error) {
	capacity := int64(cfg.Memory.Capacity)
	var tried []string
	for _, cand := range FitCandidates(cfg) {
		row, err := PlanConfig(cand.Config)
		if err != nil {
			return cfg, "", err
		}
		if row.PeakReservedBytes <= capacity {
			why := fmt.Sprintf("memory.fit: auto: training with %s: planned peak %s reserved fits memory.capacity %s",
				describeChanges(cfg, cand.Config), memory.FormatBytes(row.PeakReservedBytes), memory.FormatBytes(capacity))
			if len(tried) > 0 {
				why += "; did not fit: " + joinComma(tried)
			}
			return cand.Config, why, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", cand.Name, memory.FormatBytes(row.PeakReservedBytes)))
	}
	return cfg, "", fmt.Errorf("memory.fit: auto: nothing fits memory.capacity %s; tried %s. Raise memory.capacity, or lower %s or model.base",
		memory.FormatBytes(capacity), joinComma(tried), SizeKey(cfg))
}

// Adopt switches the trainer to another variant of its configuration
// between steps: recomputed levels, precision (with 16-bit weight copies
// and the grad scaler for fp16) and micro-batch size with accumulation.
// Model, data, optimizer state and the position in the data are kept: the
// position counts samples, so a smaller micro-batch continues where the
// larger one stopped.
func (t *Trainer) Adopt(c config.Config) error {
	t.Net.SetRecompute(c.ModelConfig().Recompute)
	prec := c.Train.Precision
	if err := t.Net.SetPrecision(prec); err != nil {
		return err
	}
	t.env.Precision = prec
	if on := c.ScalerEnabled(); on != t.Scaler.Enabled {
		t.Scaler.Enabled = on
		t.Scaler.Scale, t.Scaler.GrowthTracker = c.Train.Scaler.InitScale, 0
	}
	if b := c.Train.BatchSize; b != t.Config.Train.BatchSize || c.Train.Accumulate != t.Config.Train.Accumulate {
		samples := t.micro * t.Config.Train.BatchSize
		t.freeBatch()
		if _, err := t.allocBatch(b); err != nil {
			return err
		}
		t.microPerEpoch = len(t.trainIdx) / (b * c.Train.Accumulate) * c.Train.Accumulate
		t.micro = samples / b
	}
	t.Config = c
	return nil
}

// fitNext moves a memory.fit: auto run to the next candidate after an
// out-of-memory error: the first later one that plan says fits. It reports
// false when there is none.
func (t *Trainer) fitNext() (bool, string) {
	for len(t.fitQueue) > 0 {
		cand := t.fitQueue[0]
		t.fitQueue = t.fitQueue[1:]
		row, err := PlanConfig(cand.Config)
		if err != nil || row.PeakReservedBytes > int64(t.Config.Memory.Capacity) {
			continue
		}
		if err := t.Adopt(cand.Config); err != nil {
			var oom *memory.OutOfMemoryError
			if errors.As(err, &oom) {
				continue
			}
			return false, ""
		}
		return true, fmt.Sprintf("memory.fit: auto: out of memory during training; continuing with %s (planned peak %s reserved)",
			describeChanges(t.fitFrom, cand.Config), memory.FormatBytes(row.PeakReservedBytes))
	}
	return false, ""
}
