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
}

// Any reports whether a is not the identity.
func (a Augment) Any() bool {
	return a.VFlip || a.ZFlip || a.Rot90 || len(a.CropScale) == 2 || a.Brightness > 0 || a.Contrast > 0
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
// with ZFlip reversing the slices.
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
