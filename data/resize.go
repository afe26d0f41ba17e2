package data

import (
	"fmt"
	"image"

	"golang.org/x/image/draw"
)

// ImageSource is a Dataset that can also hand out sample i as pictures: the
// image with raw 8-bit intensities (not normalized; channel c of the
// dataset is R, G, B for c = 0, 1, 2, alpha ignored) and the mask as a Gray
// picture whose pixel values are the class indices. Synthetic is one;
// sources that read image files are others.
type ImageSource interface {
	Dataset
	Image(i int) (*image.RGBA, *image.Gray, error)
}

var _ ImageSource = (*Synthetic)(nil)

// MaxResizeSize bounds each side of a Resize (config key data.resize), so
// that C*H*W buffers stay far from overflowing an int.
const MaxResizeSize = 16384

// Resize returns src with every sample scaled to h rows by w columns (config
// key data.resize: [H, W]). Sample(i) takes src.Image(i), scales it and
// normalizes it the way this package always does: each 8-bit value p becomes
// (p/255 - Mean)/Std in float32.
//
// Images are scaled with draw.BiLinear (the tent kernel of
// golang.org/x/image/draw), not draw.CatmullRom: bilinear weights are never
// negative, so a scaled value always lies between the source values it
// blends and the sharp edges of shapes get no ringing or overshoot halo
// (Catmull-Rom overshoots there, and clamping to [0, 255] then distorts
// intensities near every edge); it is also the usual choice for
// segmentation inputs and about half the work (support 1 pixel, not 2).
// When shrinking, draw widens the kernel to cover every source pixel, so
// downscaling averages (antialiases) rather than skips pixels.
//
// Masks are scaled with draw.NearestNeighbor: every output pixel takes the
// class of one source pixel, so class indices (and Ignore) are never
// blended into values that were not in the source mask.
//
// A source with 16-bit images (16-bit TIFF or PNG files) is scaled at 16
// bits and normalized as (p/65535 - Mean)/Std; Image still returns 8 bits.
//
// Each sample is scaled from its own picture's bounds, so a source whose
// images differ in size is fine; an image and its mask must be the same size.
// A picture that already is h by w is used as is, without interpolation.
//
// Resizing to the source's own size gives exactly the normalized 8-bit
// pixels of src.Image(i). For Synthetic that is not bit for bit its Sample:
// Synthetic normalizes its float intensities directly, while its Image
// rounds them to 8 bits first, so the two differ by at most
// 0.5/255/Std ~ 0.0078 per value; the masks are equal.
//
// The result has src's Len, Channels and Classes; Size is (h, w). It is
// deterministic and safe for concurrent use when src's Image is. It also
// implements ImageSource: its Image returns the scaled pictures. src must
// have 1 to 3 channels; h and w must be between 1 and MaxResizeSize.
func Resize(src ImageSource, h, w int) (Dataset, error) {
	if h < 1 || w < 1 || h > MaxResizeSize || w > MaxResizeSize {
		return nil, fmt.Errorf("data.resize: [%d, %d]: height and width must be at least 1 and at most %d", h, w, MaxResizeSize)
	}
	if src == nil {
		return nil, fmt.Errorf("data.resize: no source dataset")
	}
	if c := src.Channels(); c < 1 || c > 3 {
		return nil, fmt.Errorf("data.resize: source has %d channels; resizing takes 1 to 3 (R, G, B of its images)", c)
	}
	return &resized{src: src, h: h, w: w}, nil
}

// resized is the Dataset returned by Resize.
type resized struct {
	src  ImageSource
	h, w int
}

var _ ImageSource = (*resized)(nil)

func (r *resized) inner() Dataset   { return r.src }
func (r *resized) Len() int         { return r.src.Len() }
func (r *resized) Channels() int    { return r.src.Channels() }
func (r *resized) Classes() int     { return r.src.Classes() }
func (r *resized) Size() (h, w int) { return r.h, r.w }
func (r *resized) String() string {
	if s, ok := r.src.(fmt.Stringer); ok {
		return fmt.Sprintf("%s resized to %dx%d", s, r.h, r.w)
	}
	return fmt.Sprintf("dataset resized to %dx%d", r.h, r.w)
}

