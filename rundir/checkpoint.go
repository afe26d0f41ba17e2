package rundir

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/optim"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/safetensors"
	"github.com/memunet/memunet/train"
	"go.yaml.in/yaml/v3"
)

// optimizerState is the optimizer's step and settings for the manifest.
func optimizerState(o optim.Optimizer) checkpoint.AdamState {
	c := o.Config()
	st := checkpoint.AdamState{Step: o.Steps(), LR: c.LR, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Kind: string(c.Kind)}
	if c.Kind == optim.KindSGD || c.Kind == optim.KindRMSprop {
		st.Beta1, st.Beta2 = 0, 0
		st.Momentum, st.Dampening, st.Nesterov = c.Momentum, c.Dampening, c.Nesterov
	}
	if c.Kind == optim.KindRMSprop {
		st.Alpha = c.Alpha
	}
	return st
}

// stateName is an optimizer state tensor's name in optimizer.safetensors:
// state.<parameter>.<exp_avg, momentum_buffer, ...>, as PyTorch's
// optimizer state_dict calls it.
func stateName(s optim.StateTensor) string { return "state." + s.Param.Name + "." + s.Name }

func optimizerSpecs(t *train.Trainer) []checkpoint.Spec {
	var out []checkpoint.Spec
	for _, s := range t.Opt.State() {
		out = append(out, checkpoint.Spec{Name: stateName(s), DType: safetensors.F32, Shape: s.Param.Shape})
	}
	return out
}

