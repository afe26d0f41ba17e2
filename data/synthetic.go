package data

import (
	"context"
	"fmt"
	"image"
	"math"
	"math/rand/v2"
)

// Shape classes of the synthetic set. Class 0 is background; a set with
// Classes k draws its shapes from the first k-1 kinds below.
const (
	ClassBackground = 0
	ClassCircle     = 1
	ClassRectangle  = 2
	ClassTriangle   = 3
)

// Limits of SyntheticConfig, checked by Validate.
const (
	MinSyntheticSize    = 16
	MaxSyntheticSize    = 4096
	MinSyntheticClasses = 2
	MaxSyntheticClasses = 4 // background + circle, rectangle, triangle
	MaxSyntheticNoise   = 1.0
	// MaxSyntheticCount bounds data.count: the split and every epoch's
	// order hold 8 bytes a sample (2e9 samples would take 16 GB before the
	// first step), and a data check draws every sample.
	MaxSyntheticCount = 1_000_000
	// MaxSyntheticVolumeSize bounds a synthetic volume's side (256^3
	// voxels are 200 MiB of float32 RGB a sample).
	MaxSyntheticVolumeSize = 256
)

// SyntheticChannels is the number of channels of a synthetic image (RGB).
const SyntheticChannels = 3

// SyntheticConfig describes the built-in synthetic shapes set (config key
// data.*). Zero fields take the defaults of WithDefaults.
type SyntheticConfig struct {
	Count   int     // number of samples (data.count); default 256, at least 1
	Size    int     // height = width in pixels (data.size); default 64, 16..4096
	Classes int     // background + shape kinds (data.classes); default 4, 2..4
	Seed    uint64  // sample i is generated from (Seed, i) alone; 0 is a valid seed
	Noise   float64 // std of per-pixel Gaussian noise on raw [0,1] intensities (data.noise); default 0.1, 0..1
	// Depth makes the samples volumes of Depth slices of Size x Size
	// (model.dims 3: cubes of data.size); 0 for images. See volume.go.
	Depth int
}

// WithDefaults fills zero fields with the defaults: Count 256, Size 64,
// Classes 4, Noise 0.1. Seed is left as is. A zero Noise therefore means the
// default; for a practically noise-free set use a tiny value such as 1e-9.
func (c SyntheticConfig) WithDefaults() SyntheticConfig {
	if c.Count == 0 {
		c.Count = 256
	}
	if c.Size == 0 {
		c.Size = 64
	}
	if c.Classes == 0 {
		c.Classes = 4
	}
	if c.Noise == 0 {
		c.Noise = 0.1
	}
	return c
}

// Validate reports the first invalid field, naming it, its value and what is
// allowed.
func (c SyntheticConfig) Validate() error {
	switch {
	case c.Count < 1:
		return fmt.Errorf("data.count: %d: must be at least 1", c.Count)
	case c.Count > MaxSyntheticCount:
		return fmt.Errorf("data.count: %d: at most %d synthetic samples (the split and each epoch's order hold 8 bytes a sample)", c.Count, MaxSyntheticCount)
	case c.Size < MinSyntheticSize || c.Size > MaxSyntheticSize:
		return fmt.Errorf("data.size: %d: must be between %d and %d", c.Size, MinSyntheticSize, MaxSyntheticSize)
	case c.Classes < MinSyntheticClasses || c.Classes > MaxSyntheticClasses:
		return fmt.Errorf("data.classes: %d: must be between %d and %d (background + up to 3 shape kinds: circle, rectangle, triangle)",
			c.Classes, MinSyntheticClasses, MaxSyntheticClasses)
	case !(c.Noise >= 0 && c.Noise <= MaxSyntheticNoise): // also catches NaN
		return fmt.Errorf("data.noise: %v: must be between 0 and %v (std of the noise on [0,1] intensities)", c.Noise, MaxSyntheticNoise)
	case c.Depth != 0 && c.Size > MaxSyntheticVolumeSize:
		return fmt.Errorf("data.size: %d: a synthetic volume (model.dims 3) is a cube of at most %d voxels a side", c.Size, MaxSyntheticVolumeSize)
	case c.Depth != 0 && (c.Depth < MinSyntheticSize || c.Depth > MaxSyntheticVolumeSize):
		return fmt.Errorf("data: a synthetic volume has %d slices: must be between %d and %d", c.Depth, MinSyntheticSize, MaxSyntheticVolumeSize)
	}
	return nil
}

