package rundir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/optim"
	"github.com/memunet/memunet/train"
	"go.yaml.in/yaml/v3"
)

// Files of a checkpoint directory (besides checkpoint.ManifestName).
const (
	// CheckpointsDir is the folder of a run directory that holds its checkpoints.
	CheckpointsDir = "checkpoints"
	// ModelFile holds the model's state_dict: every parameter (the fp32
	// masters) and buffer under its PyTorch name, BatchNorm's
	// num_batches_tracked as I64 scalars.
	ModelFile = "model.safetensors"
	// OptimizerFile holds the optimizer's state for every trainable
	// parameter, state.<param>.<name> (exp_avg and exp_avg_sq for Adam,
	// momentum_buffer, square_avg: optim.StateTensor).
	OptimizerFile = "optimizer.safetensors"
)

// Manifest is a checkpoint's manifest.json.
type Manifest struct {
	Format         string `json:"format"`         // checkpoint.Format
	FormatVersion  int    `json:"format_version"` // checkpoint.FormatVersion
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
	Data     *data.Fingerprint         `json:"data,omitempty"`
	Contents map[string]string         `json:"contents"` // what each file holds
	Files    map[string]checkpoint.Sum `json:"files"`
	// World is the number of data-parallel processes that trained it (0:
	// one); a resume needs the same.
	World int `json:"world_size,omitempty"`
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
// OptimizerFile).
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

// optimizerState is the optimizer's step and settings for the manifest.
func optimizerState(o optim.Optimizer) AdamState {
	c := o.Config()
	st := AdamState{Step: o.Steps(), LR: c.LR, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Kind: string(c.Kind)}
	if c.Kind == optim.KindSGD || c.Kind == optim.KindRMSprop {
		st.Beta1, st.Beta2 = 0, 0
		st.Momentum, st.Dampening, st.Nesterov = c.Momentum, c.Dampening, c.Nesterov
	}
	if c.Kind == optim.KindRMSprop {
		st.Alpha = c.Alpha
	}
	return st
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
	Loss    jsonFloat `json:"loss"`
	Skipped bool      `json:"skipped,omitempty"`
}

// jsonFloat is a float64 that also survives JSON when not finite ("NaN",
// "+Inf", "-Inf").
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return json.Marshal(strconv.FormatFloat(v, 'g', -1, 64))
	}
	return json.Marshal(v)
}

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := strconv.ParseFloat(s, 64)
		*f = jsonFloat(v)
		return err
	}
	var v float64
	err := json.Unmarshal(b, &v)
	*f = jsonFloat(v)
	return err
}

// Checkpoint is an opened, verified checkpoint.
type Checkpoint struct {
	Dir      string
	Manifest Manifest
	// Config is the configuration the checkpoint was trained with.
	Config config.Config
	model  *checkpoint.File
	optim  *checkpoint.File
}

// OpenCheckpoint reads and verifies the checkpoint in dir (checksums and
// sizes of every file, the manifest, the configuration, the safetensors
// headers). Every refusal is a *checkpoint.Error naming the problem.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	o, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{Dir: dir}
	if err := json.Unmarshal(o.Manifest, &ck.Manifest); err != nil {
		return nil, &checkpoint.Error{Dir: dir, Kind: checkpoint.ErrFormat, Detail: fmt.Sprintf("%s: %v", checkpoint.ManifestName, err)}
	}
	if ck.Config, err = manifestConfig(dir, ck.Manifest.Config, nil); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		dst  **checkpoint.File
	}{{ModelFile, &ck.model}, {OptimizerFile, &ck.optim}} {
		b, ok := o.Files[f.name]
		if !ok {
			return nil, &checkpoint.Error{Dir: dir, Kind: checkpoint.ErrMissing, Detail: fmt.Sprintf("the manifest lists no %s", f.name)}
		}
		if *f.dst, err = checkpoint.ReadSafetensors(b); err != nil {
			return nil, &checkpoint.Error{Dir: dir, Kind: checkpoint.ErrFormat, Detail: fmt.Sprintf("%s: %v", f.name, err)}
		}
	}
	return ck, nil
}

