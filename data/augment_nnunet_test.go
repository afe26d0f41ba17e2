package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// noiseImage is c channels of n x n standard normal values and a mask of
// classes 0..3 at random.
func noiseImage(seed uint64, c, n int) ([]float32, []uint8) {
	rng := rand.New(rand.NewPCG(seed, 3))
	img, mask := make([]float32, c*n*n), make([]uint8, n*n)
	for k := range img {
		img[k] = float32(rng.NormFloat64())
	}
	for k := range mask {
		mask[k] = uint8(rng.IntN(4))
	}
	return img, mask
}

// meanVar is the mean and (population) variance of v.
func meanVar(v []float32) (mean, variance float64) {
	for _, x := range v {
		mean += float64(x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (float64(x) - mean) * (float64(x) - mean)
	}
	return mean, variance / float64(len(v))
}

// shapes is an n x n mask: a centred disc (class 1) of radius r, or a
// centred square (class 2) of side 2r where square, on background 0; the
// image's one channel is the class.
func shapes(n int, r float64, square bool) ([]float32, []uint8) {
	img, mask := make([]float32, n*n), make([]uint8, n*n)
	c := float64(n-1) / 2
	for y := range n {
		for x := range n {
			dy, dx := float64(y)-c, float64(x)-c
			switch {
			case square && math.Abs(dy) < r && math.Abs(dx) < r:
				mask[y*n+x] = 2
			case !square && dy*dy+dx*dx <= r*r:
				mask[y*n+x] = 1
			}
			img[y*n+x] = float32(mask[y*n+x])
		}
	}
	return img, mask
}

func count(mask []uint8, class uint8) int {
	k := 0
	for _, m := range mask {
		if m == class {
			k++
		}
	}
	return k
}

// onlyFrom fails unless every class of got is one of orig's or Ignore.
func onlyFrom(t *testing.T, what string, orig, got []uint8) {
	t.Helper()
	for p, m := range got {
		if m != Ignore && !slices.Contains(orig, m) {
			t.Fatalf("%s: pixel %d has class %d, which the mask did not have", what, p, m)
		}
	}
}

// TestAugmentNoise: the noise has zero mean and, over many samples, the
// mean variance of a draw uniform in [0, v]: v/2.
func TestAugmentNoise(t *testing.T) {
	const c, n, samples, v = 2, 16, 300, 0.2
	a := Augment{Noise: v, PNoise: 1}
	var sumVar, sumMean float64
	for i := range samples {
		img, mask := noiseImage(uint64(i), c, n)
		orig, origMask := slices.Clone(img), slices.Clone(mask)
		a.apply(augmentRand(1, 0, i), img, mask, c, 1, n, n)
		if !slices.Equal(mask, origMask) {
			t.Fatal("noise changed the mask")
		}
		diff := make([]float32, len(img))
		for k := range img {
			diff[k] = img[k] - orig[k]
		}
		m, s := meanVar(diff)
		sumMean, sumVar = sumMean+m, sumVar+s
	}
	// The mean of 300 uniform draws: std v/sqrt(12*300) = 0.0033; each
	// sample's estimate adds less.
	if got := sumVar / samples; math.Abs(got-v/2) > 0.012 {
		t.Errorf("mean variance of the noise %.4f, want %.4f", got, v/2)
	}
	if got := sumMean / samples; math.Abs(got) > 0.01 {
		t.Errorf("mean of the noise %.4f, want 0", got)
	}
}

// TestAugmentBlur: a blur of sigma keeps white noise's mean (exactly,
// with mirrored borders) and divides its variance (away from the borders)
// by what the kernel predicts, the square of its taps' squares' sum (about
// 1/(4 pi sigma^2)); the mask stays.
func TestAugmentBlur(t *testing.T) {
	const n = 32
	for _, sigma := range []float64{0.5, 1, 2} {
		kern := gaussKernel(sigma)
		var s2 float64
		for _, k := range kern {
			s2 += float64(k) * float64(k)
		}
		want := s2 * s2
		r := len(kern) / 2
		var in, out float64
		for i := range 32 {
			img, mask := noiseImage(uint64(100+i), 1, n)
			orig, origMask := slices.Clone(img), slices.Clone(mask)
			Augment{Blur: []float64{sigma, sigma}, PBlur: 1}.apply(augmentRand(2, 0, i), img, mask, 1, 1, n, n)
			if !slices.Equal(mask, origMask) {
				t.Fatal("blur changed the mask")
			}
			m0, _ := meanVar(orig)
			m1, _ := meanVar(img)
			if math.Abs(m1-m0) > 1e-5 {
				t.Errorf("sigma %g, image %d: mean %.4f became %.4f", sigma, i, m0, m1)
			}
			var inner, innerOrig []float32
			for y := r; y < n-r; y++ {
				inner = append(inner, img[y*n+r:y*n+n-r]...)
				innerOrig = append(innerOrig, orig[y*n+r:y*n+n-r]...)
			}
			for k := range inner { // the noise's mean is 0: its variance is the mean square
				in += float64(innerOrig[k]) * float64(innerOrig[k])
				out += float64(inner[k]) * float64(inner[k])
			}
		}
		if got := out / in; math.Abs(got-want) > 0.05*want {
			t.Errorf("sigma %g: variance ratio %.4f, the kernel predicts %.4f", sigma, got, want)
		} else {
			t.Logf("sigma %g: variance ratio %.4f, the kernel predicts %.4f", sigma, got, want)
		}
		if sigma >= 1 { // the continuous Gaussian's
			if c := 1 / (4 * math.Pi * sigma * sigma); math.Abs(want-c) > 0.1*c {
				t.Errorf("sigma %g: the kernel's ratio %.4f, a Gaussian's %.4f", sigma, want, c)
			}
		}
	}
}

// TestAugmentGamma: the rescaled range's fixed points 0 and 1 (the
// image's min and max) stay, a value between follows x^g.
func TestAugmentGamma(t *testing.T) {
	const n = 16
	for _, g := range []float64{0.7, 1.5, 2} {
		img, mask := make([]float32, n*n), make([]uint8, n*n)
		for k := range img {
			img[k] = -1 + 3*float32(k)/float32(n*n-1) // -1 .. 2
		}
		orig := slices.Clone(img)
		Augment{Gamma: []float64{g, g}, PGamma: 1}.apply(augmentRand(3, 0, 0), img, mask, 1, 1, n, n)
		if img[0] != -1 || math.Abs(float64(img[n*n-1])-2) > 1e-5 {
			t.Errorf("gamma %g: the min and max became %v and %v", g, img[0], img[n*n-1])
		}
		for k, v := range orig {
			want := math.Pow((float64(v)+1)/3, g)*3 - 1
			if math.Abs(float64(img[k])-want) > 1e-5 {
				t.Fatalf("gamma %g: %v became %v, want %v", g, v, img[k], want)
			}
		}
	}
	// Drawn from [0.7, 1.5]: the min and max stay, the rest moves.
	img, mask := noiseImage(4, 1, n)
	lo, hi := slices.Min(img), slices.Max(img)
	orig := slices.Clone(img)
	Augment{Gamma: []float64{0.7, 1.5}, PGamma: 1}.apply(augmentRand(3, 0, 1), img, mask, 1, 1, n, n)
	if slices.Min(img) != lo || math.Abs(float64(slices.Max(img)-hi)) > 1e-5 || slices.Equal(img, orig) {
		t.Errorf("gamma: range [%v, %v] became [%v, %v]", lo, hi, slices.Min(img), slices.Max(img))
	}
}

// TestAugmentRotate: rotating a centred disc keeps its area (within the
// nearest sampling's pixels at its edge) and its centre; classes map only
// to themselves or to Ignore, which fills the corners brought in from
// outside.
func TestAugmentRotate(t *testing.T) {
	const n, r = 32, 9.0
	a := Augment{Rotate: 180, PRotate: 1}
	_, base := shapes(n, r, false)
	area := count(base, 1)
	ignored := 0
	for i := range 20 {
		img, mask := shapes(n, r, false)
		mask[0], img[0] = 3, 3 // a corner of another class, rotated out or kept
		a.apply(augmentRand(4, 0, i), img, mask, 1, 1, n, n)
		if got := count(mask, 1); math.Abs(float64(got-area)) > 0.06*float64(area) {
			t.Errorf("sample %d: the disc has %d pixels, had %d", i, got, area)
		}
		if mask[(n/2)*n+n/2] != 1 {
			t.Errorf("sample %d: the centre is class %d", i, mask[(n/2)*n+n/2])
		}
		onlyFrom(t, "rotation", []uint8{0, 1, 3}, mask)
		if count(mask, Ignore) > 0 {
			ignored++
		}
		for p, m := range mask { // the image: bilinear, 0 where the mask is ignored
			if m == Ignore && math.Abs(float64(img[p])) > 1 {
				t.Fatalf("sample %d: pixel %d outside the image is %v", i, p, img[p])
			}
		}
	}
	if ignored < 15 {
		t.Errorf("%d of 20 rotations brought in pixels from outside", ignored)
	}
}

// TestAugmentScale: scaling by s makes a centred square's area s^2 times
// (up to a pixel along its edge); shrinking brings in ignored pixels.
func TestAugmentScale(t *testing.T) {
	const n, r = 32, 6.0
	_, base := shapes(n, r, true)
	area := float64(count(base, 2))
	for _, s := range []float64{0.7, 0.8, 1.25, 1.4} {
		img, mask := shapes(n, r, true)
		Augment{Scale: []float64{s, s}, PScale: 1}.apply(augmentRand(5, 0, 0), img, mask, 1, 1, n, n)
		got, want := float64(count(mask, 2)), area*s*s
		if math.Abs(math.Sqrt(got)-math.Sqrt(want)) > 1 { // its side within a pixel
			t.Errorf("scale %g: the square has %g pixels, want %g", s, got, want)
		}
		onlyFrom(t, "scale", []uint8{0, 2}, mask)
		if ign := count(mask, Ignore); (s < 1) != (ign > 0) {
			t.Errorf("scale %g: %d pixels from outside", s, ign)
		}
	}
}

// TestAugmentElastic: alpha 0 is the identity; otherwise pixels move and
// keep their classes.
func TestAugmentElastic(t *testing.T) {
	const c, n = 2, 24
	img, mask := noiseImage(6, c, n)
	orig, origMask := slices.Clone(img), slices.Clone(mask)
	Augment{Elastic: []float64{0, 3}, PElastic: 1}.apply(augmentRand(6, 0, 0), img, mask, c, 1, n, n)
	if !slices.Equal(img, orig) || !slices.Equal(mask, origMask) {
		t.Fatal("elastic with alpha 0 changed the sample")
	}
	for i := range 5 {
		img, mask := noiseImage(7, c, n)
		Augment{Elastic: []float64{60, 3}, PElastic: 1}.apply(augmentRand(6, 0, i), img, mask, c, 1, n, n)
		if slices.Equal(img, orig) || slices.Equal(mask, origMask) {
			t.Fatalf("sample %d: elastic changed nothing", i)
		}
		onlyFrom(t, "elastic", []uint8{0, 1, 2, 3}, mask)
	}
	// The image moves with the mask: channel 0 is the class, sampled
	// bilinearly, so it lies within 1 of the nearest pixel's class.
	img, mask = shapes(n, 7, false)
	Augment{Elastic: []float64{80, 4}, PElastic: 1}.apply(augmentRand(8, 0, 0), img, mask, 1, 1, n, n)
	for p, m := range mask {
		if m != Ignore && math.Abs(float64(img[p])-float64(m)) > 1 {
			t.Fatalf("pixel %d: image %v, mask %d", p, img[p], m)
		}
	}
}

// TestAugmentBrightnessMulContrastRange: the multiplication scales the
// mean by the factor; nnU-Net's contrast keeps the mean where it clips
// nothing (f < 1) and keeps the range.
func TestAugmentBrightnessMulContrastRange(t *testing.T) {
	const n = 16
	img, mask := noiseImage(9, 1, n)
	for k := range img {
		img[k] += 0.5
	}
	orig := slices.Clone(img)
	m0, v0 := meanVar(orig)
	Augment{BrightnessMul: []float64{1.2, 1.2}, PBrightnessMul: 1}.apply(augmentRand(9, 0, 0), img, mask, 1, 1, n, n)
	if m1, _ := meanVar(img); math.Abs(m1-1.2*m0) > 1e-5 {
		t.Errorf("brightness_mul 1.2: mean %v became %v", m0, m1)
	}
	for i := range 50 { // drawn: one factor in [0.75, 1.25] for every pixel
		img := slices.Clone(orig)
		Augment{BrightnessMul: []float64{0.75, 1.25}, PBrightnessMul: 1}.apply(augmentRand(9, 1, i), img, mask, 1, 1, n, n)
		f := img[0] / orig[0]
		for k := range img {
			if math.Abs(float64(img[k]-f*orig[k])) > 1e-5 || f < 0.75 || f > 1.25 {
				t.Fatalf("sample %d: pixel %d: %v became %v (factor %v)", i, k, orig[k], img[k], f)
			}
		}
	}
	img = slices.Clone(orig)
	Augment{ContrastRange: []float64{0.6, 0.6}, PContrast: 1}.apply(augmentRand(9, 0, 0), img, mask, 1, 1, n, n)
	if m1, v1 := meanVar(img); math.Abs(m1-m0) > 1e-5 || math.Abs(v1-0.36*v0) > 1e-4 {
		t.Errorf("contrast_range 0.6: mean, variance %.4f, %.4f became %.4f, %.4f", m0, v0, m1, v1)
	}
	img = slices.Clone(orig)
	Augment{ContrastRange: []float64{2, 2}, PContrast: 1}.apply(augmentRand(9, 0, 0), img, mask, 1, 1, n, n)
	if slices.Min(img) != slices.Min(orig) || slices.Max(img) != slices.Max(orig) {
		t.Errorf("contrast_range 2: range [%v, %v] became [%v, %v]", slices.Min(orig), slices.Max(orig), slices.Min(img), slices.Max(img))
	}
}

// every is each of nnU-Net's augmentations alone, applied with
// probability p.
func every(p float64) map[string]Augment {
	return map[string]Augment{
		"rotate":         {Rotate: 30, PRotate: p},
		"scale":          {Scale: []float64{0.7, 1.4}, PScale: p},
		"elastic":        {Elastic: []float64{40, 3}, PElastic: p},
		"noise":          {Noise: 0.1, PNoise: p},
		"blur":           {Blur: []float64{0.5, 1}, PBlur: p},
		"brightness_mul": {BrightnessMul: []float64{0.75, 1.25}, PBrightnessMul: p},
		"contrast_range": {ContrastRange: []float64{0.75, 1.25}, PContrast: p},
		"gamma":          {Gamma: []float64{0.7, 1.5}, PGamma: p},
	}
}

// TestAugmentProbabilities: each augmentation changes a share of the
// samples close to its probability.
func TestAugmentProbabilities(t *testing.T) {
	const n, samples, p = 16, 600, 0.3
	img0, mask0 := noiseImage(10, 1, n)
	for name, a := range every(p) {
		changed := 0
		for i := range samples {
			img := slices.Clone(img0)
			a.apply(augmentRand(11, 0, i), img, slices.Clone(mask0), 1, 1, n, n)
			if !slices.Equal(img, img0) {
				changed++
			}
		}
		// std sqrt(p(1-p)/600) = 0.019: 4 of them.
		if got := float64(changed) / samples; math.Abs(got-p) > 0.075 {
			t.Errorf("%s with probability %g changed %.3f of the samples", name, p, got)
		}
	}
}

// TestAugmentNnUNetSeeded: all of them at once are the same for the same
// (seed, epoch, sample) and differ with the epoch and the sample; the
// defaults' probabilities with the new augmentations off leave a run's
// augmentation as it was.
func TestAugmentNnUNetSeeded(t *testing.T) {
	const c, n = 2, 16
	a := Augment{VFlip: true, Rot90: true, Brightness: 0.1, Contrast: 0.1}
	for _, e := range every(0.9) {
		a = merge(a, e)
	}
	run := func(a Augment, epoch, i int) ([]float32, []uint8) {
		img, mask := noiseImage(12, c, n)
		a.apply(augmentRand(13, epoch, i), img, mask, c, 1, n, n)
		return img, mask
	}
	img, mask := run(a, 0, 0)
	again, againMask := run(a, 0, 0)
	if !slices.Equal(img, again) || !slices.Equal(mask, againMask) {
		t.Error("the same (seed, epoch, sample) augmented twice differs")
	}
	if other, _ := run(a, 1, 0); slices.Equal(img, other) {
		t.Error("another epoch augments alike")
	}
	if other, _ := run(a, 0, 1); slices.Equal(img, other) {
		t.Error("another sample augments alike")
	}
	old := Augment{VFlip: true, Rot90: true, CropScale: []float64{0.5, 1}, Brightness: 0.2, Contrast: 0.2}
	now := DefaultAugment()
	now.VFlip, now.Rot90, now.CropScale, now.Brightness, now.Contrast = old.VFlip, old.Rot90, old.CropScale, old.Brightness, old.Contrast
	for i := range 10 {
		want, wantMask := run(old, 2, i)
		got, gotMask := run(now, 2, i)
		if !slices.Equal(got, want) || !slices.Equal(gotMask, wantMask) {
			t.Fatalf("sample %d: the defaults' probabilities changed the old augmentation", i)
		}
	}
}

// merge is a with b's nnU-Net augmentations set.
func merge(a, b Augment) Augment {
	if b.Rotate > 0 {
		a.Rotate, a.PRotate = b.Rotate, b.PRotate
	}
	if b.Scale != nil {
		a.Scale, a.PScale = b.Scale, b.PScale
	}
	if b.Elastic != nil {
		a.Elastic, a.PElastic = b.Elastic, b.PElastic
	}
	if b.Noise > 0 {
		a.Noise, a.PNoise = b.Noise, b.PNoise
	}
	if b.Blur != nil {
		a.Blur, a.PBlur = b.Blur, b.PBlur
	}
	if b.BrightnessMul != nil {
		a.BrightnessMul, a.PBrightnessMul = b.BrightnessMul, b.PBrightnessMul
	}
	if b.ContrastRange != nil {
		a.ContrastRange, a.PContrast = b.ContrastRange, b.PContrast
	}
	if b.Gamma != nil {
		a.Gamma, a.PGamma = b.Gamma, b.PGamma
	}
	return a
}

// TestAugmentNnUNetVolumes: the in-plane ones (rotation, scale, elastic,
// blur, multiplication) are drawn once per volume and made alike on every
// slice (a slice augmented alone with the same draws comes out the same);
// noise, contrast and gamma take a volume's channel as a whole, one
// draw for it (as an image of the slices stacked).
func TestAugmentNnUNetVolumes(t *testing.T) {
	const c, d, n = 2, 3, 12
	vol, mask := noiseImage(14, c*d, n) // c channels of d slices
	mask = append(append(mask, mask...), mask...)
	for k := range mask {
		mask[k] = uint8((k / 7) % 3)
	}
	inPlane := Augment{}
	for name, e := range every(1) {
		if name != "noise" && name != "contrast_range" && name != "gamma" {
			inPlane = merge(inPlane, e)
		}
	}
	for i := range 4 {
		got, gotMask := slices.Clone(vol), slices.Clone(mask)
		inPlane.apply(augmentRand(15, 0, i), got, gotMask, c, d, n, n)
		for z := range d {
			img := make([]float32, c*n*n)
			for ch := range c {
				copy(img[ch*n*n:], vol[(ch*d+z)*n*n:(ch*d+z+1)*n*n])
			}
			m := slices.Clone(mask[z*n*n : (z+1)*n*n])
			inPlane.apply(augmentRand(15, 0, i), img, m, c, 1, n, n)
			for ch := range c {
				if !slices.Equal(img[ch*n*n:(ch+1)*n*n], got[(ch*d+z)*n*n:(ch*d+z+1)*n*n]) {
					t.Fatalf("sample %d, slice %d, channel %d: the volume's augmentation differs from the slice's", i, z, ch)
				}
			}
			if !slices.Equal(m, gotMask[z*n*n:(z+1)*n*n]) {
				t.Fatalf("sample %d, slice %d: masks differ", i, z)
			}
		}
	}
	whole := merge(merge(every(1)["noise"], every(1)["contrast_range"]), every(1)["gamma"])
	for i := range 4 {
		got, gotMask := slices.Clone(vol), slices.Clone(mask)
		whole.apply(augmentRand(15, 1, i), got, gotMask, c, d, n, n)
		stacked := slices.Clone(vol)
		whole.apply(augmentRand(15, 1, i), stacked, slices.Clone(mask), c, 1, d*n, n)
		if !slices.Equal(got, stacked) || !slices.Equal(gotMask, mask) || slices.Equal(got, vol) {
			t.Fatalf("sample %d: the volume's noise, contrast and gamma are not one draw over the volume", i)
		}
	}
}

func TestAugmentNnUNetValidate(t *testing.T) {
	ok := DefaultAugment()
	for _, e := range every(0.5) {
		ok = merge(ok, e)
	}
	if err := ok.Validate(16, 16, false); err != nil {
		t.Fatalf("every augmentation: %v", err)
	}
	for key, f := range map[string]func(a *Augment){
		"rotate":           func(a *Augment) { a.Rotate = 200 },
		"scale":            func(a *Augment) { a.Scale = []float64{1.4, 0.7} },
		"elastic":          func(a *Augment) { a.Elastic = []float64{100, 0} },
		"blur":             func(a *Augment) { a.Blur = []float64{1} },
		"brightness_mul":   func(a *Augment) { a.BrightnessMul = []float64{-1, 1} },
		"contrast_range":   func(a *Augment) { a.ContrastRange = []float64{1.25, 0.75} },
		"gamma":            func(a *Augment) { a.Gamma = []float64{0, 1.5} },
		"noise":            func(a *Augment) { a.Noise = -0.1 },
		"p_rotate":         func(a *Augment) { a.PRotate = 1.5 },
		"p_scale":          func(a *Augment) { a.PScale = -0.1 },
		"p_elastic":        func(a *Augment) { a.PElastic = math.NaN() },
		"p_noise":          func(a *Augment) { a.PNoise = 0 }, // noise set: it would never apply
		"p_blur":           func(a *Augment) { a.PBlur = 2 },
		"p_brightness_mul": func(a *Augment) { a.PBrightnessMul = 0 },
		"p_contrast":       func(a *Augment) { a.PContrast = 1.01 },
		"p_gamma":          func(a *Augment) { a.PGamma = -1 },
	} {
		a := ok
		f(&a)
		if err := a.Validate(16, 16, false); err == nil || !strings.HasPrefix(err.Error(), "data.augment."+key+":") {
			t.Errorf("%s: %v", key, err)
		}
	}
	if err := DefaultAugment().Validate(16, 16, false); err != nil || DefaultAugment().Any() {
		t.Errorf("the defaults: %v, any %v", err, DefaultAugment().Any())
	}
}

// TestAugmentLoaderParallel: the loader augments a micro-batch's samples
// in parallel, each as apply alone makes it with its own draws.
func TestAugmentLoaderParallel(t *testing.T) {
	const c, n, k = 2, 16, 8
	a := DefaultAugment()
	for _, e := range every(0.7) {
		a = merge(a, e)
	}
	ds := &inMemory{n: k, c: c, h: n, w: n, classes: 4}
	for i := range k {
		img, mask := noiseImage(uint64(20+i), c, n)
		ds.images, ds.masks = append(ds.images, img...), append(ds.masks, mask...)
	}
	idx := []int{3, 0, 7, 5, 1, 6, 2, 4}
	got, err := Augmented(ds, idx, LoaderConfig{Seed: 9, Augment: a}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for b, i := range idx {
		img, mask := make([]float32, c*n*n), make([]uint8, n*n)
		if err := ds.Sample(i, img, mask); err != nil {
			t.Fatal(err)
		}
		a.apply(augmentRand(9, 2, i), img, mask, c, 1, n, n)
		gotImg, gotMask := make([]float32, c*n*n), make([]uint8, n*n)
		if err := got.Sample(b, gotImg, gotMask); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(img, gotImg) || !slices.Equal(mask, gotMask) {
			t.Fatalf("position %d (sample %d): the loader's augmentation differs from apply's", b, i)
		}
	}
}
