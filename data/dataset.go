package data

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