// CheckpointConfig is the configuration stored in the checkpoint at dir,
// with overrides ("section.key=value") applied and validated, for resuming
// without a config file. The checkpoint is verified first.
func CheckpointConfig(dir string, overrides []string) (config.Config, error) {
	ck, err := openToResume(dir)
	if err != nil {
		return config.Config{}, err
	}
	return manifestConfig(dir, ck.Manifest.Config, overrides)
}

func manifestConfig(dir string, m map[string]any, overrides []string) (config.Config, error) {
	src, err := yaml.Marshal(m)
	if err != nil {
		return config.Config{}, err
	}
	cfg, err := config.Parse(filepath.Join(dir, checkpoint.ManifestName)+" config", src, overrides)
	if err != nil {
		return config.Config{}, &checkpoint.Error{Dir: dir, Kind: checkpoint.ErrFormat, Detail: err.Error()}
	}
	return cfg, nil
}

// configMap is cfg as a JSON-ready map with the keys of config.yaml.
func configMap(cfg config.Config) (map[string]any, error) {
	src, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(src, &m); err != nil {
		return nil, err
	}
	return m, nil
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
	return nil
}

// StateDict lists the model's tensors in PyTorch state_dict order: the
// parameters and buffers as float32 (downloaded: host copies), and after each
// BatchNorm's running_var its num_batches_tracked as an int64 scalar.
func StateDict(net *model.UNet) []checkpoint.Tensor {
	counts := map[string]*model.BatchNorm2d{}
	for _, bn := range net.BatchNorms() {
		counts[bn.RunningVar.Name] = bn
	}
	var out []checkpoint.Tensor
	for _, p := range net.Params() {
		out = append(out, checkpoint.F32Tensor(p.Name, p.Shape, p.Read()))
		if bn, ok := counts[p.Name]; ok {
			out = append(out, checkpoint.I64Tensor(bn.CountName(), nil, []int64{bn.NumBatchesTracked}))
		}
	}
	return out
}

// stateSpecs is the layout of StateDict(net), without copying values.
func stateSpecs(net *model.UNet) []tensorSpec {
	counts := map[string]*model.BatchNorm2d{}
	for _, bn := range net.BatchNorms() {
		counts[bn.RunningVar.Name] = bn
	}
	var out []tensorSpec
	for _, p := range net.Params() {
		out = append(out, tensorSpec{p.Name, checkpoint.F32, p.Shape})
		if bn, ok := counts[p.Name]; ok {
			out = append(out, tensorSpec{bn.CountName(), checkpoint.I64, []int{}})
		}
	}
	return out
}

// stateName is an optimizer state tensor's name in optimizer.safetensors:
// state.<parameter>.<exp_avg, momentum_buffer, ...>, as PyTorch's
// optimizer state_dict calls it.
func stateName(s optim.StateTensor) string { return "state." + s.Param.Name + "." + s.Name }

func optimizerSpecs(t *train.Trainer) []tensorSpec {
	var out []tensorSpec
	for _, s := range t.Opt.State() {
		out = append(out, tensorSpec{stateName(s), checkpoint.F32, s.Param.Shape})
	}
	return out
}

func optimizerTensors(t *train.Trainer) []checkpoint.Tensor {
	var out []checkpoint.Tensor
	for _, s := range t.Opt.State() {
		out = append(out, checkpoint.F32Tensor(stateName(s), s.Param.Shape, backend.DownloadFloat32(t.Device.Backend, s.View)))
	}
	return out
}

// tensorSpec is a tensor's name, type and shape, for comparing layouts.
type tensorSpec struct {
	name  string
	dtype checkpoint.DType
	shape []int
}

func specs(ts []checkpoint.Tensor) []tensorSpec {
	out := make([]tensorSpec, len(ts))
	for i, t := range ts {
		out[i] = tensorSpec{t.Name, t.DType, t.Shape}
	}
	return out
}

