package checkpoint

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/safetensors"
)

// StateDict lists the model's tensors in PyTorch state_dict order: the
// parameters and buffers as float32 (downloaded: host copies), and after each
// BatchNorm's running_var its num_batches_tracked as an int64 scalar.
func StateDict(net *model.UNet) []safetensors.Tensor {
	var out []safetensors.Tensor
	for _, s := range StateDictSources(net) {
		b := make([]byte, safetensors.Tensor{Shape: s.Shape}.Numel()*s.DType.Size())
		_ = s.Fill(b) // downloads: no error
		out = append(out, safetensors.Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape, Data: b})
	}
	return out
}

// StateDictSources is StateDict as sources for safetensors.WriteFrom:
// each tensor is downloaded as it is written, so a checkpoint holds one
// tensor's bytes at a time rather than the model's.
func StateDictSources(net *model.UNet) []safetensors.Source {
	counts := map[string]*model.BatchNorm2d{}
	for _, bn := range net.BatchNorms() {
		counts[bn.RunningVar.Name] = bn
	}
	var out []safetensors.Source
	for _, p := range net.Params() {
		out = append(out, safetensors.Source{Name: p.Name, DType: safetensors.F32, Shape: slices.Clone(p.Shape), Fill: safetensors.F32Fill(p.ReadInto)})
		if bn, ok := counts[p.Name]; ok {
			out = append(out, safetensors.Source{Name: bn.CountName(), DType: safetensors.I64, Shape: []int{}, Fill: func(dst []byte) error {
				binary.LittleEndian.PutUint64(dst, uint64(bn.NumBatchesTracked))
				return nil
			}})
		}
	}
	return out
}

// ModelSpecs is the layout of StateDict(net), without copying values.
func ModelSpecs(net *model.UNet) []Spec {
	var out []Spec
	for _, s := range StateDictSources(net) {
		out = append(out, Spec{s.Name, s.DType, s.Shape})
	}
	return out
}

// Spec is a tensor's name, type and shape, for comparing layouts.
type Spec struct {
	Name  string
	DType safetensors.DType
	Shape []int
}

// ArchSpecs is the state_dict layout of the architecture mc, from a model
// built on a planning device (no memory behind it, no weights), so that a
// checkpoint can be held to any configuration, however large, before a
// model of it is allocated.
func ArchSpecs(mc model.Config) ([]Spec, error) {
	net, err := model.New(model.NewDevice(noop.New(cpu.New()), memory.Options{}), mc, 0)
	if err != nil {
		return nil, err
	}
	defer net.Free()
	return ModelSpecs(net), nil
}

// SpecsOf is the layout of tensors.
func SpecsOf(ts []safetensors.Tensor) []Spec {
	out := make([]Spec, len(ts))
	for i, t := range ts {
		out[i] = Spec{t.Name, t.DType, t.Shape}
	}
	return out
}

// LayoutDiff lists how the tensors of a file (got) differ from those the
// model expects (want): names only in one of them, and other shapes or types.
func LayoutDiff(got, want []Spec) []string {
	wantBy := map[string]Spec{}
	for _, s := range want {
		wantBy[s.Name] = s
	}
	gotBy := map[string]bool{}
	var diffs []string
	for _, g := range got {
		gotBy[g.Name] = true
		w, ok := wantBy[g.Name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s %v only in the checkpoint", g.Name, g.Shape))
		case g.DType != w.DType:
			diffs = append(diffs, fmt.Sprintf("%s: checkpoint %s, model %s", g.Name, g.DType, w.DType))
		case !slices.Equal(g.Shape, w.Shape):
			diffs = append(diffs, fmt.Sprintf("%s: checkpoint %v, model %v", g.Name, g.Shape, w.Shape))
		}
	}
	for _, w := range want {
		if !gotBy[w.Name] {
			diffs = append(diffs, fmt.Sprintf("%s %v only in the model", w.Name, w.Shape))
		}
	}
	return diffs
}

// DescribeDiffs is "N tensors differ: " and the first 8 of LayoutDiff's
// lines, the first mismatching tensor first.
func DescribeDiffs(diffs []string) string {
	const shown = 8
	s := fmt.Sprintf("%d tensors differ: ", len(diffs))
	if len(diffs) <= shown {
		return s + strings.Join(diffs, "; ")
	}
	return s + strings.Join(diffs[:shown], "; ") + fmt.Sprintf("; and %d more", len(diffs)-shown)
}

// DescribeArch names the architecture's keys, for a mismatch message.
func DescribeArch(c model.Config) string {
	return fmt.Sprintf("in_channels %d, classes %d, base %d, depth %d, up %s, norm %s", c.InChannels, c.Classes, c.Base, c.Depth, c.Up, c.Norm)
}