// optimizerSources is the optimizer's state as sources for
// safetensors.WriteFrom, each tensor downloaded as it is written.
func optimizerSources(t *train.Trainer) []safetensors.Source {
	var out []safetensors.Source
	for _, s := range t.Opt.State() {
		out = append(out, safetensors.Source{Name: stateName(s), DType: safetensors.F32, Shape: s.Param.Shape, Fill: safetensors.F32Fill(func(dst []float32) {
			backend.DownloadFloat32Into(t.Device.Backend, dst, s.View)
		})})
	}
	return out
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
func Restore(t *train.Trainer, ck *checkpoint.Checkpoint, dataChanged bool) error {
	if fp := ck.Manifest.Data; fp != nil && !dataChanged {
		if diffs := fp.Diff(t.DataFingerprint); len(diffs) > 0 {
			return &DataChangedError{Checkpoint: ck.Dir, Diffs: diffs}
		}
	}
	if err := ck.Mismatch(t.Net); err != nil {
		return err
	}
	if diffs := checkpoint.LayoutDiff(checkpoint.SpecsOf(ck.Optimizer.Tensors), optimizerSpecs(t)); len(diffs) > 0 {
		return &checkpoint.Error{Dir: ck.Dir, Kind: checkpoint.ErrMismatch, Detail: fmt.Sprintf(
			"%s does not match the model's parameters: %s", runfiles.Optimizer, checkpoint.DescribeDiffs(diffs))}
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
		tn, _ := ck.Optimizer.Get(stateName(s))
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
	Request     checkpoint.Request
	ValMIoU     *float64
	Score       *float64 // the train.monitor score of a validation at Step
	EarlyStop   *checkpoint.EarlyStopState
	History     checkpoint.MetricsHistory
	Version     string
	WallSeconds float64 // the run's, across its parts, up to Step
}

// saveCheckpoint writes the trainer's state as a new checkpoint directory in
// parent (atomically; see checkpoint.Save) and returns its path.
func saveCheckpoint(t *train.Trainer, parent string, r saveRequest) (string, error) {
	cfgMap, err := checkpoint.ConfigMap(t.Config)
	if err != nil {
		return "", err
	}
	existing, _ := checkpoint.ListRun(parent)
	serial := 1
	for _, e := range existing {
		serial = max(serial, e.Serial+1)
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
	man := checkpoint.Manifest{
		Format: checkpoint.Format, FormatVersion: checkpoint.FormatVersion, MemunetVersion: r.Version,
		Created: time.Now().UTC().Format(time.RFC3339Nano), Serial: serial, Step: r.Step, Epoch: r.Epoch,
		Position: checkpoint.Position{MicroBatches: micro, MicroBatchSize: c.Train.BatchSize, MicroBatchesPerEpoch: perEpoch,
			EpochIndex: epochIdx, MicroBatchInEpoch: micro % perEpoch, Accumulate: c.Train.Accumulate},
		Request: r.Request,
		RNG: checkpoint.RNGState{ModelSeed: c.Model.Seed, DataSeed: c.Data.Seed, ShuffleSeed: c.Train.Seed, ShuffleEpoch: epochIdx,
			Note: "no hidden generator state: samples are a function of (data_seed, index), each epoch's order and flips of (shuffle_seed, epoch); model_seed only initialized the weights"},
		Scaler: checkpoint.ScalerState{Enabled: t.Scaler.Enabled, Scale: t.Scaler.Scale, GrowthTracker: t.Scaler.GrowthTracker, Skipped: t.Scaler.Skipped,
			GrowthFactor: t.Scaler.GrowthFactor, BackoffFactor: t.Scaler.BackoffFactor, GrowthInterval: t.Scaler.GrowthInterval},
		Adam:    optimizerState(t.Opt),
		ValMIoU: r.ValMIoU, Metrics: r.History, Config: cfgMap, Data: &fp, Schedule: sched, MaskValues: t.MaskValues,
		Score: r.Score, Monitor: t.Config.Train.Monitor, EarlyStop: r.EarlyStop, World: worldOf(t), WallSeconds: r.WallSeconds,
		Contents: map[string]string{
			runfiles.Model:     "state_dict: parameters (fp32 master weights) and BatchNorm running statistics under their PyTorch names, num_batches_tracked as I64",
			runfiles.Optimizer: "optimizer state (fp32): state.<parameter>.exp_avg, .exp_avg_sq (adam, adamw), .momentum_buffer (sgd, rmsprop with momentum), .square_avg (rmsprop)",
		},
	}
	// Each part's tensors are downloaded from the device as they are
	// written, one at a time: a device error (a GPU fault) fails the save
	// before anything is committed.
	parts := []checkpoint.Part{
		{Name: runfiles.Model, Write: func(w io.Writer) error {
			return writeDownloaded(t, w, checkpoint.StateDictSources(t.Net))
		}},
		{Name: runfiles.Optimizer, Write: func(w io.Writer) error {
			return writeDownloaded(t, w, optimizerSources(t))
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

// writeDownloaded writes tensors downloaded from t's device as they are
// written, and fails unless the device then says they were good (the
// save commits nothing of a part that fails).
func writeDownloaded(t *train.Trainer, w io.Writer, sources []safetensors.Source) error {
	if err := t.Device.Backend.Sync(); err != nil {
		return err
	}
	if err := safetensors.WriteFrom(w, sources, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	return t.Device.Backend.Sync()
}

// resumableKeys may differ between a checkpoint's configuration and the
// resumed run's: how long to train, when to validate and checkpoint, memory
// and output settings, gradient checkpointing (bit for bit the same
// gradients) and the classes' names. Anything else would change the
// results.
var resumableKeys = map[string]bool{
	"train.steps": true, "train.epochs": true, "train.val_every": true,
	"train.checkpoint_every": true, "train.keep_last": true, "train.keep_best": true,
	"model.checkpoint": true,
	// names only: legends, tables and exports
	"data.class_names": true,
	// the start of a run only: a resumed run has its weights
	"train.init": true, "train.init_skip": true,
}

// resumeConflicts lists the keys (section.key: checkpoint value, run value)
// in which run differs from the checkpoint's configuration and that cannot
// change on resume.
func resumeConflicts(ck, run config.Config) []string {
	fit := run.Memory.Fit == "auto" && ck.Memory.Fit == "auto"
	var out []string
	for _, section := range run.Sections() {
		if slices.Contains([]string{"memory", "output", "device", "dist", "cuda"}, section) {
			continue // a run may resume on another device: checkpoints are the same everywhere
		}
		now := run.Settings(section)
		for i, was := range ck.Settings(section) {
			key := was.Key
			if resumableKeys[key] {
				continue
			}
			if fit && slices.Contains(config.VariantKeys(), key) {
				continue // memory.fit: auto chose the checkpoint's; Restore adopts it
			}
			if key == "model.checkpoint" && (run.Model.Checkpoint.Auto || ck.Model.Checkpoint.Auto) {
				continue // auto chooses again, the same for the same capacity
			}
			if fa, fb := was.Value, now[i].Value; !reflect.DeepEqual(fa, fb) {
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
func checkResume(ck *checkpoint.Checkpoint, cfg config.Config) error {
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
	if want, err := checkpoint.ArchSpecs(cfg.ModelConfig()); err == nil {
		// The keys say why; one tensor shows what it does to the weights.
		if diffs := checkpoint.LayoutDiff(checkpoint.SpecsOf(ck.Model.Tensors), want); len(diffs) > 0 {
			detail += fmt.Sprintf("; %d tensors differ, e.g. %s", len(diffs), diffs[0])
		}
	}
	detail += ": resume it with its own model settings (its config.yaml's), or train the new model into another --out DIR"
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