// layoutDiff lists how the tensors of a file (got) differ from those the
// model expects (want): names only in one of them, and other shapes or types.
func layoutDiff(got, want []tensorSpec) []string {
	wantBy := map[string]tensorSpec{}
	for _, s := range want {
		wantBy[s.name] = s
	}
	gotBy := map[string]bool{}
	var diffs []string
	for _, g := range got {
		gotBy[g.name] = true
		w, ok := wantBy[g.name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s %v only in the checkpoint", g.name, g.shape))
		case g.dtype != w.dtype:
			diffs = append(diffs, fmt.Sprintf("%s: checkpoint %s, model %s", g.name, g.dtype, w.dtype))
		case !slices.Equal(g.shape, w.shape):
			diffs = append(diffs, fmt.Sprintf("%s: checkpoint %v, model %v", g.name, g.shape, w.shape))
		}
	}
	for _, w := range want {
		if !gotBy[w.name] {
			diffs = append(diffs, fmt.Sprintf("%s %v only in the model", w.name, w.shape))
		}
	}
	return diffs
}

func listSome(xs []string, n int) string {
	if len(xs) <= n {
		return strings.Join(xs, "; ")
	}
	return strings.Join(xs[:n], "; ") + fmt.Sprintf("; and %d more", len(xs)-n)
}

// modelMismatch refuses a checkpoint whose model tensors do not fit net.
func (ck *Checkpoint) modelMismatch(net *model.UNet) error {
	diffs := layoutDiff(specs(ck.model.Tensors), stateSpecs(net))
	if len(diffs) == 0 {
		return nil
	}
	return &checkpoint.Error{Dir: ck.Dir, Kind: checkpoint.ErrMismatch, Detail: fmt.Sprintf(
		"%s does not match the model's architecture (%s): %d tensors differ: %s",
		ModelFile, describeArch(net.Config), len(diffs), listSome(diffs, 8))}
}

func describeArch(c model.Config) string {
	return fmt.Sprintf("in_channels %d, classes %d, base %d, depth %d, up %s, norm %s", c.InChannels, c.Classes, c.Base, c.Depth, c.Up, c.Norm)
}

// LoadWeights copies the checkpoint's model tensors into net (built with the
// same architecture) after checking that names, types and shapes match.
func (ck *Checkpoint) LoadWeights(net *model.UNet) error {
	if err := ck.modelMismatch(net); err != nil {
		return err
	}
	for _, p := range net.Params() {
		tn, _ := ck.model.Get(p.Name)
		vals := make([]float32, p.Len())
		if err := tn.Float32(vals); err != nil {
			return &checkpoint.Error{Dir: ck.Dir, Kind: checkpoint.ErrFormat, Detail: err.Error()}
		}
		p.Write(vals) // and the working copy, if any, from it
	}
	for _, bn := range net.BatchNorms() {
		tn, _ := ck.model.Get(bn.CountName())
		v, err := tn.Int64()
		if err != nil {
			return &checkpoint.Error{Dir: ck.Dir, Kind: checkpoint.ErrFormat, Detail: err.Error()}
		}
		bn.NumBatchesTracked = v[0]
	}
	return nil
}

