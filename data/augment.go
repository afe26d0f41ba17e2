package data

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Augment is the training augmentation beyond data.flip's left-right
// mirror (config section data.augment). Every choice of sample i in epoch e
// is drawn from (seed, e, i) alone, so a resumed run augments exactly as
// an uninterrupted one. Images and masks move together; masks are sampled
// nearest (classes are never blended), images bilinearly.
//
// Beside the flips, rotations by quarter turns, crops and the jitter, it
// has nnU-Net's recipe (batchgenerators' transforms), each applied to a
// sample with its probability P*: rotation, scaling and elastic
// deformation (one resampling), Gaussian noise, Gaussian blur,
// multiplicative brightness, contrast and gamma, in that order. All are
// off by default; the probabilities default to nnU-Net's. Where nnU-Net
// draws per channel, one draw is made for all channels of a sample.
type Augment struct {
	VFlip bool `yaml:"vflip"` // mirror top-bottom with probability 1/2
	ZFlip bool `yaml:"zflip"` // volumes: mirror along z (the slices reversed) with probability 1/2
	Rot90 bool `yaml:"rot90"` // rotate by 0, 90, 180 or 270 degrees, uniformly (square images)
	// CropScale [min, max]: a random resized crop of that share of the area
	// (aspect ratio 3/4..4/3, log-uniform), scaled back to the size;
	// empty: none.
	CropScale []float64 `yaml:"crop_scale"`
	// Brightness b and Contrast c jitter each image: its normalized values
	// v become (v - mean(v))*f + mean(v) + d, f uniform in [1-c, 1+c], d in
	// [-b, b] (in units of data.std).
	Brightness float64 `yaml:"brightness"`
	Contrast   float64 `yaml:"contrast"`

	// Rotate rotates by an angle uniform in [-Rotate, Rotate] degrees
	// (0: none), with probability PRotate, about the image's centre.
	Rotate  float64 `yaml:"rotate"`
	PRotate float64 `yaml:"p_rotate"`
	// Scale [lo, hi] magnifies by a factor s drawn as nnU-Net draws its
	// scale (half the time in [lo, 1], else in [1, hi]), with probability
	// PScale: s > 1 zooms in. Rotation, scale and elastic deformation are
	// one resampling (images bilinear, masks nearest) in-plane; what comes
	// from outside the image is 0 in the image (the normalized data.mean)
	// and Ignore in the mask, so the loss skips it.
	Scale  []float64 `yaml:"scale"`
	PScale float64   `yaml:"p_scale"`
	// Elastic [alpha, sigma] displaces every pixel by a field of uniform
	// [-1, 1] values smoothed by a Gaussian of sigma pixels (zero outside)
	// and scaled by alpha, one field per axis, with probability PElastic.
	Elastic  []float64 `yaml:"elastic"`
	PElastic float64   `yaml:"p_elastic"`
	// Noise adds zero-mean Gaussian noise of a variance uniform in
	// [0, Noise] to every value, with probability PNoise.
	Noise  float64 `yaml:"noise"`
	PNoise float64 `yaml:"p_noise"`
	// Blur [lo, hi] blurs every plane by a separable Gaussian of sigma
	// uniform in [lo, hi] pixels (truncated at 4 sigma, borders mirrored),
	// with probability PBlur.
	Blur  []float64 `yaml:"blur"`
	PBlur float64   `yaml:"p_blur"`
	// BrightnessMul [lo, hi] multiplies the image by a factor uniform in
	// [lo, hi], with probability PBrightnessMul.
	BrightnessMul  []float64 `yaml:"brightness_mul"`
	PBrightnessMul float64   `yaml:"p_brightness_mul"`
	// ContrastRange [lo, hi] is nnU-Net's contrast: each channel's values
	// v become (v - mean)*f + mean clipped to the channel's range before,
	// f drawn as Scale's, with probability PContrast.
	ContrastRange []float64 `yaml:"contrast_range"`
	PContrast     float64   `yaml:"p_contrast"`
	// Gamma [lo, hi]: each channel rescaled to [0, 1] by its min and max,
	// raised to the power g (drawn as Scale's), rescaled back, with
	// probability PGamma.
	Gamma  []float64 `yaml:"gamma"`
	PGamma float64   `yaml:"p_gamma"`
}

