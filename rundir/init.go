package rundir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/train"
)

// LoadInit starts a new run from train.init's weights (fine-tuning): every
// parameter and BatchNorm buffer and count of the model, by its PyTorch
// state_dict name, except those under train.init_skip's prefixes, which
// keep their initialization (a new head). train.init is a run directory
// (its best checkpoint), a checkpoint directory, or a safetensors file
// (memunet export's, any dtype, or one PyTorch wrote with the same names).
// Names or shapes that do not match are an error listing them. It returns
// the line saying what was loaded ("" without train.init).
func LoadInit(tr *train.Trainer) (string, error) {
	cfg := tr.Config.Train
	if cfg.Init == "" {
		return "", nil
	}
	file, from, err := initWeights(cfg.Init)
	if err != nil {
		return "", err
	}
	skip := func(name string) bool {
		return slices.ContainsFunc(cfg.InitSkip, func(pre string) bool { return strings.HasPrefix(name, pre) })
	}
	var got, want []tensorSpec
	for _, t := range file.Tensors {
		if skip(t.Name) {
			continue
		}
		s := tensorSpec{t.Name, t.DType, t.Shape}
		if t.DType == checkpoint.F16 || t.DType == checkpoint.BF16 {
			s.dtype = checkpoint.F32 // read widened
		}
		got = append(got, s)
	}
	skipped := 0
	for _, s := range stateSpecs(tr.Net) {
		if skip(s.name) {
			skipped++
			continue
		}
		want = append(want, s)
	}
	if diffs := layoutDiff(got, want); len(diffs) > 0 {
		return "", fmt.Errorf("train.init: %s does not match the model (%s): %d tensors differ: %s; train.init_skip (e.g. [outc]) leaves tensors at their initialization",
			from, describeArch(tr.Net.Config), len(diffs), listSome(diffs, 8))
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

// initWeights reads train.init: a run or checkpoint directory's model
// tensors (verified), or a safetensors file.
func initWeights(path string) (*checkpoint.File, string, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("train.init: %s does not exist: name a run directory, a checkpoint directory or a .safetensors file", path)
		}
		return nil, "", fmt.Errorf("train.init: %w", err)
	}
	if st.IsDir() {
		dir, err := ResolveBest(path)
		if err != nil {
			return nil, "", fmt.Errorf("train.init: %w", err)
		}
		ck, err := OpenCheckpoint(dir)
		if err != nil {
			return nil, "", fmt.Errorf("train.init: %w", err)
		}
		return ck.model, dir, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("train.init: %w", err)
	}
	f, err := checkpoint.ReadSafetensors(b)
	if err != nil {
		return nil, "", fmt.Errorf("train.init: %s: %w", path, err)
	}
	return f, path, nil
}

// widen reads a float tensor of n values as float32, from F32, F16 or BF16.
func widen(t checkpoint.Tensor, n int) ([]float32, error) {
	vals := make([]float32, n)
	switch t.DType {
	case checkpoint.F32:
		return vals, t.Float32(vals)
	case checkpoint.F16, checkpoint.BF16:
		if len(t.Data) != 2*n {
			return nil, fmt.Errorf("tensor %s has %d values, want %d", t.Name, len(t.Data)/2, n)
		}
		for i := range vals {
			h := binary.LittleEndian.Uint16(t.Data[2*i:])
			if t.DType == checkpoint.F16 {
				vals[i] = backend.F16ToF32(h)
			} else {
				vals[i] = backend.BF16ToF32(h)
			}
		}
		return vals, nil
	}
	return nil, fmt.Errorf("tensor %s is %s, want a float type", t.Name, t.DType)
}