// Synthetic is the built-in synthetic shapes set: RGB images of 1 to 3
// filled circles, rectangles and triangles on a noisy background, with the
// shape kind as the class. It needs no files and is safe for concurrent use.
//
// Sample i is generated from (Seed, i) alone, with a math/rand/v2 PCG seeded
// with (Seed, i) passed through the splitmix64 finalizer, in this order:
//
//   - background: a random color, mean intensity in [0.2, 0.8] with a small
//     per-channel tint;
//   - 1 to 3 shapes, each of a kind drawn uniformly from the Classes-1 kinds
//     (circle = class 1, rectangle = 2, triangle = 3) and a size r uniform in
//     [Size/10, Size/4]: a circle of radius r, an axis-aligned rectangle of
//     half-sides r and r*[0.5, 1] (either way round), or an equilateral
//     triangle with a random rotation and the circle's area (circumradius
//     about 1.555r); its centre keeps it inside the image and no pixel of it
//     on or next to an earlier shape (a shape with no such place in 20 tries
//     is left out, so shapes never overlap and the first is always drawn);
//   - each shape a random color whose mean intensity differs from the
//     background's by at least 0.35 (lighter or darker at random), chosen
//     independently of its kind, so the class is told by geometry, not color;
//   - the mask holds the class of the shape covering each pixel centre (the
//     later one where shapes overlap, which placement avoids), 0 elsewhere;
//   - Gaussian noise of std Noise added to every pixel and channel, clamped
//     to [0, 1];
//   - finally each channel normalized as (v-Mean)/Std = (v-0.5)/0.25.
type Synthetic struct {
	cfg SyntheticConfig
}

var _ Dataset = (*Synthetic)(nil)

// NewSynthetic applies cfg.WithDefaults, validates it and returns the set.
func NewSynthetic(cfg SyntheticConfig) (*Synthetic, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Synthetic{cfg: cfg}, nil
}

// NewSyntheticExact is NewSynthetic without WithDefaults: every field is
// taken as given, so Noise 0 means no noise at all and a zero Count, Size
// or Classes is an error naming its key (memunet data synth's flags).
func NewSyntheticExact(cfg SyntheticConfig) (*Synthetic, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Synthetic{cfg: cfg}, nil
}

// Config returns the config in use, defaults applied.
func (s *Synthetic) Config() SyntheticConfig { return s.cfg }

func (s *Synthetic) Len() int         { return s.cfg.Count }
func (s *Synthetic) Channels() int    { return SyntheticChannels }
func (s *Synthetic) Classes() int     { return s.cfg.Classes }
func (s *Synthetic) Size() (h, w int) { return max(s.cfg.Depth, 1) * s.cfg.Size, s.cfg.Size }

// Depth is a volume's slices, 1 for images (see Volumes).
func (s *Synthetic) Depth() int { return max(s.cfg.Depth, 1) }

func (s *Synthetic) String() string {
	c := s.cfg
	if c.Depth > 0 {
		return fmt.Sprintf("synthetic solids (count %d, size %d^3, classes %d, seed %d, noise %v)", c.Count, c.Size, c.Classes, c.Seed, c.Noise)
	}
	return fmt.Sprintf("synthetic shapes (count %d, size %d, classes %d, seed %d, noise %v)", c.Count, c.Size, c.Classes, c.Seed, c.Noise)
}