// Restore puts the trainer in the checkpoint's state: weights (fp32 masters;
// the 16-bit working copies are rounded from them again, which is what they
// were), BatchNorm statistics and counts, Adam's moments and step, the grad
// scaler, the position in the data. Nothing is changed unless every tensor's
// name, type and shape matches.
//
// A checkpoint whose dataset fingerprint differs from the trainer's is
// refused naming what changed (DataChangedError), unless dataChanged
// allows it; then a dataset of another size is continued from the start of
// its next epoch.
func Restore(t *train.Trainer, ck *Checkpoint, dataChanged bool) error {
	if fp := ck.Manifest.Data; fp != nil && !dataChanged {
		if diffs := fp.Diff(t.DataFingerprint); len(diffs) > 0 {
			return &DataChangedError{Checkpoint: ck.Dir, Diffs: diffs}
		}
	}
	if err := ck.modelMismatch(t.Net); err != nil {
		return err
	}
	if diffs := layoutDiff(specs(ck.optim.Tensors), optimizerSpecs(t)); len(diffs) > 0 {
		return &checkpoint.Error{Dir: ck.Dir, Kind: checkpoint.ErrMismatch, Detail: fmt.Sprintf(
			"%s does not match the model's parameters: %d tensors differ: %s", OptimizerFile, len(diffs), listSome(diffs, 8))}
	}
	pos := ck.Manifest.Position
	// memory.fit: auto may have moved the checkpointed run to another variant.
	variant := ck.Config.Variant()
	variant.EmptyCache = t.Config.Memory.EmptyCache // memory.* may change on resume
	if ck.Config.Memory.Fit == "auto" && !variant.Equal(t.Config.Variant()) {
		if err := t.Adopt(t.Config.WithVariant(variant)); err != nil {
			return t.ExplainOOM(err, "adopting the checkpoint's variant")
		}
		t.FitLog = append(t.FitLog, "memory.fit: auto: resuming with the checkpoint's variant: "+variant.Changes(t.FitFrom().Variant()))
	}
	_, perEpoch := t.Position()
	consumed := pos.MicroBatches
	if dataChanged && pos.MicroBatchesPerEpoch != perEpoch && pos.MicroBatchSize == t.Config.Train.BatchSize && pos.Accumulate == t.Config.Train.Accumulate {
		// The data changed size (allowed): go on from the start of the next
		// epoch of the new data, so epochs stay whole and in order.
		next := pos.EpochIndex
		if pos.MicroBatchInEpoch > 0 {
			next++
		}
		consumed, pos.MicroBatchesPerEpoch = next*perEpoch, perEpoch
	}
	if pos.MicroBatchSize != t.Config.Train.BatchSize || pos.MicroBatchesPerEpoch != perEpoch || pos.Accumulate != t.Config.Train.Accumulate {
		return &checkpoint.Error{Dir: ck.Dir, Kind: checkpoint.ErrMismatch, Detail: fmt.Sprintf(
			"its data position is in micro-batches of %d, %d per epoch, %d per step; this run has %d, %d and %d",
			pos.MicroBatchSize, pos.MicroBatchesPerEpoch, pos.Accumulate, t.Config.Train.BatchSize, perEpoch, t.Config.Train.Accumulate)}
	}
	if err := ck.LoadWeights(t.Net); err != nil {
		return err
	}
	for _, s := range t.Opt.State() {
		tn, _ := ck.optim.Get(stateName(s))
		vals := make([]float32, s.Param.Len())
		if err := tn.Float32(vals); err != nil {
			return err
		}
		backend.UploadFloat32(t.Device.Backend, s.View, vals)
	}
	t.Opt.SetSteps(ck.Manifest.Adam.Step)
	s := ck.Manifest.Scaler
	t.Scaler.Enabled, t.Scaler.Scale, t.Scaler.GrowthTracker, t.Scaler.Skipped = s.Enabled, s.Scale, s.GrowthTracker, s.Skipped
	t.Seek(consumed)
	t.StepsDone = ck.Manifest.Step
	if st := ck.Manifest.Schedule; st != nil {
		t.SchedState = *st
	}
	return nil
}

// saveRequest is what a checkpoint records besides the trainer's state.
type saveRequest struct {
	Step, Epoch int
	Request     Request
	ValMIoU     *float64
	Score       *float64 // the train.monitor score of a validation at Step
	EarlyStop   *EarlyStopState
	History     MetricsHistory
	Version     string
}

