package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/optim"
)

// Manifest is a run checkpoint's manifest.json: everything besides the
// tensors that a resumed run needs to continue bit for bit, and what
// predict, eval and export need to rebuild the model.
type Manifest struct {
	Format         string `json:"format"`         // Format
	FormatVersion  int    `json:"format_version"` // FormatVersion
	MemunetVersion string `json:"memunet_version"`
	Created        string `json:"created"` // RFC 3339
	// Serial orders the checkpoints of a directory by when they were
	// written: one more than the largest there at the time.
	Serial int `json:"serial"`
	// Step is the number of optimizer steps taken; Epoch the 1-based epoch of
	// the last one (as in metrics.jsonl).
	Step     int         `json:"step"`
	Epoch    int         `json:"epoch"`
	Position Position    `json:"position"`
	Request  Request     `json:"request"`
	RNG      RNGState    `json:"rng"`
	Scaler   ScalerState `json:"scaler"`
	Adam     AdamState   `json:"adam"`
	ValMIoU  *float64    `json:"val_miou"` // of a validation at Step; null when there was none
	// Score is that validation's train.monitor score (Monitor names it);
	// the best checkpoint is the best score.
	Score   *float64 `json:"score,omitempty"`
	Monitor string   `json:"monitor,omitempty"`
	// EarlyStop is train.early_stop's state (with a patience).
	EarlyStop *EarlyStopState `json:"early_stop,omitempty"`
	Metrics   MetricsHistory  `json:"metrics"`
	Config    map[string]any  `json:"config"` // the resolved configuration, as in config.yaml
	// Schedule is a plateau learning-rate schedule's state (its rate, best
	// val mIoU, validations without improvement); nil for the other kinds,
	// whose rate is a function of the step.
	Schedule *optim.ScheduleState `json:"schedule,omitempty"`
	// MaskValues is each class's raw value in the dataset's masks (data.mask_values,
	// or what the scan found); absent when classes are their own values.
	// predict writes masks in these values.
	MaskValues []int `json:"mask_values,omitempty"`
	// Data identifies the dataset trained on; nil in checkpoints of
	// memunet before 0.1.0 kept it.
	Data     *data.Fingerprint `json:"data,omitempty"`
	Contents map[string]string `json:"contents"` // what each file holds
	Files    map[string]Sum    `json:"files"`
	// World is the number of data-parallel processes that trained it (0:
	// one); a resume needs the same.
	World int `json:"world_size,omitempty"`
	// WallSeconds is the run's wall time up to Step, across the parts of a
	// resumed run (absent in checkpoints of memunet before it was kept).
	WallSeconds float64 `json:"wall_s,omitempty"`
}

// Position is where in the data the next micro-batch comes from.
type Position struct {
	MicroBatches         int `json:"micro_batches"` // consumed since the start of training
	MicroBatchSize       int `json:"micro_batch_size"`
	MicroBatchesPerEpoch int `json:"micro_batches_per_epoch"`
	EpochIndex           int `json:"epoch_index"`          // 0-based epoch of the next micro-batch
	MicroBatchInEpoch    int `json:"micro_batch_in_epoch"` // its position in that epoch's order
	Accumulate           int `json:"accumulate"`
	// CyclePosition is the number of micro-batches into an accumulation
	// cycle. Checkpoints are only taken between optimizer steps, so it is 0.
	CyclePosition int `json:"cycle_position"`
}

// Request says why the checkpoint was taken.
type Request struct {
	// Reason is every (train.checkpoint_every), best (a validation improved
	// val_miou), end (the last step) or interrupt (SIGINT/SIGTERM).
	Reason string `json:"reason"`
	// MidCycle: the request came while an optimizer step (an accumulation
	// cycle) was running; the checkpoint was taken at the cycle's end.
	MidCycle bool   `json:"mid_cycle"`
	Note     string `json:"note,omitempty"`
}

// RNGState is what determines the random streams from here on. memunet has
// no hidden generator state: weights are initialized once from model.seed
// (the weights are in model.safetensors), every sample is a function of
// (data.seed, index) and every epoch's order a function of (train.seed,
// epoch).
type RNGState struct {
	ModelSeed    uint64 `json:"model_seed"`
	DataSeed     uint64 `json:"data_seed"`
	ShuffleSeed  uint64 `json:"shuffle_seed"`
	ShuffleEpoch int    `json:"shuffle_epoch"`
	Note         string `json:"note"`
}

// ScalerState is the grad scaler (optim.GradScaler) at the checkpoint.
type ScalerState struct {
	Enabled        bool    `json:"enabled"`
	Scale          float64 `json:"scale"`
	GrowthTracker  int     `json:"growth_tracker"`
	Skipped        int     `json:"skipped_steps"`
	GrowthFactor   float64 `json:"growth_factor"`
	BackoffFactor  float64 `json:"backoff_factor"`
	GrowthInterval int     `json:"growth_interval"`
}

