package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/safetensors"
	"go.yaml.in/yaml/v3"
)

// Checkpoint is an opened, verified run checkpoint: its manifest, the
// configuration it was trained with and its two safetensors files, decoded
// (their tensors' data is the Checkpoint's own).
type Checkpoint struct {
	Dir      string
	Manifest Manifest
	// Config is the configuration the checkpoint was trained with.
	Config config.Config
	// Model is runfiles.Model (the state_dict), Optimizer runfiles.Optimizer.
	Model     *safetensors.File
	Optimizer *safetensors.File
}

// Open reads and verifies the run checkpoint in dir (checksums and sizes of
// every file, the manifest, the configuration, the safetensors headers,
// that the model's tensors are those of the configuration's architecture,
// and that its float tensors hold no NaN or infinity).
// Every refusal is an *Error naming the problem.
//
// The manifest and its configuration are read first, and the sizes the
// manifest gives the data files are held to what that configuration's
// model needs (RunFileBounds) before a byte of them is read: a lying
// manifest beside a sparse file of gigabytes costs an error, not memory.
func Open(dir string) (*Checkpoint, error) {
	ck := &Checkpoint{Dir: dir}
	var want []Spec
	o, err := OpenDirWithin(dir, func(man []byte) (map[string]int64, error) {
		if err := json.Unmarshal(man, &ck.Manifest); err != nil {
			return nil, refuse(dir, ErrFormat, "%s: %v", runfiles.Manifest, err)
		}
		var err error
		if ck.Config, err = manifestConfig(dir, ck.Manifest.Config, nil); err != nil {
			return nil, err
		}
		if want, err = ArchSpecs(ck.Config.ModelConfig()); err != nil {
			return nil, refuse(dir, ErrFormat, "%s: its configuration's model: %v", runfiles.Manifest, err)
		}
		return RunFileBounds(want), nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		dst  **safetensors.File
	}{{runfiles.Model, &ck.Model}, {runfiles.Optimizer, &ck.Optimizer}} {
		b, ok := o.Files[f.name]
		if !ok {
			return nil, refuse(dir, ErrMissing, "the manifest lists no %s", f.name)
		}
		if *f.dst, err = safetensors.Parse(b); err != nil {
			return nil, refuse(dir, ErrFormat, "%s: %v", f.name, err)
		}
	}
	// Its tensors must be the model its configuration describes: a model
	// of a manifest edited by hand could not even be allocated.
	if diffs := LayoutDiff(SpecsOf(ck.Model.Tensors), want); len(diffs) > 0 {
		return nil, refuse(dir, ErrMismatch, "%s does not hold the model its manifest's configuration describes (%s): %s",
			runfiles.Model, DescribeArch(ck.Config.ModelConfig()), DescribeDiffs(diffs))
	}
	// A NaN or an infinity among the weights would surface only as a NaN
	// loss at the first step or NaN predictions; one pass names it here.
	if err := ck.Model.CheckFinite(); err != nil {
		return nil, nonFinite(dir, runfiles.Model, err)
	}
	return ck, nil
}

// nonFinite refuses the checkpoint in dir whose file name holds a NaN or
// an infinity (err from CheckFinite names the tensor).
func nonFinite(dir, name string, err error) *Error {
	return refuse(dir, ErrCorrupt, "%s: %v: the file is damaged or was trained to divergence; use an earlier checkpoint", name, err)
}

// RunFileBounds is the most bytes each data file of a run checkpoint of
// the model whose state_dict layout is model may have: runfiles.Model holds
// those tensors, runfiles.Optimizer at most two state tensors (Adam's moments)
// of each float one; each file has room for its 8-byte length, a header
// entry of every tensor (its name and up to headerEntryBytes) and 64 KiB
// of metadata.
func RunFileBounds(model []Spec) map[string]int64 {
	const headerEntryBytes, framing = 256, 8 + 64<<10
	modelBytes, optimizerBytes := int64(framing), int64(framing)
	for _, s := range model {
		numel := int64(1)
		for _, d := range s.Shape {
			numel *= int64(d)
		}
		entry := numel*int64(s.DType.Size()) + int64(len(s.Name)) + headerEntryBytes
		modelBytes += entry
		if s.DType == safetensors.F32 {
			optimizerBytes += 2 * (entry + int64(len("state..exp_avg_sq"))) // state.<name>.exp_avg_sq
		}
	}
	return map[string]int64{runfiles.Model: modelBytes, runfiles.Optimizer: optimizerBytes}
}

// OpenToResume is Open, the optimizer's state held to be finite too (a
// resume's first step would make a NaN of it the weights'), with, when dir
// does not verify, the way on: the previous checkpoint of its run that
// does.
func OpenToResume(dir string) (*Checkpoint, error) {
	ck, err := openToResume(dir)
	if err != nil {
		if prev := previousGood(filepath.Dir(filepath.Clean(dir)), filepath.Clean(dir)); prev != "" {
			err = fmt.Errorf("%w; the previous checkpoint %s verifies: pass --resume %s to continue from it", err, prev, prev)
		}
		return nil, err
	}
	return ck, nil
}

// openToResume is Open and the optimizer's state checked finite: only a
// resume reads it, so predict, eval and export do not pay for the pass.
func openToResume(dir string) (*Checkpoint, error) {
	ck, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if err := ck.Optimizer.CheckFinite(); err != nil {
		return nil, nonFinite(dir, runfiles.Optimizer, err)
	}
	return ck, nil
}

// previousGood is the newest checkpoint in parent other than not that
// verifies for a resume, or "".
func previousGood(parent, not string) string {
	list, err := ListRun(parent)
	if err != nil {
		return ""
	}
	for i := len(list) - 1; i >= 0; i-- {
		if e := list[i]; e.Readable && e.Path != not {
			if _, err := openToResume(e.Path); err == nil {
				return e.Path
			}
		}
	}
	return ""
}

// ReadConfig is the configuration stored in the checkpoint at dir, with
// overrides ("section.key=value") applied and validated, for resuming or
// evaluating without a config file. The checkpoint is verified first.
func ReadConfig(dir string, overrides []string) (config.Config, error) {
	ck, err := OpenToResume(dir)
	if err != nil {
		return config.Config{}, err
	}
	return manifestConfig(dir, ck.Manifest.Config, overrides)
}

// InvocationOf is how hints about the checkpoint at dir name its
// configuration: the run's config.yaml (where the checkpoint is in a run)
// with the --set flags given.
func InvocationOf(dir string, sets []string) config.Invocation {
	inv := config.Invocation{Program: config.InvokedAs(), Sets: sets}
	if run := RunDirOf(dir); run != "" {
		inv.Config = filepath.Join(run, runfiles.Config)
	}
	return inv
}

// ConfigMap is cfg as a JSON-ready map with the keys of config.yaml, as a
// manifest holds it (ReadConfig reads it back).
func ConfigMap(cfg config.Config) (map[string]any, error) {
	src, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(src, &m); err != nil {
		return nil, err
	}
	return stringKeys(m).(map[string]any), nil
}

// stringKeys makes every mapping in v one of string keys, as JSON holds
// them: data.labels' integer mask values become "0", "1", ... (its
// decoder reads them back).
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = stringKeys(e)
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = stringKeys(e)
		}
		return out
	case []any:
		for i, e := range v {
			v[i] = stringKeys(e)
		}
	}
	return v
}

