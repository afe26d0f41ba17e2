package data

import (
	"fmt"
	"image"
	"math/rand/v2"
	"slices"
)

// DefaultPatchForeground is nnU-Net's share of training patches centred on
// a foreground pixel (oversample_foreground_percent 0.33).
const DefaultPatchForeground = 0.33

// epochSampler is a dataset whose training samples change with the epoch
// (random patches): sampleEpoch fills sample i as epoch (0-based) of a run
// seeded seed sees it, a function of (seed, epoch, i) alone. The Loader
// calls it where a dataset has it; Sample stays the sample's one fixed
// view (for validation and previews).
type epochSampler interface {
	sampleEpoch(i int, seed uint64, epoch int, img []float32, mask []uint8) error
}

// patches is the Dataset of data.patch: sample i is an h x w crop of
// source image i at its full resolution, padded where the image is
// smaller (centred; image value 0 after normalization, mask Ignore, so
// padding weighs nothing in the loss). For training (sampleEpoch) the crop is
// drawn from (seed, epoch, i): with probability fg it is centred on a
// foreground pixel (a class other than 0 and Ignore chosen uniformly among
// those the mask holds, then one of its pixels, as nnU-Net draws them),
// else anywhere; Sample is the centre crop.
type patches struct {
	src  ImageSource
	h, w int
	fg   float64
	bg   Background // what foreground is not (data.background)
	// a and b renormalize each channel (data.mean/std): v*a + b after the
	// package's (v-Mean)/Std, as Normalize does; nil for none.
	a, b []float32
}

var (
	_ Dataset      = (*patches)(nil)
	_ epochSampler = (*patches)(nil)
)

func (p *patches) inner() Dataset   { return p.src }
func (p *patches) Len() int         { return p.src.Len() }
func (p *patches) Channels() int    { return p.src.Channels() }
func (p *patches) Classes() int     { return p.src.Classes() }
func (p *patches) Size() (h, w int) { return p.h, p.w }
func (p *patches) String() string {
	if s, ok := p.src.(fmt.Stringer); ok {
		return fmt.Sprintf("%s in %dx%d patches", s, p.h, p.w)
	}
	return fmt.Sprintf("dataset in %dx%d patches", p.h, p.w)
}

// Sample fills image and mask with the centre crop of sample i.
func (p *patches) Sample(i int, img []float32, mask []uint8) error {
	return p.crop(i, nil, img, mask)
}

func (p *patches) sampleEpoch(i int, seed uint64, epoch int, img []float32, mask []uint8) error {
	return p.crop(i, patchRand(seed, epoch, i), img, mask)
}

// patchRand is sample i's patch generator in epoch e (stream "ptch").
func patchRand(seed uint64, epoch, i int) *rand.Rand {
	return newRand(seed^0x70746368, mix64(uint64(epoch))^uint64(i))
}

// crop cuts sample i's patch: the centre one without rng, else a drawn one.
func (p *patches) crop(i int, rng *rand.Rand, img []float32, mask []uint8) error {
	if err := checkSample(p, i, img, mask); err != nil {
		return err
	}
	var pic image.Image
	var m *image.Gray
	var err error
	if d, ok := p.src.(DeepImager); ok {
		pic, m, err = d.DeepImage(i)
	} else {
		pic, m, err = p.src.Image(i)
	}
	if err != nil {
		return err
	}
	H, W := pic.Bounds().Dy(), pic.Bounds().Dx()
	y0, x0 := (H-p.h)/2, (W-p.w)/2
	if rng != nil {
		y0, x0 = p.origin(rng, m, H, W)
	}
	Window(pic, p.Channels(), y0, x0, p.h, p.w, p.a, p.b, false, img)
	for y := range p.h {
		for x := range p.w {
			sy, sx := y0+y, x0+x
			v := Ignore
			if sy >= 0 && sy < H && sx >= 0 && sx < W {
				v = m.Pix[sy*m.Stride+sx]
			}
			mask[y*p.w+x] = v
		}
	}
	return nil
}

// origin draws a patch's top-left corner in an H x W image whose classes
// are m (see patches).
func (p *patches) origin(rng *rand.Rand, m *image.Gray, H, W int) (y0, x0 int) {
	// The corner's range: inside the image, or, along a side where the
	// image is smaller than the patch, the place that centres it (as
	// nnU-Net pads).
	ylo, yhi := cornerRange(H, p.h)
	xlo, xhi := cornerRange(W, p.w)
	if rng.Float64() < p.fg {
		if cy, cx, ok := foregroundPixel(rng, m, H, W, p.bg); ok {
			return min(max(cy-p.h/2, ylo), yhi), min(max(cx-p.w/2, xlo), xhi)
		}
	}
	return ylo + rng.IntN(yhi-ylo+1), xlo + rng.IntN(xhi-xlo+1)
}

// cornerRange is the first and last start of a patch side of n along an
// image side of size: every start inside the image, or the centring one
// when the image is the smaller.
func cornerRange(size, n int) (lo, hi int) {
	if size < n {
		return (size - n) / 2, (size - n) / 2
	}
	return 0, size - n
}