// Sample fills image (3*Size*Size, planar, normalized; a volume's
// 3*Depth*Size*Size) and mask (Size*Size; Depth*Size*Size) with sample i.
func (s *Synthetic) Sample(i int, image []float32, mask []uint8) error {
	if err := checkSample(s, i, image, mask); err != nil {
		return err
	}
	s.generate(i, image, mask, nil)
	for k, v := range image {
		image[k] = (v - Mean) / Std
	}
	return nil
}

// Image returns sample i as an RGB picture (raw intensities, not
// normalized) and its mask as a Gray picture whose pixel values are the
// class indices (see ColorizeMask for a viewable version).
// A volume's picture is its slices stacked top to bottom.
func (s *Synthetic) Image(i int) (*image.RGBA, *image.Gray, error) {
	h, w := s.Size()
	plane := h * w
	raw := make([]float32, SyntheticChannels*plane)
	mask := make([]uint8, plane)
	if err := checkSample(s, i, raw, mask); err != nil {
		return nil, nil, err
	}
	s.generate(i, raw, mask, nil)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for p := range plane {
		img.Pix[4*p+0] = to8(raw[p])
		img.Pix[4*p+1] = to8(raw[plane+p])
		img.Pix[4*p+2] = to8(raw[2*plane+p])
		img.Pix[4*p+3] = 255
	}
	m := image.NewGray(image.Rect(0, 0, w, h))
	copy(m.Pix, mask)
	return img, m, nil
}

func to8(v float32) uint8 { return uint8(math.Round(float64(min(max(v, 0), 1)) * 255)) }

func checkSample(ds Dataset, i int, image []float32, mask []uint8) error {
	if n := ds.Len(); i < 0 || i >= n {
		return fmt.Errorf("data: sample %d out of range [0, %d)", i, n)
	}
	h, w := ds.Size()
	c := ds.Channels()
	if len(image) != c*h*w {
		return fmt.Errorf("data: image buffer for sample %d has %d values, want C*H*W = %d*%d*%d = %d", i, len(image), c, h, w, c*h*w)
	}
	if len(mask) != h*w {
		return fmt.Errorf("data: mask buffer for sample %d has %d values, want H*W = %d*%d = %d", i, len(mask), h, w, h*w)
	}
	return nil
}

// shape is one painted shape of a synthetic sample.
type shape struct {
	class  uint8
	cx, cy float64       // centre in pixel coordinates (pixel centres at k+0.5)
	r      float64       // radius: circle radius, rectangle max half-side, triangle circumradius
	hw, hh float64       // rectangle half-width and half-height
	tri    [3][2]float64 // triangle vertices, counter-clockwise
	color  [3]float32
}

func (sh *shape) contains(x, y float64) bool {
	switch sh.class {
	case ClassCircle:
		dx, dy := x-sh.cx, y-sh.cy
		return dx*dx+dy*dy <= sh.r*sh.r
	case ClassRectangle:
		return math.Abs(x-sh.cx) <= sh.hw && math.Abs(y-sh.cy) <= sh.hh
	case ClassTriangle:
		for k := range 3 {
			a, b := sh.tri[k], sh.tri[(k+1)%3]
			if (b[0]-a[0])*(y-a[1])-(b[1]-a[1])*(x-a[0]) < 0 {
				return false
			}
		}
		return true
	}
	return false
}

// place computes a triangle's vertices, rotated by theta, from its centre
// and circumradius; other kinds need nothing.
func (sh *shape) place(theta float64) {
	if sh.class != ClassTriangle {
		return
	}
	for k := range 3 {
		t := theta + 2*math.Pi*float64(k)/3
		sh.tri[k] = [2]float64{sh.cx + sh.r*math.Cos(t), sh.cy + sh.r*math.Sin(t)}
	}
}