// DefaultAugment is data.augment's default: everything off, nnU-Net's
// probabilities.
func DefaultAugment() Augment {
	return Augment{PRotate: 0.2, PScale: 0.2, PElastic: 0.2, PNoise: 0.1, PBlur: 0.2, PBrightnessMul: 0.15, PContrast: 0.15, PGamma: 0.3}
}

// spatial reports whether a rotates, scales or deforms.
func (a Augment) spatial() bool {
	return a.Rotate > 0 || len(a.Scale) == 2 || len(a.Elastic) == 2
}

// Any reports whether a is not the identity.
func (a Augment) Any() bool {
	return a.VFlip || a.ZFlip || a.Rot90 || len(a.CropScale) == 2 || a.Brightness > 0 || a.Contrast > 0 ||
		a.spatial() || a.Noise > 0 || len(a.Blur) == 2 || len(a.BrightnessMul) == 2 || len(a.ContrastRange) == 2 || len(a.Gamma) == 2
}

// Validate names the first invalid setting; h and w are the final size
// (a volume's slice: rot90 needs a square), volumes says model.dims is 3.
func (a Augment) Validate(h, w int, volumes bool) error {
	switch {
	case a.ZFlip && !volumes:
		return fmt.Errorf("data.augment.zflip: mirrors volumes along z, and model.dims is 2 (images); use data.augment.vflip or data.flip")
	case a.Rot90 && h != w && h > 0 && w > 0:
		return fmt.Errorf("data.augment.rot90: the images are %dx%d; rotations keep only square images' size: set data.resize to a square or drop rot90", h, w)
	case len(a.CropScale) != 0 && len(a.CropScale) != 2:
		return fmt.Errorf("data.augment.crop_scale: %v: want [min, max], e.g. [0.5, 1], or []", a.CropScale)
	case len(a.CropScale) == 2 && !(a.CropScale[0] > 0 && a.CropScale[0] <= a.CropScale[1] && a.CropScale[1] <= 1):
		return fmt.Errorf("data.augment.crop_scale: %v: want 0 < min <= max <= 1", a.CropScale)
	case !(a.Brightness >= 0) || !(a.Contrast >= 0 && a.Contrast < 1):
		return fmt.Errorf("data.augment: brightness %g must be >= 0 and contrast %g in [0, 1)", a.Brightness, a.Contrast)
	case !(a.Rotate >= 0 && a.Rotate <= 180):
		return fmt.Errorf("data.augment.rotate: %g: want the largest angle in degrees, 0 (none) to 180", a.Rotate)
	case !(a.Noise >= 0 && a.Noise <= 100):
		return fmt.Errorf("data.augment.noise: %g: want the largest variance, 0 (none) to 100 (units of data.std squared), e.g. 0.1", a.Noise)
	}
	for _, r := range []struct {
		key      string
		v        []float64
		ok       func(lo, hi float64) bool
		want, ex string
	}{
		{"scale", a.Scale, func(lo, hi float64) bool { return lo > 0 && lo <= hi && hi <= 10 }, "0 < lo <= hi <= 10", "[0.7, 1.4]"},
		{"elastic", a.Elastic, func(al, s float64) bool { return al >= 0 && al <= 1e4 && s > 0 && s <= 100 }, "alpha 0..10000 and sigma in (0, 100] pixels", "[200, 10]"},
		{"blur", a.Blur, func(lo, hi float64) bool { return lo >= 0 && lo <= hi && hi > 0 && hi <= 32 }, "0 <= lo <= hi, 0 < hi <= 32 (sigma in pixels)", "[0.5, 1]"},
		{"brightness_mul", a.BrightnessMul, func(lo, hi float64) bool { return lo >= 0 && lo <= hi && hi <= 10 }, "0 <= lo <= hi <= 10", "[0.75, 1.25]"},
		{"contrast_range", a.ContrastRange, func(lo, hi float64) bool { return lo >= 0 && lo <= hi && hi <= 10 }, "0 <= lo <= hi <= 10", "[0.75, 1.25]"},
		{"gamma", a.Gamma, func(lo, hi float64) bool { return lo > 0 && lo <= hi && hi <= 10 }, "0 < lo <= hi <= 10", "[0.7, 1.5]"},
	} {
		switch {
		case len(r.v) != 0 && len(r.v) != 2:
			return fmt.Errorf("data.augment.%s: %v: want two numbers, e.g. %s, or []", r.key, r.v, r.ex)
		case len(r.v) == 2 && !r.ok(r.v[0], r.v[1]):
			return fmt.Errorf("data.augment.%s: %v: want %s, e.g. %s", r.key, r.v, r.want, r.ex)
		}
	}
	for _, p := range []struct {
		key, of string
		p       float64
		on      bool
	}{
		{"p_rotate", "rotate", a.PRotate, a.Rotate > 0},
		{"p_scale", "scale", a.PScale, len(a.Scale) == 2},
		{"p_elastic", "elastic", a.PElastic, len(a.Elastic) == 2},
		{"p_noise", "noise", a.PNoise, a.Noise > 0},
		{"p_blur", "blur", a.PBlur, len(a.Blur) == 2},
		{"p_brightness_mul", "brightness_mul", a.PBrightnessMul, len(a.BrightnessMul) == 2},
		{"p_contrast", "contrast_range", a.PContrast, len(a.ContrastRange) == 2},
		{"p_gamma", "gamma", a.PGamma, len(a.Gamma) == 2},
	} {
		switch {
		case !(p.p >= 0 && p.p <= 1):
			return fmt.Errorf("data.augment.%s: %g: want a probability in [0, 1]", p.key, p.p)
		case p.p == 0 && p.on:
			return fmt.Errorf("data.augment.%s: 0 never applies data.augment.%s: set a probability in (0, 1], or turn %s off", p.key, p.of, p.of)
		}
	}
	return nil
}

