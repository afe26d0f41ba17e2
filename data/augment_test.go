package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestAugmentTransformsImageAndMaskTogether: on a sample whose image
// encodes its own mask (one channel equals the class), every augmentation
// moves the mask exactly as the image (the crop: the mask takes one of the
// classes the image blends there); the choices are the same for the same
// (seed, epoch, sample) and change with them.
func TestAugmentTransformsImageAndMaskTogether(t *testing.T) {
	const c, n = 2, 11 // odd, square
	base := func() ([]float32, []uint8) {
		img, mask := make([]float32, c*n*n), make([]uint8, n*n)
		for p := range n * n {
			mask[p] = uint8((p*7 + 2*(p/n)) % 3) // (x + y) % 3: moved by every flip and rotation
			img[p] = float32(mask[p])            // channel 0: the class
			img[n*n+p] = float32(p) / (n * n)    // channel 1: the position
		}
		return img, mask
	}
	for _, tc := range []struct {
		name string
		a    Augment
	}{
		{"vflip", Augment{VFlip: true}},
		{"rot90", Augment{Rot90: true}},
		{"flips and rotations", Augment{VFlip: true, Rot90: true}},
	} {
		changed := false
		for i := range 20 {
			img, mask := base()
			orig := slices.Clone(mask)
			tc.a.apply(augmentRand(5, 1, i), img, mask, c, 1, n, n)
			for p := range n * n {
				if img[p] != float32(mask[p]) {
					t.Fatalf("%s, sample %d: pixel %d: image class %v, mask %d", tc.name, i, p, img[p], mask[p])
				}
			}
			changed = changed || !slices.Equal(orig, mask)
			again, againMask := base()
			tc.a.apply(augmentRand(5, 1, i), again, againMask, c, 1, n, n)
			if !slices.Equal(againMask, mask) || !slices.Equal(again, img) {
				t.Fatalf("%s, sample %d: not the same twice", tc.name, i)
			}
		}
		if !changed {
			t.Errorf("%s changed no sample in 20", tc.name)
		}
	}
	// A crop: the mask's class at a pixel is one the image blends there
	// (channel 0 lies between the classes of its bilinear neighbours).
	a := Augment{CropScale: []float64{0.3, 0.6}}
	for i := range 10 {
		img, mask := base()
		a.apply(augmentRand(9, 0, i), img, mask, c, 1, n, n)
		for p := range n * n {
			if math.Abs(float64(img[p])-float64(mask[p])) > 2 {
				t.Fatalf("crop, sample %d, pixel %d: image %v, mask %d", i, p, img[p], mask[p])
			}
		}
	}
	// Jitter: the plane's mean moves by the brightness, its spread by the contrast.
	j := Augment{Brightness: 0.5, Contrast: 0.4}
	img, mask := base()
	orig := slices.Clone(img)
	j.apply(augmentRand(1, 2, 3), img, mask, c, 1, n, n)
	if slices.Equal(img, orig) || !slices.Equal(mask, func() []uint8 { _, m := base(); return m }()) {
		t.Error("jitter changed nothing, or changed the mask")
	}
}

func TestAugmentValidate(t *testing.T) {
	for _, a := range []Augment{
		{CropScale: []float64{0.5}},
		{CropScale: []float64{0, 1}},
		{CropScale: []float64{0.8, 0.5}},
		{CropScale: []float64{0.5, 1.5}},
		{Brightness: -1},
		{Contrast: 1},
	} {
		if err := a.Validate(8, 8, false); err == nil {
			t.Errorf("%+v accepted", a)
		}
	}
	if err := (Augment{Rot90: true}).Validate(8, 12, false); err == nil {
		t.Error("rot90 of 8x12 images accepted")
	}
}

// TestAugmentVolumes: a volume's augmentation draws each choice once and
// makes it on every slice alike (a slice augmented alone with the same
// draws comes out the same); zflip reverses the slices; zflip is refused
// for images.
func TestAugmentVolumes(t *testing.T) {
	const c, d, n = 2, 3, 8
	a := Augment{VFlip: true, Rot90: true, CropScale: []float64{0.5, 0.9}}
	rng := rand.New(rand.NewPCG(1, 2))
	vol, mask := make([]float32, c*d*n*n), make([]uint8, d*n*n)
	for k := range vol {
		vol[k] = rng.Float32()
	}
	for k := range mask {
		mask[k] = uint8(rng.IntN(4))
	}
	for i := range 8 {
		got, gotMask := slices.Clone(vol), slices.Clone(mask)
		a.apply(augmentRand(7, 0, i), got, gotMask, c, d, n, n)
		for z := range d {
			img := make([]float32, c*n*n)
			for ch := range c {
				copy(img[ch*n*n:], vol[(ch*d+z)*n*n:(ch*d+z+1)*n*n])
			}
			m := slices.Clone(mask[z*n*n : (z+1)*n*n])
			a.apply(augmentRand(7, 0, i), img, m, c, 1, n, n)
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
	flipped := 0
	for i := range 16 {
		got, gotMask := slices.Clone(vol), slices.Clone(mask)
		Augment{ZFlip: true}.apply(augmentRand(7, 0, i), got, gotMask, c, d, n, n)
		if slices.Equal(got, vol) {
			continue
		}
		flipped++
		for z := range d {
			if !slices.Equal(got[z*n*n:(z+1)*n*n], vol[(d-1-z)*n*n:(d-z)*n*n]) || !slices.Equal(gotMask[z*n*n:(z+1)*n*n], mask[(d-1-z)*n*n:(d-z)*n*n]) {
				t.Fatalf("sample %d: slice %d is not slice %d", i, z, d-1-z)
			}
		}
	}
	if flipped == 0 || flipped == 16 {
		t.Errorf("zflip mirrored %d of 16 samples", flipped)
	}
	if err := (Augment{ZFlip: true}).Validate(8, 8, false); err == nil || !strings.HasPrefix(err.Error(), "data.augment.zflip:") {
		t.Errorf("zflip of images: %v", err)
	}
}
