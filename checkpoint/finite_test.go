package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/safetensors"
)

// poisoned is ts with value at of the tensor called name set to v (the
// tensors' bytes copied, not changed in place).
func poisoned(t *testing.T, ts []safetensors.Tensor, name string, at int, v float32) []safetensors.Tensor {
	t.Helper()
	out := slices.Clone(ts)
	for i, tn := range out {
		if tn.Name == name {
			out[i].Data = slices.Clone(tn.Data)
			binary.LittleEndian.PutUint32(out[i].Data[4*at:], math.Float32bits(v))
			return out
		}
	}
	t.Fatalf("no tensor %s", name)
	return nil
}

// saveRunTensors writes a run checkpoint of tinyConfig at step with the
// given model and optimizer tensors and returns its directory.
func saveRunTensors(t *testing.T, run string, step int, model, opt []safetensors.Tensor) string {
	t.Helper()
	cm, err := ConfigMap(tinyConfig())
	if err != nil {
		t.Fatal(err)
	}
	write := func(ts []safetensors.Tensor) func(io.Writer) error {
		return func(w io.Writer) error { return safetensors.Write(w, ts, nil) }
	}
	dir, err := Save(filepath.Join(run, runfiles.Checkpoints), runfiles.CheckpointName(step, 1), []Part{{Name: runfiles.Model, Write: write(model)}, {Name: runfiles.Optimizer, Write: write(opt)}},
		func(sums map[string]Sum) ([]byte, error) {
			return json.Marshal(Manifest{Format: Format, FormatVersion: FormatVersion, Serial: step, Step: step, Config: cm, Files: sums})
		})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestNonFiniteWeightsRefused: a NaN or an infinity in a checkpoint's
// weights is refused as soon as it is opened (predict, eval, export,
// train.init of a run), in its optimizer's state when it is opened to
// resume (naming the previous checkpoint that verifies), and in a
// safetensors file for train.init unless train.init_skip leaves that
// tensor out; each error names the file, the tensor and the index.
func TestNonFiniteWeightsRefused(t *testing.T) {
	const weight = "inc.double_conv.0.weight"
	model := StateDict(tinyModel(t))
	var opt []safetensors.Tensor
	for _, tn := range model {
		if tn.DType == safetensors.F32 {
			opt = append(opt, safetensors.F32Tensor("state."+tn.Name+".exp_avg", tn.Shape, make([]float32, tn.Numel())))
		}
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))

	for _, tc := range []struct {
		name       string
		model, opt []safetensors.Tensor
		open       string // Open's refusal ("": opens)
		resume     string // OpenToResume's
	}{
		{"finite", model, opt, "", ""},
		{"NaN weight", poisoned(t, model, weight, 17, nan), opt,
			`model.safetensors: tensor "inc.double_conv.0.weight" holds NaN at index 17: the file is damaged or was trained to divergence; use an earlier checkpoint`, "holds NaN"},
		{"-Inf buffer", poisoned(t, model, "inc.double_conv.1.running_var", 3, float32(math.Inf(-1))), opt,
			`model.safetensors: tensor "inc.double_conv.1.running_var" holds -Inf at index 3`, "-Inf"},
		{"Inf optimizer state", model, poisoned(t, opt, "state."+weight+".exp_avg", 17, inf), "",
			`optimizer.safetensors: tensor "state.inc.double_conv.0.weight.exp_avg" holds +Inf at index 17`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := t.TempDir()
			good := saveRunTensors(t, run, 1, model, opt)
			dir := saveRunTensors(t, run, 2, tc.model, tc.opt)
			_, err := Open(dir)
			if tc.open == "" && err != nil || tc.open != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), tc.open)) {
				t.Errorf("Open: got %v, want %q", err, tc.open)
			}
			_, err = OpenToResume(dir)
			if tc.resume == "" && err != nil || tc.resume != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.resume) ||
				!strings.Contains(err.Error(), "the previous checkpoint "+good+" verifies")) {
				t.Errorf("OpenToResume: got %v, want %q and the way on to %s", err, tc.resume, good)
			}
		})
	}

	// train.init of a safetensors file: only the tensors kept are read and checked.
	path := filepath.Join(t.TempDir(), "init.safetensors")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(f, poisoned(t, model, weight, 17, nan), nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err = ReadWeights(path, nil, nil)
	if want := path + `: tensor "inc.double_conv.0.weight" holds NaN at index 17: the file is damaged or was trained to divergence; fine-tune from another file`; err == nil || err.Error() != want {
		t.Errorf("ReadWeights: got %v, want %s", err, want)
	}
	if _, _, err := ReadWeights(path, func(name string) bool { return !strings.HasPrefix(name, "inc.") }, nil); err != nil {
		t.Errorf("ReadWeights skipping the poisoned tensor: %v", err)
	}
}