// saveCheckpoint writes the trainer's state as a new checkpoint directory in
// parent (atomically; see checkpoint.Save) and returns its path.
func saveCheckpoint(t *train.Trainer, parent string, r saveRequest) (string, error) {
	cfgMap, err := configMap(t.Config)
	if err != nil {
		return "", err
	}
	existing, _ := listCheckpoints(parent)
	serial := 1
	for _, e := range existing {
		serial = max(serial, e.serial+1)
	}
	micro, perEpoch := t.Position()
	epochIdx := micro / perEpoch
	c := t.Config
	fp := t.DataFingerprint
	var sched *optim.ScheduleState
	if t.Schedule.Kind == optim.Plateau {
		st := t.SchedState
		sched = &st
	}
	man := Manifest{
		Format: checkpoint.Format, FormatVersion: checkpoint.FormatVersion, MemunetVersion: r.Version,
		Created: time.Now().UTC().Format(time.RFC3339Nano), Serial: serial, Step: r.Step, Epoch: r.Epoch,
		Position: Position{MicroBatches: micro, MicroBatchSize: c.Train.BatchSize, MicroBatchesPerEpoch: perEpoch,
			EpochIndex: epochIdx, MicroBatchInEpoch: micro % perEpoch, Accumulate: c.Train.Accumulate},
		Request: r.Request,
		RNG: RNGState{ModelSeed: c.Model.Seed, DataSeed: c.Data.Seed, ShuffleSeed: c.Train.Seed, ShuffleEpoch: epochIdx,
			Note: "no hidden generator state: samples are a function of (data_seed, index), each epoch's order and flips of (shuffle_seed, epoch); model_seed only initialized the weights"},
		Scaler: ScalerState{Enabled: t.Scaler.Enabled, Scale: t.Scaler.Scale, GrowthTracker: t.Scaler.GrowthTracker, Skipped: t.Scaler.Skipped,
			GrowthFactor: t.Scaler.GrowthFactor, BackoffFactor: t.Scaler.BackoffFactor, GrowthInterval: t.Scaler.GrowthInterval},
		Adam:    optimizerState(t.Opt),
		ValMIoU: r.ValMIoU, Metrics: r.History, Config: cfgMap, Data: &fp, Schedule: sched, MaskValues: t.MaskValues,
		Score: r.Score, Monitor: t.Config.Train.Monitor, EarlyStop: r.EarlyStop, World: worldOf(t),
		Contents: map[string]string{
			ModelFile:     "state_dict: parameters (fp32 master weights) and BatchNorm running statistics under their PyTorch names, num_batches_tracked as I64",
			OptimizerFile: "optimizer state (fp32): state.<parameter>.exp_avg, .exp_avg_sq (adam, adamw), .momentum_buffer (sgd, rmsprop with momentum), .square_avg (rmsprop)",
		},
	}
	parts := []checkpoint.Part{
		{Name: ModelFile, Write: func(w io.Writer) error {
			return checkpoint.WriteSafetensors(w, StateDict(t.Net), map[string]string{"format": "pt"})
		}},
		{Name: OptimizerFile, Write: func(w io.Writer) error {
			return checkpoint.WriteSafetensors(w, optimizerTensors(t), map[string]string{"format": "pt"})
		}},
	}
	if err := checkpoint.CleanUp(parent); err != nil {
		return "", fmt.Errorf("checkpoints: %w", err)
	}
	name, err := checkpoint.NextName(parent, r.Step)
	if err != nil {
		return "", fmt.Errorf("checkpoints: %w", err)
	}
	return checkpoint.Save(parent, name, parts, func(sums map[string]checkpoint.Sum) ([]byte, error) {
		man.Files = sums
		b, err := json.MarshalIndent(man, "", "  ")
		return append(b, '\n'), err
	})
}

// ckEntry is a checkpoint directory with what its manifest says about it.
type ckEntry struct {
	checkpoint.Entry
	serial  int
	valMIoU *float64
	// scoreValue and monitor: the train.monitor score (newer manifests)
	scoreValue *float64
	monitor    string
	readable   bool // the manifest parsed; the data files are not verified here
}

