package predict

import (
	"fmt"
	"runtime/debug"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/model"
)

// An ensemble (memunet predict --checkpoint A,B,...: the folds of a
// cross-validation, say) is a Predictor with members: its own checkpoint
// and the others, each a model of its own, all held at once in the
// Predictor's pool on its device (the first model's precision and
// batch). A pass runs the models one after another on the same input,
// each freeing its activations before the next: the pool's peak is every
// model's weights and one model's activations, which the plans' dry runs
// count (dryRun builds every model). Where one model's prediction is the
// device's argmax of its logits, an ensemble's is the argmax of the mean
// of its models' softmax probabilities, equal weights, on the host
// (Probabilities); its outputs (--probs) are that mean:
//
//   - Image files, whole or by tiles, and a 2D model's volume slices:
//     each picture's (each tile's) mean probabilities; tiles blend them
//     as they blend one model's.
//   - A 3D UNet's volume: each window's mean probabilities, blended
//     (Gaussian weights) into the slab's sums as one model's logits are.
//     The weighted sums are linear, so this is the mean of the models'
//     blended probabilities; one model blends logits, whose argmax is
//     that of its blended probabilities only approximately (the softmax
//     and the sum do not commute).
//
// The models must take the same input, prepared alike, and give the same
// classes (memberMismatch), or the mean would mix what cannot be mixed.
// A dataset split is refused: each fold of a cross-validation validates
// on samples the others trained on.

// Member is one checkpoint of an ensemble, as predict.json lists it.
type Member struct {
	Checkpoint string `json:"checkpoint"`
	Step       int    `json:"step"`
	// TrainingValMIoU is the val_miou training recorded at Step.
	TrainingValMIoU *float64 `json:"training_val_miou,omitempty"`
}

// AddMembers makes p an ensemble of its checkpoint and the ones args
// name (each as checkpoint.OpenModel opens a --checkpoint: a checkpoint,
// or a run folder's best, with newest its newest), opened one after
// another: each is refused where it differs from p's in what matters to
// the mean (memberMismatch), else built beside p's model in p's pool and
// given its weights. Each checkpoint's weight and optimizer files are let
// go once its model holds them (p's too): the host holds one at a time.
// out, where not "", is the prediction's folder: it may not be where a
// member's checkpoint or run files are (checkpoint.CheckOutside).
func (p *Predictor) AddMembers(args []string, newest bool, out string) error {
	if ck := p.Checkpoint; ck != nil && len(args) > 0 {
		ck.Model, ck.Optimizer = nil, nil
	}
	for _, arg := range args {
		debug.FreeOSMemory() // the last checkpoint's files, let go, before the next is read
		ck, err := checkpoint.OpenModel(arg, newest)
		if err != nil {
			return fmt.Errorf("predict: --checkpoint: %w", err)
		}
		if out != "" {
			if err := checkpoint.CheckOutside(out, ck.Dir); err != nil {
				return fmt.Errorf("predict: --out %w", err)
			}
		}
		if err := p.addMember(ck.Config, ck); err != nil {
			return err
		}
	}
	return nil
}

// addMember builds a model of cfg in p's pool beside p's, with ck's
// weights (nil: cfg's initialization, or none in a dry run's pool), and
// adds it to p's members.
func (p *Predictor) addMember(cfg config.Config, ck *checkpoint.Checkpoint) error {
	if err := p.memberMismatch(cfg, ck); err != nil {
		return err
	}
	m := &Predictor{Config: cfg, Checkpoint: ck, Device: p.Device, Batch: p.Batch, precision: p.precision, depth: p.depth}
	m.env = &model.Env{Device: p.Device, Precision: p.precision}
	var err error
	if m.Net, err = model.New(p.Device, cfg.ModelConfig(), cfg.Model.Seed); err != nil {
		return err
	}
	if err = m.Net.SetPrecision(p.precision); err == nil && ck != nil {
		err = ck.LoadWeights(m.Net)
	}
	if err != nil {
		m.Close()
		return err
	}
	if ck != nil {
		ck.Model, ck.Optimizer = nil, nil
	}
	p.members = append(p.members, m)
	return nil
}

// models are p's own model and its members', in order.
func (p *Predictor) models() []*Predictor { return append([]*Predictor{p}, p.members...) }

