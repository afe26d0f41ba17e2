package data

import "fmt"

// Normalization applied to every image this package yields: a raw intensity
// v in [0, 1] becomes (v-Mean)/Std.
const (
	Mean = 0.5
	Std  = 0.25
)

// Ignore is the mask value for pixels that carry no label; losses and
// metrics skip them.
const Ignore uint8 = 255

// Dataset is a fixed, indexable set of (image, mask) pairs, all of one size.
type Dataset interface {
	// Len is the number of samples; valid indices are 0..Len()-1.
	Len() int
	// Channels is C, the number of image channels.
	Channels() int
	// Classes is the number of classes, background (0) included. Mask values
	// are below Classes() or equal to Ignore.
	Classes() int
	// Size is the height and width of every image and mask.
	Size() (h, w int)
	// Sample fills image (C*H*W, planar, normalized; see the package doc)
	// and mask (H*W) with sample i. It is deterministic and safe for
	// concurrent use; it returns an error if i is out of range or a slice
	// has the wrong length.
	Sample(i int, image []float32, mask []uint8) error
}

// Denormalize maps a normalized image value back to a raw intensity in
// [0, 1], clamped.
func Denormalize(v float32) float32 {
	r := v*Std + Mean
	switch {
	case r < 0 || r != r:
		return 0
	case r > 1:
		return 1
	}
	return r
}

// Named is implemented by datasets whose samples have names: the stem of
// the image file (folder sources) or the list id (voc). Name(i) is "" when
// sample i has none.
type Named interface {
	Name(i int) string
}

// SplitNames is the samples that train and those that validate, by
// name (SampleNames), in index order: a run's split.json.
type SplitNames struct {
	Train []string `json:"train"`
	Val   []string `json:"val"`
}

// SampleNames names the samples idx of ds (SampleName; "#N" for a sample
// without a name).
func SampleNames(ds Dataset, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		if out[k] = SampleName(ds, i); out[k] == "" {
			out[k] = fmt.Sprintf("#%d", i)
		}
	}
	return out
}

// Holder is a dataset that holds decoded pictures or volumes beside the
// batches it fills: HeldBytes is about the most it holds at once while
// workers samples are filled at a time.
type Holder interface {
	HeldBytes(workers int) int64
}

// HeldBytes is what ds, or the dataset it wraps, holds at once beside the
// batch buffers while workers samples are filled at a time (Holder); 0 for
// one that decodes nothing (synthetic data). It does not grow with the
// samples: file sources decode each sample as a batch takes it.
func HeldBytes(ds Dataset, workers int) int64 {
	if h, ok := outermost[Holder](ds); ok {
		return h.HeldBytes(workers)
	}
	return 0
}

// wrapper is a Dataset built on another (Resize, Normalize), so that names
// and pictures of the source can be reached through it.
type wrapper interface {
	inner() Dataset
}

// outermost is ds, or the outermost dataset it wraps, as a T; ok is false
// when none is one.
func outermost[T any](ds Dataset) (t T, ok bool) {
	for ds != nil {
		if t, ok := ds.(T); ok {
			return t, true
		}
		w, ok := ds.(wrapper)
		if !ok {
			break
		}
		ds = w.inner()
	}
	return t, false
}

// SampleName is the name of sample i of ds or of the dataset it wraps (see
// Named), or "" when its samples have none (synthetic data).
func SampleName(ds Dataset, i int) string {
	if n, ok := outermost[Named](ds); ok {
		return n.Name(i)
	}
	return ""
}

// SourceImages is ds, or the outermost dataset it wraps, as an ImageSource:
// the pictures of its samples at ds's size. ok is false when none is one.
// Normalize changes no picture, so a normalized set's pictures are its
// source's.
func SourceImages(ds Dataset) (src ImageSource, ok bool) {
	return outermost[ImageSource](ds)
}