// listCheckpoints lists parent's checkpoints, the readable ones ordered by
// serial (the order they were written in), then the unreadable ones.
func listCheckpoints(parent string) ([]ckEntry, error) {
	list, err := checkpoint.List(parent)
	if err != nil {
		return nil, err
	}
	out := make([]ckEntry, 0, len(list))
	for _, e := range list {
		ce := ckEntry{Entry: e}
		if b, err := os.ReadFile(filepath.Join(e.Path, checkpoint.ManifestName)); err == nil {
			var m struct {
				Serial  int      `json:"serial"`
				ValMIoU *float64 `json:"val_miou"`
				Score   *float64 `json:"score"`
				Monitor string   `json:"monitor"`
			}
			if json.Unmarshal(b, &m) == nil && m.Serial > 0 {
				ce.serial, ce.valMIoU, ce.readable = m.Serial, m.ValMIoU, true
				ce.scoreValue, ce.monitor = m.Score, m.Monitor
			}
		}
		out = append(out, ce)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].readable != out[j].readable {
			return out[i].readable
		}
		return out[i].serial < out[j].serial
	})
	return out, nil
}

// LatestCheckpoint is the most recently written checkpoint in a checkpoints
// directory ("" when there is none). A directory whose manifest cannot be
// read may be newer: then it refuses and names it.
func LatestCheckpoint(parent string) (string, error) {
	list, err := listCheckpoints(parent)
	if err != nil {
		return "", err
	}
	var newest *ckEntry
	for i := range list {
		if list[i].readable {
			newest = &list[i]
		}
	}
	for _, e := range list {
		if !e.readable && (newest == nil || e.Step >= newest.Step) {
			_, err := checkpoint.Open(e.Path)
			if err == nil {
				err = fmt.Errorf("checkpoint %s: its manifest has no serial number", e.Path)
			}
			other := ""
			if newest != nil {
				other = fmt.Sprintf("; the newest readable one is %s: pass it to --resume to continue from it", newest.Path)
			}
			return "", fmt.Errorf("%w (it may be the newest checkpoint in %s%s)", err, parent, other)
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.Path, nil
}

// ResolveResume turns --resume's argument into a checkpoint directory:
// "auto" is the newest checkpoint in outDir/checkpoints ("" when there is
// none: start from scratch); a path is a checkpoint directory, or a run or
// checkpoints directory whose newest checkpoint is meant.
func ResolveResume(arg, outDir string) (string, error) {
	if arg == "auto" {
		if outDir == "" {
			return "", fmt.Errorf("--resume auto needs the run directory (--out DIR or output.dir) whose %s/ to continue from", CheckpointsDir)
		}
		return LatestCheckpoint(filepath.Join(outDir, CheckpointsDir))
	}
	if _, err := os.Stat(filepath.Join(arg, checkpoint.ManifestName)); err == nil {
		return arg, nil
	}
	for _, parent := range []string{filepath.Join(arg, CheckpointsDir), arg} {
		if list, _ := checkpoint.List(parent); len(list) > 0 {
			return LatestCheckpoint(parent)
		}
	}
	return arg, nil // OpenCheckpoint says what is wrong with it
}

// ResolveBest turns a --checkpoint argument into a checkpoint directory for
// using a model: a checkpoint directory itself, or in a run (or
// checkpoints) directory the one with the best val_miou (the newest when
// none was validated).
func ResolveBest(arg string) (string, error) {
	if _, err := os.Stat(filepath.Join(arg, checkpoint.ManifestName)); err == nil {
		return arg, nil
	}
	for _, parent := range []string{filepath.Join(arg, CheckpointsDir), arg} {
		list, _ := listCheckpoints(parent)
		if best := bestOf(list); best != nil {
			return best.Path, nil
		}
		if len(list) > 0 {
			return LatestCheckpoint(parent)
		}
	}
	return arg, nil // OpenCheckpoint says what is wrong with it
}

// resumableKeys may differ between a checkpoint's configuration and the
// resumed run's: how long to train, when to validate and checkpoint, memory
// and output settings, and gradient checkpointing (bit for bit the same
// gradients). Anything else would change the results.
var resumableKeys = map[string]bool{
	"train.steps": true, "train.epochs": true, "train.val_every": true,
	"train.checkpoint_every": true, "train.keep_last": true, "train.keep_best": true,
	"model.checkpoint": true,
	// the start of a run only: a resumed run has its weights
	"train.init": true, "train.init_skip": true,
}

// resumeConflicts lists the keys (section.key: checkpoint value, run value)
// in which run differs from the checkpoint's configuration and that cannot
// change on resume.
func resumeConflicts(ck, run config.Config) []string {
	fit := run.Memory.Fit == "auto" && ck.Memory.Fit == "auto"
	var out []string
	va, vb := reflect.ValueOf(ck), reflect.ValueOf(run)
	for i := 0; i < va.NumField(); i++ {
		sec := va.Type().Field(i)
		if sec.Name == "Memory" || sec.Name == "Output" || sec.Name == "Device" || sec.Name == "Dist" {
			continue // a run may resume on another device: checkpoints are the same everywhere
		}
		for j := 0; j < va.Field(i).NumField(); j++ {
			key := sec.Tag.Get("yaml") + "." + sec.Type.Field(j).Tag.Get("yaml")
			if resumableKeys[key] {
				continue
			}
			if fit && slices.Contains(config.VariantKeys(), key) {
				continue // memory.fit: auto chose the checkpoint's; Restore adopts it
			}
			if key == "model.checkpoint" && (run.Model.Checkpoint.Auto || ck.Model.Checkpoint.Auto) {
				continue // auto chooses again, the same for the same capacity
			}
			fa, fb := va.Field(i).Field(j).Interface(), vb.Field(i).Field(j).Interface()
			if !reflect.DeepEqual(fa, fb) {
				out = append(out, fmt.Sprintf("%s: checkpoint %s, now %s", key, yamlValue(fa), yamlValue(fb)))
			}
		}
	}
	return out
}

func yamlValue(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " ")
}

// checkResume refuses to resume ck with cfg when they differ in anything but
// resumableKeys; for a different architecture it lists the tensors whose
// shapes differ too.
func checkResume(ck *Checkpoint, cfg config.Config) error {
	conflicts := resumeConflicts(ck.Config, cfg)
	if len(conflicts) == 0 {
		return nil
	}
	arch := false
	for _, c := range conflicts {
		arch = arch || strings.HasPrefix(c, "model.") && !strings.HasPrefix(c, "model.seed")
	}
	if !arch {
		return &checkpoint.Error{Dir: ck.Dir, Kind: checkpoint.ErrMismatch, Detail: fmt.Sprintf(
			"resuming it needs the configuration it was trained with; these keys differ: %s (only %s may change on resume)",
			strings.Join(conflicts, "; "), resumableList())}
	}
	detail := fmt.Sprintf("was trained with a different architecture: %s", strings.Join(conflicts, "; "))
	if mc := cfg.ModelConfig(); mc.Validate() == nil {
		dev := model.NewDevice(noop.New(cpu.New()), memory.Options{}) // shapes only
		if net, err := model.New(dev, mc, cfg.Model.Seed); err == nil {
			if diffs := layoutDiff(specs(ck.model.Tensors), stateSpecs(net)); len(diffs) > 0 {
				detail += fmt.Sprintf("; %d tensors differ: %s", len(diffs), listSome(diffs, 8))
			}
		}
	}
	return &checkpoint.Error{Dir: ck.Dir, Kind: checkpoint.ErrMismatch, Detail: detail}
}

func resumableList() string {
	keys := make([]string, 0, len(resumableKeys)+2)
	for k := range resumableKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(append(keys, "memory.*", "output.*"), ", ")
}

// DataChangedError refuses to resume a checkpoint on a dataset that changed
// since it was written.
type DataChangedError struct {
	Checkpoint string
	Diffs      []string // "field: was, now"
}

func (e *DataChangedError) Error() string {
	return fmt.Sprintf("%s was trained on data that has changed since (%s); resuming would not continue the same run: restore the data, start a new run (a new --out), or resume anyway with --allow-data-change",
		e.Checkpoint, strings.Join(e.Diffs, "; "))
}

// worldOf is the trainer's data-parallel world size for the manifest (0
// for one process, so that one-process checkpoints stay as they were).
func worldOf(t *train.Trainer) int {
	if n := t.Comm().Size(); n > 1 {
		return n
	}
	return 0
}
