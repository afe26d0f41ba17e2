package predict

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/memunet/memunet/data"
)

// A checkpoint trained on data.source nifti with model.in_channels C > 1
// read nnU-Net's cases: CASE_0000.nii.gz .. CASE_{C-1}.nii.gz, one file
// a modality, each its channel. Predict reads a case so too: an input
// file CASE_000k (any of its modalities) stands for its case, whose
// files are CASE_0000 .. CASE_{C-1} beside it (.nii or .nii.gz each); a
// folder gives each case once. The case's mask is CASE.nii[.gz], with
// channel 0's header geometry. A missing modality, one past the C the
// model takes, two files of one modality, a file not so named, and
// modalities of other dims are refused, naming the file, before anything
// is written.

// caseModalities is the modalities a case has for the checkpoint: C
// where it was trained on cases of C > 1 modalities (data.source nifti),
// else 0 (a volume is one file, a gray volume feeding every channel).
func (p *Predictor) caseModalities() int {
	if c := p.Config.Model.InChannels; c > 1 && p.Config.Data.Source == data.SourceNIfTI {
		return c
	}
	return 0
}

// modalityFiles indexes a folder's NIfTI files named as modalities: case
// -> channel -> the files (two where CASE_0001.nii and .nii.gz are both
// there).
type modalityFiles map[string]map[int][]string

// indexModalities lists dir's modality files.
func indexModalities(dir string) (modalityFiles, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("predict: --input: %w", err)
	}
	idx := modalityFiles{}
	for _, de := range des {
		if de.IsDir() || !isVolume(de.Name()) {
			continue
		}
		c, k, ok := data.ModalityOf(volumeStem(de.Name()))
		if !ok {
			continue
		}
		if idx[c] == nil {
			idx[c] = map[int][]string{}
		}
		idx[c][k] = append(idx[c][k], filepath.Join(dir, de.Name()))
	}
	return idx, nil
}

// channels are case's c files in channel order, from idx of the folder
// dir; from is the input that named the case, for the errors.
func (idx modalityFiles) channels(dir, name, from string, c int) ([]string, error) {
	fix := fmt.Sprintf("the model takes %d modalities a case (model.in_channels), %s_0000 .. %s_%04d (.nii or .nii.gz) in one folder", c, name, name, c-1)
	mods := idx[name]
	out := make([]string, c)
	for k := range c {
		switch files := mods[k]; len(files) {
		case 0:
			return nil, fmt.Errorf("predict: %s: its case %s has no %s: %s; add it", from, name, filepath.Join(dir, fmt.Sprintf("%s_%04d.nii.gz", name, k)), fix)
		case 1:
			out[k] = files[0]
		default:
			return nil, fmt.Errorf("predict: %s and %s are both modality %d of case %s; keep one", files[0], files[1], k, name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(mods)) {
		if k >= c {
			return nil, fmt.Errorf("predict: %s: case %s has %d modalities and %s_0000 .. %s_%04d are the model's %d (model.in_channels); move %s out of the folder, or predict with a checkpoint trained on its modalities",
				mods[k][0], name, len(mods), name, name, c-1, c, filepath.Base(mods[k][0]))
		}
	}
	for _, f := range out {
		if err := checkInputFile(f); err != nil {
			return nil, err
		}
	}
	if err := sameDims(name, out); err != nil {
		return nil, err
	}
	return out, nil
}

// sameDims refuses a case whose modalities differ in dims, from their
// headers.
func sameDims(name string, files []string) error {
	var first [3]int
	for i, f := range files {
		s, err := data.OpenVolumeStream(f)
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		d := s.Volume.Dims
		s.Close()
		if i == 0 {
			first = d
			continue
		}
		if d != first {
			return fmt.Errorf("predict: case %s: %s is %dx%dx%d voxels but %s is %dx%dx%d; a case's modalities must have one size",
				name, f, d[0], d[1], d[2], files[0], first[0], first[1], first[2])
		}
	}
	return nil
}

// modalityCases makes files (inputFiles' list of input) a list of cases
// for a checkpoint of c modalities a case: each NIfTI file's case once,
// in order, as its channel 0 file, with cases mapping that file to the
// case's name and files. Other files are kept as they are.
func modalityCases(files []string, c int) (out []string, cases map[string]modalityCase, err error) {
	cases = map[string]modalityCase{}
	indexes := map[string]modalityFiles{}
	seen := map[string]bool{}
	for _, f := range files {
		if !isVolume(f) {
			out = append(out, f)
			continue
		}
		name, _, ok := data.ModalityOf(volumeStem(f))
		if !ok {
			return nil, nil, fmt.Errorf("predict: %s: the model takes %d modalities a case (model.in_channels), read from files named CASE_0000.nii.gz .. CASE_%04d.nii.gz beside each other (nnU-Net's naming); name its case's files so",
				f, c, c-1)
		}
		dir := filepath.Dir(f)
		key := filepath.Join(dir, name)
		if seen[key] {
			continue
		}
		seen[key] = true
		idx, ok := indexes[dir]
		if !ok {
			if idx, err = indexModalities(dir); err != nil {
				return nil, nil, err
			}
			indexes[dir] = idx
		}
		ch, err := idx.channels(dir, name, f, c)
		if err != nil {
			return nil, nil, err
		}
		cases[ch[0]] = modalityCase{name: name, files: ch}
		out = append(out, ch[0])
	}
	return out, cases, nil
}

// modalityCase is a case of several modalities: its name and its files
// in channel order.
type modalityCase struct {
	name  string
	files []string
}
