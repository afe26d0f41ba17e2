package data

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
	for ds != nil {
		if v, ok := ds.(Volumes); ok {
			return v.Depth()
		}
		w, ok := ds.(wrapper)
		if !ok {
			break
		}
		ds = w.inner()
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