// Ensemble is the number of models p averages: 1 for one checkpoint.
func (p *Predictor) Ensemble() int { return 1 + len(p.members) }

// memberMismatch refuses a member (its configuration, and its checkpoint
// where it has one) that differs from p's in the model's input and
// output, or in how inputs are prepared and classes written, naming both
// checkpoints and the key.
func (p *Predictor) memberMismatch(cfg config.Config, ck *checkpoint.Checkpoint) error {
	a, b := p.Config, cfg
	var av, bv []int
	if p.Checkpoint != nil {
		av = p.Checkpoint.Manifest.MaskValues
	}
	if ck != nil {
		bv = ck.Manifest.MaskValues
	}
	for _, k := range []struct {
		key  string
		x, y any
	}{
		{"model.in_channels", a.Model.InChannels, b.Model.InChannels},
		{"model.classes", a.Model.Classes, b.Model.Classes},
		{"model.dims", max(a.Model.Dims, 2), max(b.Model.Dims, 2)},
		{"model.depth (and model.pool_kernels): the multiples the input's sides must be", a.Model.Reduction(), b.Model.Reduction()},
		{"data.mean", a.Data.Mean, b.Data.Mean},
		{"data.std", a.Data.Std, b.Data.Std},
		{"data.resize", a.Data.Resize, b.Data.Resize},
		{"data.scale", a.Data.Scale, b.Data.Scale},
		{"data.nifti.axis", a.Data.NIfTI.Axis, b.Data.NIfTI.Axis},
		{"data.nifti.window", a.Data.NIfTI.Window, b.Data.NIfTI.Window},
		{"data.nifti.normalize", a.Data.NIfTI.Normalize, b.Data.NIfTI.Normalize},
		{"the masks' values (data.mask_values)", av, bv},
		{"data.labels", a.Data.Labels, b.Data.Labels},
		{"data.background", a.Data.Background, b.Data.Background},
		{"data.class_names", a.Data.ClassNames, b.Data.ClassNames},
	} {
		if x, y := fmt.Sprint(k.x), fmt.Sprint(k.y); x != y {
			return fmt.Errorf("predict: the ensemble's checkpoints %s and %s differ in %s (%s and %s): an ensemble averages models that take the same input, prepared alike, and give the same classes",
				memberName(p.Checkpoint, 1), memberName(ck, len(p.members)+2), k.key, x, y)
		}
	}
	return nil
}

// memberName is a member's checkpoint folder, or its place.
func memberName(ck *checkpoint.Checkpoint, i int) string {
	if ck == nil {
		return fmt.Sprintf("#%d", i)
	}
	return ck.Dir
}

// members are p's checkpoints as predict.json lists them; nil for one.
func (p *Predictor) memberList() []Member {
	if len(p.members) == 0 {
		return nil
	}
	var list []Member
	for _, m := range p.models() {
		if ck := m.Checkpoint; ck != nil {
			list = append(list, Member{Checkpoint: ck.Dir, Step: ck.Manifest.Step, TrainingValMIoU: ck.Manifest.ValMIoU})
		}
	}
	return list
}

// meanInto adds each of xs to sum, then divides by n where n > 1 is the
// last: an ensemble's mean, member by member in order, in float32.
func meanInto(sum, xs []float32, last bool, n int) {
	for i, x := range xs {
		sum[i] += x
	}
	if last && n > 1 {
		for i := range sum {
			sum[i] /= float32(n)
		}
	}
}

// DefaultOutput is where a prediction of input by the checkpoint in
// ckDir, at step, goes without --out (OutputDir in its run directory);
// an error saying to give --out where there is none to choose: a
// checkpoint outside a run's checkpoints/, or an ensemble of members
// checkpoints (which have no one run directory).
func DefaultOutput(ckDir, input string, step, members int) (string, error) {
	if members > 1 {
		return "", fmt.Errorf("predict: an ensemble of %d checkpoints has no one run directory to predict into; name the output with --out", members)
	}
	run := checkpoint.RunDirOf(ckDir)
	if run == "" {
		return "", fmt.Errorf("predict: %s is not in a run directory's checkpoints/; name the output with --out", ckDir)
	}
	return OutputDir(run, input, step), nil
}