func manifestConfig(dir string, m map[string]any, overrides []string) (config.Config, error) {
	src, err := yaml.Marshal(m)
	if err != nil {
		return config.Config{}, err
	}
	cfg, err := config.Parse(filepath.Join(dir, runfiles.Manifest)+" config", src, overrides)
	if err != nil {
		return config.Config{}, refuse(dir, ErrFormat, "%s", err)
	}
	return cfg, nil
}

// Mismatch refuses a checkpoint whose model tensors do not fit net, naming
// the first tensors that differ and their shapes in both.
func (ck *Checkpoint) Mismatch(net *model.UNet) error {
	diffs := LayoutDiff(SpecsOf(ck.Model.Tensors), ModelSpecs(net))
	if len(diffs) == 0 {
		return nil
	}
	return refuse(ck.Dir, ErrMismatch, "%s does not match the model's architecture (%s): %s",
		runfiles.Model, DescribeArch(net.Config), DescribeDiffs(diffs))
}

// LoadWeights copies the checkpoint's model tensors into net (built with the
// same architecture) after checking that names, types and shapes match.
func (ck *Checkpoint) LoadWeights(net *model.UNet) error {
	if err := ck.Mismatch(net); err != nil {
		return err
	}
	for _, p := range net.Params() {
		tn, _ := ck.Model.Get(p.Name)
		vals := make([]float32, p.Len())
		if err := tn.Float32(vals); err != nil {
			return refuse(ck.Dir, ErrFormat, "%s", err)
		}
		p.Write(vals) // and the working copy, if any, from it
	}
	for _, bn := range net.BatchNorms() {
		tn, _ := ck.Model.Get(bn.CountName())
		v, err := tn.Int64()
		if err != nil {
			return refuse(ck.Dir, ErrFormat, "%s", err)
		}
		bn.NumBatchesTracked = v[0]
	}
	return nil
}

// ReadWeights reads a model's tensors for fine-tuning (train.init): the
// best checkpoint of a run directory, a checkpoint directory (verified), or
// a safetensors file. It returns them and where they came from (the
// checkpoint directory or the file). Only the tensors keep accepts are
// read (nil: all), and check (if not nil) is given their names, types and
// shapes and where they come from first: a safetensors file is read header
// first, so a file whose tensors check refuses (a sparse file declaring
// gigabytes) is refused before any of its data is read. A checkpoint's
// files are bounded by the configuration in its manifest (see Open). A
// float tensor read that holds a NaN or an infinity is refused, naming the
// file and the tensor.
func ReadWeights(path string, keep func(name string) bool, check func(from string, layout []safetensors.Tensor) error) (*safetensors.File, string, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("%s does not exist: name a run directory, a checkpoint directory or a .safetensors file", path)
		}
		return nil, "", err
	}
	kept := func(ts []safetensors.Tensor) []safetensors.Tensor {
		if keep == nil {
			return ts
		}
		var out []safetensors.Tensor
		for _, t := range ts {
			if keep(t.Name) {
				out = append(out, t)
			}
		}
		return out
	}
	if st.IsDir() {
		dir, err := ResolveBest(path)
		if err != nil {
			return nil, "", err
		}
		ck, err := Open(dir)
		if err != nil {
			return nil, "", err
		}
		if check != nil {
			if err := check(dir, kept(ck.Model.Tensors)); err != nil {
				return nil, "", err
			}
		}
		return ck.Model, dir, nil
	}
	r, err := safetensors.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	if check != nil {
		if err := check(path, kept(r.Layout.Tensors)); err != nil {
			return nil, "", err
		}
	}
	f, err := r.Read(keep)
	if err != nil {
		return nil, "", err
	}
	// Only the tensors kept: a head train.init_skip replaces may hold anything.
	if err := f.CheckFinite(); err != nil {
		return nil, "", fmt.Errorf("%s: %v: the file is damaged or was trained to divergence; fine-tune from another file", path, err)
	}
	return f, path, nil
}
