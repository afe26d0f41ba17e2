package rundir

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/safetensors"
	"github.com/memunet/memunet/train"
)

// LoadInit starts a new run from train.init's weights (fine-tuning): every
// parameter and BatchNorm buffer and count of the model, by its PyTorch
// state_dict name, except those under train.init_skip's prefixes, which
// keep their initialization (a new head). train.init is a run directory
// (its best checkpoint), a checkpoint directory, or a safetensors file
// (memunet export's, any dtype, or one PyTorch wrote with the same names).
// Names or shapes that do not match are an error listing them, and a NaN
// or an infinity among the values read an error naming the file and the
// tensor (checkpoint.ReadWeights), before any step. It returns
// the line saying what was loaded ("" without train.init).
func LoadInit(tr *train.Trainer) (string, error) {
	cfg := tr.Config.Train
	if cfg.Init == "" {
		return "", nil
	}
	skip := func(name string) bool {
		return slices.ContainsFunc(cfg.InitSkip, func(pre string) bool { return strings.HasPrefix(name, pre) })
	}
	var want []checkpoint.Spec
	skipped := 0
	for _, s := range checkpoint.ModelSpecs(tr.Net) {
		if skip(s.Name) {
			skipped++
			continue
		}
		want = append(want, s)
	}
	// The layout is held to the model's before any data is read: a file
	// declaring other tensors (a sparse file of gigabytes) costs its header.
	match := func(from string, layout []safetensors.Tensor) error {
		got := make([]checkpoint.Spec, len(layout))
		for i, t := range layout {
			got[i] = checkpoint.Spec{Name: t.Name, DType: t.DType, Shape: t.Shape}
			if t.DType == safetensors.F16 || t.DType == safetensors.BF16 {
				got[i].DType = safetensors.F32 // read widened
			}
		}
		if diffs := checkpoint.LayoutDiff(got, want); len(diffs) > 0 {
			return fmt.Errorf("%s does not match the model (%s): %s; train.init_skip (e.g. [outc]) leaves tensors at their initialization",
				from, checkpoint.DescribeArch(tr.Net.Config), checkpoint.DescribeDiffs(diffs))
		}
		return nil
	}
	file, from, err := checkpoint.ReadWeights(cfg.Init, func(name string) bool { return !skip(name) }, match)
	if err != nil {
		return "", fmt.Errorf("train.init: %w", err)
	}
	loaded := 0
	for _, p := range tr.Net.Params() {
		if skip(p.Name) {
			continue
		}
		t, _ := file.Get(p.Name)
		vals, err := widen(t, p.Len())
		if err != nil {
			return "", fmt.Errorf("train.init: %s: %w", from, err)
		}
		p.Write(vals)
		loaded++
	}
	for _, bn := range tr.Net.BatchNorms() {
		if skip(bn.CountName()) {
			continue
		}
		t, _ := file.Get(bn.CountName())
		v, err := t.Int64()
		if err != nil {
			return "", fmt.Errorf("train.init: %s: %w", from, err)
		}
		bn.NumBatchesTracked = v[0]
		loaded++
	}
	note := fmt.Sprintf("train.init: %d tensors from %s", loaded, from)
	if skipped > 0 {
		note += fmt.Sprintf("; %d left at their initialization (train.init_skip %v)", skipped, cfg.InitSkip)
	}
	return note, nil
}

// widen reads a float tensor of n values as float32, from F32, F16 or BF16.
func widen(t safetensors.Tensor, n int) ([]float32, error) {
	vals := make([]float32, n)
	switch t.DType {
	case safetensors.F32:
		return vals, t.Float32(vals)
	case safetensors.F16, safetensors.BF16:
		if len(t.Data) != 2*n {
			return nil, fmt.Errorf("tensor %s has %d values, want %d", t.Name, len(t.Data)/2, n)
		}
		for i := range vals {
			h := binary.LittleEndian.Uint16(t.Data[2*i:])
			if t.DType == safetensors.F16 {
				vals[i] = backend.F16ToF32(h)
			} else {
				vals[i] = backend.BF16ToF32(h)
			}
		}
		return vals, nil
	}
	return nil, fmt.Errorf("tensor %s is %s, want a float type", t.Name, t.DType)
}
