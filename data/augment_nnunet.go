package data

import (
	"math"
	"math/rand/v2"
	"slices"
)

// This file holds the augmentations of nnU-Net's recipe (batchgenerators'
// SpatialTransform, GaussianNoiseTransform, GaussianBlurTransform,
// BrightnessMultiplicativeTransform, ContrastAugmentationTransform and
// GammaTransform). Each draws from the sample's generator only when it is
// configured, so a run without them draws, and augments, as before.

// hit reports whether an augmentation of probability p applies to this
// sample (one draw).
func hit(rng *rand.Rand, p float64) bool { return rng.Float64() < p }

// nnUNetRange draws a factor in [lo, hi] as batchgenerators draws its
// scale, contrast and gamma: where the range spans 1, half the time in
// [lo, 1] and half in [1, hi], so shrinking is as likely as growing.
func nnUNetRange(rng *rand.Rand, lo, hi float64) float64 {
	if lo >= 1 || hi <= 1 {
		return uniform(rng, lo, hi)
	}
	if rng.IntN(2) == 0 {
		return uniform(rng, lo, 1)
	}
	return uniform(rng, 1, hi)
}

// warp draws the sample's rotation, scale and elastic deformation (each
// with its probability) and, where any applies, resamples the planes
// images (of h x w) bilinearly and the d mask planes nearest by one map
// from output to source pixels. Outside the source the image is 0 and the
// mask Ignore.
func (a Augment) warp(rng *rand.Rand, img []float32, mask []uint8, planes, d, h, w int) {
	var dy, dx []float32 // the elastic displacement, in pixels
	if len(a.Elastic) == 2 && hit(rng, a.PElastic) {
		alpha, sigma := a.Elastic[0], a.Elastic[1]
		kern := gaussKernel(sigma)
		dy, dx = make([]float32, h*w), make([]float32, h*w)
		tmp := make([]float32, h*w)
		for _, f := range [][]float32{dy, dx} {
			for k := range f {
				f[k] = float32(2*rng.Float64() - 1)
			}
			smooth(f, tmp, h, w, kern, false)
			for k := range f {
				f[k] *= float32(alpha)
			}
		}
	}
	cos, sin := 1.0, 0.0
	rotated := a.Rotate > 0 && hit(rng, a.PRotate)
	if rotated {
		t := uniform(rng, -a.Rotate, a.Rotate) * math.Pi / 180
		cos, sin = math.Cos(t), math.Sin(t)
	}
	inv := 1.0 // source coordinates per output pixel: 1/magnification
	scaled := len(a.Scale) == 2 && hit(rng, a.PScale)
	if scaled {
		inv = 1 / nnUNetRange(rng, a.Scale[0], a.Scale[1])
	}
	if dy == nil && !rotated && !scaled {
		return
	}
	hw := h * w
	type tap struct {
		at [4]int32 // source pixels, -1 outside
		wt [4]float32
	}
	taps, near := make([]tap, hw), make([]int32, hw)
	cy, cx := float64(h-1)/2, float64(w-1)/2
	for y := range h {
		for x := range w {
			p := y*w + x
			qy, qx := float64(y)-cy, float64(x)-cx
			if dy != nil {
				qy += float64(dy[p])
				qx += float64(dx[p])
			}
			if rotated {
				qy, qx = cos*qy-sin*qx, sin*qy+cos*qx
			}
			sy, sx := qy*inv+cy, qx*inv+cx
			ny, nx := int(math.Floor(sy+0.5)), int(math.Floor(sx+0.5))
			near[p] = -1
			if ny >= 0 && ny < h && nx >= 0 && nx < w {
				near[p] = int32(ny*w + nx)
			}
			y0, x0 := math.Floor(sy), math.Floor(sx)
			fy, fx := float32(sy-y0), float32(sx-x0)
			t := &taps[p]
			for k, o := range [4][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}} {
				yy, xx := int(y0)+o[0], int(x0)+o[1]
				t.at[k] = -1
				if yy >= 0 && yy < h && xx >= 0 && xx < w {
					t.at[k] = int32(yy*w + xx)
				}
			}
			t.wt = [4]float32{(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx}
		}
	}
	src := make([]float32, hw)
	for pl := range planes {
		plane := img[pl*hw : (pl+1)*hw]
		copy(src, plane)
		for p := range plane {
			t := &taps[p]
			var v float32
			for k, at := range t.at {
				if at >= 0 {
					v += t.wt[k] * src[at]
				}
			}
			plane[p] = v
		}
	}
	msrc := make([]uint8, hw)
	for z := range d {
		m := mask[z*hw : (z+1)*hw]
		copy(msrc, m)
		for p, at := range near {
			m[p] = Ignore
			if at >= 0 {
				m[p] = msrc[at]
			}
		}
	}
}

