package data

import "fmt"

// Volumes is implemented by a set whose samples are volumes (model.dims
// 3). A volume of D slices of h x w is held as its slices stacked: Size
// reports (D*h, w), a sample's image is C planes of D*h rows and its mask
// D*h rows, so every per-sample buffer, row and flip of images holds for
// volumes too; Depth says how to fold the rows back into slices.
type Volumes interface {
	// Depth is D, the slices of every sample; 1 for images.
	Depth() int
}

// DepthOf is ds's Depth, or that of the set it wraps; 1 for images.
func DepthOf(ds Dataset) int {
	if v, ok := outermost[Volumes](ds); ok {
		return v.Depth()
	}
	return 1
}

// SampleShape is the (D, H, W) of ds's samples: D 1 for images, H a
// slice's height.
func SampleShape(ds Dataset) (d, h, w int) {
	d = DepthOf(ds)
	h, w = ds.Size()
	return d, h / d, w
}

// Case is the case a sample belongs to, as nnU-Net scores cases: a
// volume of which the sample is slice Z of Depth (a 2D nifti slice), or
// the whole case (Depth 1: an image, or a volume sample); Spacing is its
// voxels' size (x, y, z as the sample lies: columns, rows, slices), 1
// where the source tells none.
type Case struct {
	Name     string
	Z, Depth int
	Spacing  [3]float64
}

// caser is a dataset that knows its samples' cases.
type caser interface {
	caseOf(i int) Case
}

// CaseOf is sample i's case: its volume for nifti slices, else the sample
// itself, named as SampleName names it ("sample N" where it has no name).
func CaseOf(ds Dataset, i int) Case {
	if c, ok := outermost[caser](ds); ok {
		return c.caseOf(i)
	}
	name := SampleName(ds, i)
	if name == "" {
		name = fmt.Sprintf("sample %d", i)
	}
	return Case{Name: name, Depth: 1, Spacing: [3]float64{1, 1, 1}}
}