// Image returns sample i of the source scaled to h by w: the image with
// draw.BiLinear, the mask with draw.NearestNeighbor. The pictures are new
// each call and start at (0, 0).
func (r *resized) Image(i int) (*image.RGBA, *image.Gray, error) {
	img, mask, err := r.scale(i, func(i int) (image.Image, *image.Gray, error) { return r.src.Image(i) })
	if err != nil {
		return nil, nil, err
	}
	return img.(*image.RGBA), mask, nil
}

// DeepImage is Image keeping 16 bits per channel where the source has
// them (see DeepImager): a 16-bit image is scaled as one.
func (r *resized) DeepImage(i int) (image.Image, *image.Gray, error) {
	d, ok := r.src.(DeepImager)
	if !ok {
		return r.Image(i)
	}
	return r.scale(i, d.DeepImage)
}

// scale scales sample i of the source, read by read, to h by w.
func (r *resized) scale(i int, read func(i int) (image.Image, *image.Gray, error)) (image.Image, *image.Gray, error) {
	if n := r.src.Len(); i < 0 || i >= n {
		return nil, nil, fmt.Errorf("data: sample %d out of range [0, %d)", i, n)
	}
	img, mask, err := read(i)
	if err != nil {
		return nil, nil, err
	}
	if img == nil || img == (*image.RGBA)(nil) || img == (*image.RGBA64)(nil) || mask == nil {
		return nil, nil, fmt.Errorf("data.resize: sample %d: source returned no image or no mask", i)
	}
	ib, mb := img.Bounds(), mask.Bounds()
	if ib.Empty() || ib.Size() != mb.Size() {
		return nil, nil, fmt.Errorf("data.resize: sample %d: image is %dx%d and mask %dx%d; want the same nonzero size",
			i, ib.Dy(), ib.Dx(), mb.Dy(), mb.Dx())
	}
	dr := image.Rect(0, 0, r.w, r.h)
	var oi draw.Image = image.NewRGBA(dr)
	if is16(img) {
		oi = image.NewRGBA64(dr)
	}
	om := image.NewGray(dr)
	if ib.Size() == dr.Size() {
		// Already the right size: copy, so the caller may keep or change the
		// result without touching the source's pictures.
		draw.Copy(oi, image.Point{}, img, ib, draw.Src, nil)
		draw.Copy(om, image.Point{}, mask, mb, draw.Src, nil)
		return oi, om, nil
	}
	draw.BiLinear.Scale(oi, dr, img, ib, draw.Src, nil)
	draw.NearestNeighbor.Scale(om, dr, mask, mb, draw.Src, nil)
	return oi, om, nil
}

// Sample fills image (C*h*w, planar, normalized) and mask (h*w) with sample
// i scaled to h by w.
func (r *resized) Sample(i int, img []float32, mask []uint8) error {
	if err := checkSample(r, i, img, mask); err != nil {
		return err
	}
	oi, om, err := r.DeepImage(i)
	if err != nil {
		return err
	}
	normalizeDeep(oi, r.Channels(), img)
	copy(mask, om.Pix)
	return nil
}

// normalize8 writes the first c channels of m (R, G, B; Min at (0, 0), Stride
// 4*width) to out, planar, each 8-bit value p as (p/255 - Mean)/Std.
func normalize8(m *image.RGBA, c int, out []float32) {
	plane := m.Rect.Dx() * m.Rect.Dy()
	for ch := range c {
		dst := out[ch*plane : (ch+1)*plane]
		for p := range dst {
			v := float32(m.Pix[4*p+ch]) / 255
			dst[p] = (v - Mean) / Std
		}
	}
}