// AdamState is Adam's step count and hyperparameters (its moments are in
// runfiles.Optimizer).
type AdamState struct {
	Step        int64   `json:"step"`
	LR          float64 `json:"lr"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	WeightDecay float64 `json:"weight_decay"`
	// Kind is the optimizer (adam when absent); the others' settings
	// follow. The key stays "adam" for the checkpoints of memunet 0.1.
	Kind      string  `json:"kind,omitempty"`
	Momentum  float64 `json:"momentum,omitempty"`
	Dampening float64 `json:"dampening,omitempty"`
	Nesterov  bool    `json:"nesterov,omitempty"`
	Alpha     float64 `json:"alpha,omitempty"`
}

// MetricsHistory is every step's loss and every validation up to the checkpoint.
type MetricsHistory struct {
	Steps []StepPoint `json:"steps"`
	Val   []ValRecord `json:"val"`
}

// StepPoint is one optimizer step in the history.
type StepPoint struct {
	Step    int       `json:"step"`
	Epoch   int       `json:"epoch"`
	Loss    JSONFloat `json:"loss"`
	Skipped bool      `json:"skipped,omitempty"`
}

// ValRecord is one validation: a line of metrics.jsonl and an entry of a
// checkpoint's history.
type ValRecord struct {
	Type  string `json:"type"` // "val"
	Step  int    `json:"step"`
	Epoch int    `json:"epoch"`
	metrics.Validation
}

// EarlyStopState is train.early_stop's memory, saved in checkpoints so a
// resumed run stops where the uninterrupted one would.
type EarlyStopState struct {
	Best *float64 `json:"best"` // the best score so far (null before the first validation)
	Wait int      `json:"wait"` // scheduled validations since it improved by more than min_delta
}

// JSONFloat is a float64 that also survives JSON when not finite ("NaN",
// "+Inf", "-Inf").
type JSONFloat float64

func (f JSONFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return json.Marshal(strconv.FormatFloat(v, 'g', -1, 64))
	}
	return json.Marshal(v)
}

func (f *JSONFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := strconv.ParseFloat(s, 64)
		*f = JSONFloat(v)
		return err
	}
	var v float64
	err := json.Unmarshal(b, &v)
	*f = JSONFloat(v)
	return err
}

// exactNumbers turns every json.Number into an int64, uint64 or float64.
func exactNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = exactNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = exactNumbers(e)
		}
		return x
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	}
	return v
}

// UnmarshalJSON decodes a manifest keeping the configuration's integers exact
// (seeds are uint64; float64 would round them).
func (m *Manifest) UnmarshalJSON(b []byte) error {
	type plain Manifest
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keys a later memunet adds are ignored
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*m = Manifest(p)
	if m.Config != nil {
		m.Config = exactNumbers(m.Config).(map[string]any)
	}
	return m.checkRanges()
}

// MaxCount bounds every step, epoch and count a manifest holds. No run
// comes near it (2^40 steps are 35 years at 1000 a second), and a sum, a
// doubling or a product with a configuration's count (train.epochs is at
// most 10^6 < 2^20) of such numbers stays far inside int64, so that a
// forged manifest cannot make a position or a hint overflow.
const MaxCount = 1 << 40

// checkRanges refuses a manifest whose steps, epochs or counts are
// negative or above MaxCount, naming the first such field by its JSON key.
func (m *Manifest) checkRanges() error {
	var bad error
	check := func(key string, at int, v int64) {
		if bad != nil || v >= 0 && v <= MaxCount {
			return
		}
		if at >= 0 {
			key = fmt.Sprintf(key, at)
		}
		bad = fmt.Errorf("%s is %d, outside 0 to %d: the manifest was edited or is damaged; use another checkpoint", key, v, int64(MaxCount))
	}
	p := m.Position
	for _, f := range []struct {
		key string
		v   int64
	}{
		{"serial", int64(m.Serial)}, {"step", int64(m.Step)}, {"epoch", int64(m.Epoch)},
		{"position.micro_batches", int64(p.MicroBatches)}, {"position.micro_batch_size", int64(p.MicroBatchSize)},
		{"position.micro_batches_per_epoch", int64(p.MicroBatchesPerEpoch)}, {"position.epoch_index", int64(p.EpochIndex)},
		{"position.micro_batch_in_epoch", int64(p.MicroBatchInEpoch)}, {"position.accumulate", int64(p.Accumulate)},
		{"position.cycle_position", int64(p.CyclePosition)}, {"rng.shuffle_epoch", int64(m.RNG.ShuffleEpoch)},
		{"scaler.growth_tracker", int64(m.Scaler.GrowthTracker)}, {"scaler.skipped_steps", int64(m.Scaler.Skipped)},
		{"adam.step", m.Adam.Step}, {"world_size", int64(m.World)},
	} {
		check(f.key, -1, f.v)
	}
	if m.EarlyStop != nil {
		check("early_stop.wait", -1, int64(m.EarlyStop.Wait))
	}
	if m.Schedule != nil {
		check("schedule.bad_validations", -1, int64(m.Schedule.BadValidations))
	}
	for i, s := range m.Metrics.Steps {
		check("metrics.steps[%d].step", i, int64(s.Step))
		check("metrics.steps[%d].epoch", i, int64(s.Epoch))
	}
	for i, v := range m.Metrics.Val {
		check("metrics.val[%d].step", i, int64(v.Step))
		check("metrics.val[%d].epoch", i, int64(v.Epoch))
	}
	return bad
}