// augmentRand is sample i's generator in epoch e (stream "augm").
func augmentRand(seed uint64, epoch, i int) *rand.Rand {
	return newRand(seed^0x6175676d, mix64(uint64(epoch))^uint64(i))
}

// apply augments one sample in place: image (c channels of d slices of
// h x w, d 1 for an image; see Volumes) and mask (d slices). Each choice
// is drawn once and made on every slice alike: in-plane for volumes,
// with ZFlip reversing the slices (the noise is drawn per value, with one
// variance). The order: flips, quarter turns, crop, rotation, scale and
// elastic deformation, noise, blur, multiplicative brightness, contrast
// (nnU-Net's), the brightness and contrast jitter, gamma. Channel
// statistics (means, ranges) are a whole image's or volume's.
func (a Augment) apply(rng *rand.Rand, img []float32, mask []uint8, c, d, h, w int) {
	hw := h * w
	planes := func(f func(img []float32), m func(mask []uint8)) {
		for p := range c * d {
			f(img[p*hw : (p+1)*hw])
		}
		for z := range d {
			m(mask[z*hw : (z+1)*hw])
		}
	}
	if a.VFlip && rng.IntN(2) == 1 {
		planes(func(p []float32) { flipRows(p, h, w) }, func(m []uint8) { flipRows(m, h, w) })
	}
	if a.ZFlip && rng.IntN(2) == 1 {
		for ch := range c {
			flipRows(img[ch*d*hw:(ch+1)*d*hw], d, hw) // the slices reversed
		}
		flipRows(mask, d, hw)
	}
	if a.Rot90 && h == w {
		if k := rng.IntN(4); k > 0 {
			planes(func(p []float32) { rotate(p, h, k) }, func(m []uint8) { rotate(m, h, k) })
		}
	}
	if len(a.CropScale) == 2 {
		area := uniform(rng, a.CropScale[0], a.CropScale[1]) * float64(h*w)
		ratio := math.Exp(uniform(rng, math.Log(3.0/4), math.Log(4.0/3)))
		cw := min(w, max(1, int(math.Round(math.Sqrt(area*ratio)))))
		ch := min(h, max(1, int(math.Round(math.Sqrt(area/ratio)))))
		x0, y0 := rng.IntN(w-cw+1), rng.IntN(h-ch+1)
		planes(func(p []float32) { cropResize(p, h, w, x0, y0, cw, ch) }, func(m []uint8) { cropNearest(m, h, w, x0, y0, cw, ch) })
	}
	if a.spatial() {
		a.warp(rng, img, mask, c*d, d, h, w)
	}
	a.intensity(rng, img, c, d, h, w)
	if a.Brightness > 0 || a.Contrast > 0 {
		f := 1 + uniform(rng, -a.Contrast, a.Contrast)
		d0 := uniform(rng, -a.Brightness, a.Brightness)
		for p := range c { // a channel's mean over the whole image or volume
			plane := img[p*d*hw : (p+1)*d*hw]
			var mean float64
			for _, v := range plane {
				mean += float64(v)
			}
			mean /= float64(len(plane))
			for k, v := range plane {
				plane[k] = float32((float64(v)-mean)*f + mean + d0)
			}
		}
	}
	if len(a.Gamma) == 2 && hit(rng, a.PGamma) {
		g := nnUNetRange(rng, a.Gamma[0], a.Gamma[1])
		for ch := range c {
			gamma(img[ch*d*hw:(ch+1)*d*hw], g)
		}
	}
}

