package data

import (
	"fmt"
	"math"
)

// LabelMap is a mask file's raw values (x fastest, then y, then z), its
// dims (x, y, z; z 1 for an image) and its voxels' size (1 where the file
// tells none): what eval of a folder of predictions compares.
type LabelMap struct {
	Values  []uint16
	Dims    [3]int
	Spacing [3]float64
}

// ReadLabels reads a mask file by value: a NIfTI volume (.nii, .nii.gz:
// whole-number labels, its pixdim as the spacing) or a mask image (PNG,
// GIF, TIFF: palette indices or gray levels, as data.source folder reads
// masks).
func ReadLabels(path string) (LabelMap, error) {
	if IsNIfTIName(path) {
		v, err := ReadVolume(path, MaxDecodeBytes)
		if err != nil {
			return LabelMap{}, err
		}
		lm := LabelMap{Values: make([]uint16, v.Len()), Dims: v.Dims}
		for k := range lm.Values {
			raw, ok := MaskLabel(v.At(k))
			if !ok {
				return LabelMap{}, fmt.Errorf("%s: voxel %d holds %g, not a label (a whole number from 0 to %d)", path, k, v.At(k), MaxMaskValue)
			}
			lm.Values[k] = raw
		}
		size, _ := v.Spacing()
		for a, s := range size {
			if !(s > 0) || math.IsInf(s, 0) {
				size[a] = 1
			}
		}
		lm.Spacing = size
		return lm, nil
	}
	m, err := decodeMaskFile(path, MaxImagePixels)
	if err != nil {
		return LabelMap{}, err
	}
	lm := LabelMap{Values: make([]uint16, m.w*m.h), Dims: [3]int{m.w, m.h, 1}, Spacing: [3]float64{1, 1, 1}}
	for y := range m.h {
		if err := rawRow(path, m.img, y, lm.Values[y*m.w:(y+1)*m.w]); err != nil {
			return LabelMap{}, err
		}
	}
	return lm, nil
}