// foregroundPixel draws a class other than bg and Ignore uniformly among
// those m holds, then one of its pixels uniformly; ok is false when m
// holds none.
func foregroundPixel(rng *rand.Rand, m *image.Gray, H, W int, bg Background) (y, x int, ok bool) {
	var count [256]int
	for y := range H {
		for _, c := range m.Pix[y*m.Stride : y*m.Stride+W] {
			count[c]++
		}
	}
	var classes []int
	for c := range 256 {
		if count[c] > 0 && bg.Foreground(uint8(c)) {
			classes = append(classes, c)
		}
	}
	if len(classes) == 0 {
		return 0, 0, false
	}
	c := uint8(classes[rng.IntN(len(classes))])
	r := rng.IntN(count[c])
	for y := range H {
		for x, v := range m.Pix[y*m.Stride : y*m.Stride+W] {
			if v == c {
				if r == 0 {
					return y, x, true
				}
				r--
			}
		}
	}
	return 0, 0, false
}

// openPatches makes the patch dataset of data.patch from src, resized to
// h x w first where data.resize or data.scale says (h, w: 0 when the
// images differ in size and are not resized). An image smaller than the
// patch is padded; a patch larger than every image is a fatal problem in
// rep, and the result nil.
func openPatches(cfg SourceConfig, src ImageSource, h, w int, rep *Report) (Dataset, error) {
	ph, pw := cfg.Patch[0], cfg.Patch[1]
	base := src
	if sh, sw := src.Size(); h > 0 && (sh != h || sw != w) {
		r, err := Resize(src, h, w)
		if err != nil {
			return nil, err
		}
		base = r.(ImageSource)
	}
	if h == 0 && cfg.Scale > 0 && cfg.Scale != 1 {
		rep.Problems = append(rep.Problems, fatal(cfg.Path, "data.scale %g with data.patch: the images differ in size, and data.scale scales only images of one size; leave data.scale out (patches are cut at full resolution) or set data.resize", cfg.Scale))
		return nil, nil
	}
	sizes := rep.Sizes
	if h > 0 {
		sizes = []SizeCount{{H: h, W: w, Count: src.Len()}}
	}
	fits := false
	for _, s := range sizes {
		fits = fits || (s.H >= ph && s.W >= pw)
	}
	if !fits && len(sizes) > 0 {
		big := sizes[0]
		for _, s := range sizes {
			if s.H*s.W > big.H*big.W {
				big = s
			}
		}
		how := "the largest image is"
		if rep.Resized != "" {
			how = "after " + rep.Resized + " the images are"
		}
		rep.Problems = append(rep.Problems, fatal(cfg.Path, "data.patch [%d, %d] is larger than every image (%s %dx%d), so every patch would be padded; lower data.patch to at most the images' size, or leave it out to train on whole images",
			ph, pw, how, big.H, big.W))
		return nil, nil
	}
	p := &patches{src: base, h: ph, w: pw, fg: cfg.PatchForeground, bg: cfg.Background}
	var err error
	if p.a, p.b, err = NormCoefficients(cfg.Mean, cfg.Std, src.Channels()); err != nil {
		return nil, err
	}
	rep.Height, rep.Width = ph, pw
	rep.Patched = fmt.Sprintf("data.patch [%d, %d]: random crops at full resolution, %.0f%% centred on foreground (data.patch_foreground), padded where an image is smaller; validation on whole images by tiles (predict.*)",
		ph, pw, 100*cfg.PatchForeground)
	return p, nil
}

// validatePatch checks data.patch (f: what the size must be a multiple
// of, 2^model.depth) and data.patch_foreground.
func validatePatch(patch []int, fg float64, f int) error {
	switch {
	case len(patch) == 0:
	case len(patch) != 2 || patch[0] < 1 || patch[1] < 1 || patch[0] > MaxResizeSize || patch[1] > MaxResizeSize:
		return fmt.Errorf("data.patch: %v: must be [H, W] with sizes from 1 to %d, e.g. [128, 128], or left out to train on whole images", patch, MaxResizeSize)
	case patch[0]%f != 0 || patch[1]%f != 0:
		return fmt.Errorf("data.patch: %v is not divisible by 2^model.depth = %d; use multiples of %d (e.g. [%d, %d])",
			patch, f, f, max(f, (patch[0]+f-1)/f*f), max(f, (patch[1]+f-1)/f*f))
	}
	if !(fg >= 0 && fg <= 1) {
		return fmt.Errorf("data.patch_foreground: %g: the share of patches centred on foreground must be in [0, 1], e.g. 0.33 (nnU-Net's)", fg)
	}
	return nil
}

// wholeImages is what a data.patch set's patches are cut from: the source
// and the size data.resize or data.scale gives it (0, 0: as they are).
type wholeImages struct {
	src  ImageSource
	h, w int
}

// repatch is the set s would be with cfg's data.patch and
// data.patch_foreground, cut from the images s read (its files unread).
func (s *Set) repatch(cfg SourceConfig) (*Set, error) {
	rep := *s.Report
	rep.Problems = slices.Clone(rep.Problems)
	p, err := openPatches(cfg, s.whole.src, s.whole.h, s.whole.w, &rep)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, rep.Err()
	}
	set := *s
	set.Data, set.Report = p, &rep
	set.fingerprint.Height, set.fingerprint.Width = cfg.Patch[0], cfg.Patch[1]
	return &set, nil
}

// WholeImages is the source a data.patch dataset cuts its patches from:
// every sample whole, at full resolution (after data.resize or
// data.scale), for validation by tiles; ok is false for any other
// dataset.
func WholeImages(ds Dataset) (src ImageSource, ok bool) {
	if p, is := ds.(*patches); is {
		return p.src, true
	}
	return nil, false
}