// flipRows mirrors a plane top to bottom.
func flipRows[T any](plane []T, h, w int) {
	for y := 0; y < h/2; y++ {
		a, b := plane[y*w:(y+1)*w], plane[(h-1-y)*w:(h-y)*w]
		for x := range w {
			a[x], b[x] = b[x], a[x]
		}
	}
}

// rotate turns an n x n plane k quarter turns counter-clockwise.
func rotate[T any](plane []T, n, k int) {
	src := slices.Clone(plane)
	for y := range n {
		for x := range n {
			sy, sx := y, x
			for range k { // (y, x) of the result comes from (x, n-1-y) of the source, per turn
				sy, sx = sx, n-1-sy
			}
			plane[y*n+x] = src[sy*n+sx]
		}
	}
}

// cropResize replaces a plane by its crop (x0, y0, cw x ch) scaled back to
// w x h bilinearly (align_corners=False, clamped).
func cropResize(plane []float32, h, w, x0, y0, cw, ch int) {
	src := slices.Clone(plane)
	for y := range h {
		sy := max((float64(y)+0.5)*float64(ch)/float64(h)-0.5, 0)
		ya := min(int(sy), ch-1)
		yb, fy := min(ya+1, ch-1), float32(sy-float64(ya))
		for x := range w {
			sx := max((float64(x)+0.5)*float64(cw)/float64(w)-0.5, 0)
			xa := min(int(sx), cw-1)
			xb, fx := min(xa+1, cw-1), float32(sx-float64(xa))
			at := func(yy, xx int) float32 { return src[(y0+yy)*w+x0+xx] }
			top := at(ya, xa)*(1-fx) + at(ya, xb)*fx
			bot := at(yb, xa)*(1-fx) + at(yb, xb)*fx
			plane[y*w+x] = top*(1-fy) + bot*fy
		}
	}
}

// cropNearest is cropResize for a mask: each pixel takes one source pixel.
func cropNearest(mask []uint8, h, w, x0, y0, cw, ch int) {
	src := slices.Clone(mask)
	for y := range h {
		sy := min(int((float64(y)+0.5)*float64(ch)/float64(h)), ch-1)
		for x := range w {
			sx := min(int((float64(x)+0.5)*float64(cw)/float64(w)), cw-1)
			mask[y*w+x] = src[(y0+sy)*w+x0+sx]
		}
	}
}

// Augmented is the samples idx of ds as training sees them in epoch (0-based)
// under cfg's flip and augmentation (Batch, PerEpoch and the order are not
// used): an in-memory Dataset of len(idx) samples, for data preview.
func Augmented(ds Dataset, idx []int, cfg LoaderConfig, epoch int) (Dataset, error) {
	c := ds.Channels()
	h, w := ds.Size() // a volume's slices stacked
	l := &Loader{ds: ds, cfg: cfg}
	images, masks := make([]float32, len(idx)*c*h*w), make([]uint8, len(idx)*h*w)
	if err := l.fill(epoch, idx, images, masks); err != nil {
		return nil, err
	}
	return &inMemory{images: images, masks: masks, n: len(idx), c: c, h: h, w: w, classes: ds.Classes()}, nil
}

// inMemory is a Dataset of filled samples.
type inMemory struct {
	images     []float32
	masks      []uint8
	n, c, h, w int
	classes    int
}

func (m *inMemory) Len() int         { return m.n }
func (m *inMemory) Channels() int    { return m.c }
func (m *inMemory) Classes() int     { return m.classes }
func (m *inMemory) Size() (int, int) { return m.h, m.w }
func (m *inMemory) Sample(i int, img []float32, mask []uint8) error {
	if i < 0 || i >= m.n || len(img) != m.c*m.h*m.w || len(mask) != m.h*m.w {
		return fmt.Errorf("data: sample %d of %d (buffers %d and %d)", i, m.n, len(img), len(mask))
	}
	copy(img, m.images[i*m.c*m.h*m.w:])
	copy(mask, m.masks[i*m.h*m.w:])
	return nil
}