// touches reports whether some pixel centre of sh lies in o or next to it
// (4-neighbourhood), so that two shapes of similar color never merge into
// one blob.
func (sh *shape) touches(o *shape) bool {
	if math.Hypot(sh.cx-o.cx, sh.cy-o.cy) >= sh.r+o.r+2 {
		return false
	}
	x0 := math.Floor(max(sh.cx-sh.r, o.cx-o.r-2))
	x1 := math.Ceil(min(sh.cx+sh.r, o.cx+o.r+2))
	y0 := math.Floor(max(sh.cy-sh.r, o.cy-o.r-2))
	y1 := math.Ceil(min(sh.cy+sh.r, o.cy+o.r+2))
	for y := y0 + 0.5; y < y1; y++ {
		for x := x0 + 0.5; x < x1; x++ {
			if sh.contains(x, y) && (o.contains(x, y) || o.contains(x-1, y) || o.contains(x+1, y) || o.contains(x, y-1) || o.contains(x, y+1)) {
				return true
			}
		}
	}
	return false
}

// mix64 is the splitmix64 finalizer, spreading nearby seeds apart.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// newRand returns the PCG stream for (seed, stream).
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(mix64(seed), mix64(stream^0x5851f42d4c957f2d)))
}

// uniform returns a value uniform in [lo, hi).
func uniform(rng *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }

// randomColor returns a color of the given mean intensity with a small
// zero-mean per-channel tint (|tint| <= 0.08), so every channel stays in
// [mean-0.08, mean+0.08].
func randomColor(rng *rand.Rand, mean float64) [3]float32 {
	var d [3]float64
	for k := range d {
		d[k] = uniform(rng, -0.04, 0.04)
	}
	avg := (d[0] + d[1] + d[2]) / 3
	var c [3]float32
	for k := range c {
		c[k] = float32(mean + d[k] - avg)
	}
	return c
}

// Contrast parameters: background mean in [0.2, 0.8]; shape means in
// [0.1, 0.9] at least minContrast away from the background's.
const (
	bgMeanLo, bgMeanHi       = 0.2, 0.8
	shapeMeanLo, shapeMeanHi = 0.1, 0.9
	minContrast              = 0.35
	placeTries               = 20

	// triangleScale is a triangle's circumradius over the drawn radius r,
	// sqrt(4*pi/(3*sqrt(3))) ~ 1.555, so that an equilateral triangle has the
	// area of the circle of radius r and no class is much rarer in pixels.
	triangleScale = 1.5551203015
)

// shapes draws the background color and the shapes of sample i.
func (s *Synthetic) shapes(rng *rand.Rand) (bg [3]float32, out []shape) {
	n := float64(s.cfg.Size)
	bgMean := uniform(rng, bgMeanLo, bgMeanHi)
	bg = randomColor(rng, bgMean)

	count := 1 + rng.IntN(3)
	out = make([]shape, 0, count)
	rmin, rmax := n/10, n/4
	for range count {
		sh := shape{class: uint8(1 + rng.IntN(s.cfg.Classes-1))}
		r := uniform(rng, rmin, rmax)
		// ext: farthest reach along x or y (keeps the shape inside the
		// image); sh.r: bounding circle (keeps shapes apart).
		var ext float64
		switch sh.class {
		case ClassCircle:
			sh.r, ext = r, r
		case ClassRectangle:
			a, b := r, r*uniform(rng, 0.5, 1)
			if rng.IntN(2) == 0 {
				a, b = b, a
			}
			sh.hw, sh.hh = a, b
			sh.r, ext = math.Hypot(a, b), r
		case ClassTriangle:
			sh.r = r * triangleScale
			ext = sh.r
		}
		theta := uniform(rng, 0, 2*math.Pi) // triangle rotation
		placed := false
		for range placeTries {
			sh.cx = uniform(rng, ext, n-ext)
			sh.cy = uniform(rng, ext, n-ext)
			sh.place(theta)
			placed = true
			for k := range out {
				if sh.touches(&out[k]) {
					placed = false
					break
				}
			}
			if placed {
				break
			}
		}
		// Shape mean: uniform over [shapeMeanLo, shapeMeanHi] minus the band
		// of half-width minContrast around the background mean.
		darkLen := max(0, bgMean-minContrast-shapeMeanLo)
		lightLen := max(0, shapeMeanHi-(bgMean+minContrast))
		u := uniform(rng, 0, darkLen+lightLen)
		var m float64
		if u < darkLen {
			m = shapeMeanLo + u
		} else {
			m = bgMean + minContrast + (u - darkLen)
		}
		sh.color = randomColor(rng, m)
		if placed { // the first shape always is
			out = append(out, sh)
		}
	}
	return bg, out
}