// intensity makes the noise, blur, multiplicative brightness and contrast
// of nnU-Net's recipe, each with its probability, on the c channels of d
// planes of h x w.
func (a Augment) intensity(rng *rand.Rand, img []float32, c, d, h, w int) {
	if a.Noise > 0 && hit(rng, a.PNoise) {
		std := math.Sqrt(uniform(rng, 0, a.Noise))
		for k := range img {
			img[k] += float32(std * rng.NormFloat64())
		}
	}
	if len(a.Blur) == 2 && hit(rng, a.PBlur) {
		if sigma := uniform(rng, a.Blur[0], a.Blur[1]); sigma > 0 {
			kern, tmp := gaussKernel(sigma), make([]float32, h*w)
			for p := range c * d {
				smooth(img[p*h*w:(p+1)*h*w], tmp, h, w, kern, true)
			}
		}
	}
	if len(a.BrightnessMul) == 2 && hit(rng, a.PBrightnessMul) {
		m := float32(uniform(rng, a.BrightnessMul[0], a.BrightnessMul[1]))
		for k := range img {
			img[k] *= m
		}
	}
	if len(a.ContrastRange) == 2 && hit(rng, a.PContrast) {
		f := nnUNetRange(rng, a.ContrastRange[0], a.ContrastRange[1])
		n := d * h * w
		for ch := range c { // a channel's mean and range over the whole image or volume
			plane := img[ch*n : (ch+1)*n]
			var mean float64
			for _, v := range plane {
				mean += float64(v)
			}
			mean /= float64(n)
			lo, hi := slices.Min(plane), slices.Max(plane)
			for k, v := range plane {
				plane[k] = min(max(float32((float64(v)-mean)*f+mean), lo), hi)
			}
		}
	}
}

// gamma is batchgenerators' augment_gamma without retain_stats: plane
// rescaled to [0, 1] by its min and max, raised to the power g, scaled
// back.
func gamma(plane []float32, g float64) {
	lo, hi := slices.Min(plane), slices.Max(plane)
	r := float64(hi) - float64(lo)
	for k, v := range plane {
		plane[k] = float32(math.Pow((float64(v)-float64(lo))/(r+1e-7), g)*r + float64(lo))
	}
}

// gaussKernel is a normalized Gaussian of sigma truncated at 4 sigma, as
// scipy's gaussian_filter: 2r+1 taps, r = int(4 sigma + 0.5).
func gaussKernel(sigma float64) []float32 {
	r := int(4*sigma + 0.5)
	k64 := make([]float64, 2*r+1)
	var sum float64
	for i := range k64 {
		x := float64(i - r)
		k64[i] = math.Exp(-x * x / (2 * sigma * sigma))
		sum += k64[i]
	}
	k := make([]float32, len(k64))
	for i, v := range k64 {
		k[i] = float32(v / sum)
	}
	return k
}

// smooth convolves an h x w plane with kern along x, then y (tmp is h*w
// scratch). Beyond the borders the plane is mirrored (reflect: scipy's
// "reflect", d c b a | a b c d) or zero.
func smooth(plane, tmp []float32, h, w int, kern []float32, reflect bool) {
	r := len(kern) / 2
	// ext[i] is the source index of offset i - r along an axis of n, -1 for 0.
	ext := func(n int) []int {
		e := make([]int, n+2*r)
		for i := range e {
			j := i - r
			switch {
			case j >= 0 && j < n:
				e[i] = j
			case !reflect:
				e[i] = -1
			default:
				m := j % (2 * n)
				if m < 0 {
					m += 2 * n
				}
				if m >= n {
					m = 2*n - 1 - m
				}
				e[i] = m
			}
		}
		return e
	}
	ex, ey := ext(w), ext(h)
	for y := range h {
		row, out := plane[y*w:(y+1)*w], tmp[y*w:(y+1)*w]
		for x := range w {
			var v float32
			for j, s := range ex[x : x+len(kern)] {
				if s >= 0 {
					v += kern[j] * row[s]
				}
			}
			out[x] = v
		}
	}
	clear(plane)
	for y := range h { // row by row: the taps' rows of tmp, each whole
		out := plane[y*w : (y+1)*w]
		for j, s := range ey[y : y+len(kern)] {
			if s < 0 {
				continue
			}
			k := kern[j]
			for x, v := range tmp[s*w : (s+1)*w] {
				out[x] += k * v
			}
		}
	}
}