// generate writes the raw (un-normalized, [0,1]) image and the mask of
// sample i. If owner is not nil (len Size*Size) it receives, per pixel, the
// index of the topmost shape or -1 for background.
func (s *Synthetic) generate(i int, raw []float32, mask []uint8, owner []int8) {
	rng := newRand(s.cfg.Seed, uint64(i))
	if s.cfg.Depth > 0 {
		s.generateVolume(rng, raw, mask)
		return
	}
	bg, shapes := s.shapes(rng)
	n := s.cfg.Size
	plane := n * n
	for y := range n {
		fy := float64(y) + 0.5
		for x := range n {
			fx := float64(x) + 0.5
			p := y*n + x
			col, cls, own := bg, uint8(ClassBackground), int8(-1)
			for k := len(shapes) - 1; k >= 0; k-- {
				if shapes[k].contains(fx, fy) {
					col, cls, own = shapes[k].color, shapes[k].class, int8(k)
					break
				}
			}
			mask[p] = cls
			if owner != nil {
				owner[p] = own
			}
			for c := range SyntheticChannels {
				raw[c*plane+p] = col[c]
			}
		}
	}
	// Noise last, in a fixed order, from the same stream.
	sigma := s.cfg.Noise
	for k, v := range raw {
		raw[k] = min(max(v+float32(sigma*rng.NormFloat64()), 0), 1)
	}
}

// ColorizeMask renders a class-index mask with ClassColor.
func ColorizeMask(m *image.Gray) *image.RGBA {
	b := m.Bounds()
	out := image.NewRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out.SetRGBA(x, y, ClassColor(m.GrayAt(x, y).Y))
		}
	}
	return out
}

// syntheticSource is data.source synthetic: the built-in shapes.
type syntheticSource struct{}

func (syntheticSource) open(ctx context.Context, cfg SourceConfig, rep *Report, full bool) (found, error) {
	syn, err := NewSyntheticExact(cfg.Synthetic()) // the config gives every field; data.noise: 0 means none
	if err != nil {
		return found{}, err
	}
	h, w := syn.Size()
	rep.Sizes = []SizeCount{{H: h, W: w, Count: syn.Len()}}
	for k := range cfg.Classes {
		rep.Mapping[k] = int16(k)
	}
	rep.MappingDesc = "the synthetic masks hold class indices"
	if full {
		if err := checkSynthetic(ctx, syn, rep); err != nil {
			return found{}, err
		}
	}
	return found{src: syn}, nil
}

// checkSynthetic counts the classes of every synthetic sample; the error
// is ctx's, once it is done.
func checkSynthetic(ctx context.Context, s *Synthetic, rep *Report) error {
	h, w := s.Size()
	raw := make([]float32, SyntheticChannels*h*w)
	mask := make([]uint8, h*w)
	var vals [256]MaskValue
	for i := range s.Len() {
		if i%256 == 0 && ctx.Err() != nil {
			return fmt.Errorf("data: checking the synthetic samples stopped: %w", ctx.Err())
		}
		s.generate(i, raw, mask, nil)
		var seen [256]bool
		for _, v := range mask {
			vals[v].Pixels++
			seen[v] = true
		}
		for v, ok := range seen {
			if ok {
				vals[v].Masks++
				if vals[v].FirstMask == "" {
					vals[v].FirstMask = fmt.Sprintf("sample %d", i)
				}
			}
		}
	}
	for v, mv := range vals {
		if mv.Masks > 0 {
			mv.Value = v
			rep.Values = append(rep.Values, mv)
		}
	}
	return nil
}
