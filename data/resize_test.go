package data

import (
	"errors"
	"fmt"
	"image"
	"math"
	"strings"
	"testing"
)

// pictureSource is an ImageSource for tests: Image(i) comes from pics,
// Sample normalizes it like Resize does.
type pictureSource struct {
	n, h, w, c, classes int
	pics                func(i int) (*image.RGBA, *image.Gray, error)
}

func (p *pictureSource) Len() int         { return p.n }
func (p *pictureSource) Channels() int    { return p.c }
func (p *pictureSource) Classes() int     { return p.classes }
func (p *pictureSource) Size() (h, w int) { return p.h, p.w }
func (p *pictureSource) Image(i int) (*image.RGBA, *image.Gray, error) {
	if i < 0 || i >= p.n {
		return nil, nil, fmt.Errorf("data: sample %d out of range [0, %d)", i, p.n)
	}
	return p.pics(i)
}
func (p *pictureSource) Sample(i int, img []float32, mask []uint8) error {
	if err := checkSample(p, i, img, mask); err != nil {
		return err
	}
	m, g, err := p.Image(i)
	if err != nil {
		return err
	}
	normalize8(m, p.c, img)
	copy(mask, g.Pix)
	return nil
}

// patterned returns an h x w source whose sample i has pseudo-random 8-bit
// channels and a blocky mask over the values in classes (Ignore allowed).
func patterned(n, h, w int, classes []uint8) *pictureSource {
	return &pictureSource{n: n, h: h, w: w, c: 3, classes: 8, pics: func(i int) (*image.RGBA, *image.Gray, error) {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		mask := image.NewGray(image.Rect(0, 0, w, h))
		for p := range w * h {
			z := mix64(uint64(i)<<32 | uint64(p))
			img.Pix[4*p], img.Pix[4*p+1], img.Pix[4*p+2], img.Pix[4*p+3] = uint8(z), uint8(z>>8), uint8(z>>16), 255
			x, y := p%w, p/w
			mask.Pix[p] = classes[int(mix64(uint64(i)<<32|uint64(x/3)<<16|uint64(y/2))%uint64(len(classes)))]
		}
		return img, mask, nil
	}}
}

func mustResize(t testing.TB, src ImageSource, h, w int) Dataset {
	t.Helper()
	r, err := Resize(src, h, w)
	if err != nil {
		t.Fatalf("Resize(%d, %d): %v", h, w, err)
	}
	return r
}

// normalized8 is the reference normalization of an 8-bit picture.
func normalized8(m *image.RGBA, c int) []float32 {
	n := m.Rect.Dx() * m.Rect.Dy()
	out := make([]float32, c*n)
	for ch := range c {
		for p := range n {
			out[ch*n+p] = (float32(m.Pix[4*p+ch])/255 - 0.5) / 0.25
		}
	}
	return out
}

func TestResizeSizes(t *testing.T) {
	syn := mustSynthetic(t, SyntheticConfig{Count: 5, Size: 64, Seed: 2})
	tests := []struct {
		name string
		src  ImageSource
		h, w int
	}{
		{"down 64->32", syn, 32, 32},
		{"up 64->100", syn, 100, 100},
		{"non-square 64->24x80", syn, 24, 80},
		{"odd ratio 64->17", syn, 17, 17},
		{"one pixel", syn, 1, 1},
		{"one row", syn, 1, 50},
		{"same size", syn, 64, 64},
		{"non-square source", patterned(3, 20, 30, []uint8{0, 1}), 45, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustResize(t, tt.src, tt.h, tt.w)
			if h, w := r.Size(); h != tt.h || w != tt.w {
				t.Fatalf("Size() = %dx%d, want %dx%d", h, w, tt.h, tt.w)
			}
			if r.Len() != tt.src.Len() || r.Channels() != tt.src.Channels() || r.Classes() != tt.src.Classes() {
				t.Fatalf("Len/Channels/Classes %d/%d/%d, source %d/%d/%d",
					r.Len(), r.Channels(), r.Classes(), tt.src.Len(), tt.src.Channels(), tt.src.Classes())
			}
			img := make([]float32, tt.src.Channels()*tt.h*tt.w)
			mask := make([]uint8, tt.h*tt.w)
			for i := range r.Len() {
				for k := range img {
					img[k] = float32(math.NaN()) // every value must be written
				}
				if err := r.Sample(i, img, mask); err != nil {
					t.Fatalf("Sample(%d): %v", i, err)
				}
				for k, v := range img {
					if !(v >= -2 && v <= 2) {
						t.Fatalf("sample %d value %d = %v outside [-2, 2]", i, k, v)
					}
				}
				for _, m := range mask {
					if int(m) >= r.Classes() && m != Ignore {
						t.Fatalf("sample %d mask value %d not below %d classes", i, m, r.Classes())
					}
				}
			}
			// Buffers of the source's size (or any other) are rejected.
			if tt.h != 64 || tt.w != 64 {
				sImg, sMask := buffers(tt.src)
				if err := r.Sample(0, sImg, sMask); err == nil {
					t.Fatal("Sample accepted buffers of the source's size")
				}
			}
			if err := r.Sample(0, img[1:], mask); err == nil || !strings.Contains(err.Error(), "image buffer") {
				t.Fatalf("short image buffer: %v", err)
			}
			if err := r.Sample(0, img, append(mask[:len(mask):len(mask)], 0)); err == nil || !strings.Contains(err.Error(), "mask buffer") {
				t.Fatalf("long mask buffer: %v", err)
			}
		})
	}
}

// TestResizeMaskNearest checks that resized masks hold only values of the
// source mask (Ignore included: never blended), and that resized images stay
// within each channel's source range (bilinear weights are never negative).
func TestResizeMaskNearest(t *testing.T) {
	classes := []uint8{0, 3, 7, Ignore}
	src := patterned(4, 30, 40, classes)
	syn := mustSynthetic(t, SyntheticConfig{Count: 8, Size: 48, Seed: 13})
	tests := []struct {
		name string
		src  ImageSource
		h, w int
	}{
		{"pattern down", src, 15, 20},
		{"pattern down odd", src, 11, 13},
		{"pattern up", src, 67, 91},
		{"pattern mixed", src, 60, 7},
		{"synthetic down", syn, 20, 20},
		{"synthetic up", syn, 97, 97},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustResize(t, tt.src, tt.h, tt.w)
			c := tt.src.Channels()
			for i := range r.Len() {
				srcImg, srcMask, err := tt.src.Image(i)
				if err != nil {
					t.Fatal(err)
				}
				var present [256]bool
				for _, m := range srcMask.Pix {
					present[m] = true
				}
				img, mask := sample(t, r, i)
				for p, m := range mask {
					if !present[m] {
						t.Fatalf("sample %d pixel %d: mask value %d not in the source mask", i, p, m)
					}
				}
				for ch := range c {
					lo, hi := uint8(255), uint8(0)
					for p := 0; p < len(srcImg.Pix); p += 4 {
						lo, hi = min(lo, srcImg.Pix[p+ch]), max(hi, srcImg.Pix[p+ch])
					}
					flo, fhi := (float32(lo)/255-Mean)/Std, (float32(hi)/255-Mean)/Std
					for _, v := range img[ch*tt.h*tt.w : (ch+1)*tt.h*tt.w] {
						if v < flo || v > fhi {
							t.Fatalf("sample %d channel %d: value %v outside the source range [%v, %v]", i, ch, v, flo, fhi)
						}
					}
				}
			}
		})
	}
}

// TestResizeClassShare checks that downscaling 64->32 keeps each class's
// share of the pixels, per sample and over the set.
func TestResizeClassShare(t *testing.T) {
	tests := []struct {
		name      string
		cfg       SyntheticConfig
		h, w      int
		perSample float64 // max |share difference| of one class in one sample
		overall   float64 // the same over all samples together
	}{
		{"64->32", SyntheticConfig{Count: 64, Size: 64, Seed: 3}, 32, 32, 0.03, 0.005},
		{"64->32 two classes", SyntheticConfig{Count: 64, Size: 64, Classes: 2, Seed: 8}, 32, 32, 0.03, 0.005},
		{"64->40", SyntheticConfig{Count: 64, Size: 64, Seed: 5}, 40, 40, 0.03, 0.005},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSynthetic(t, tt.cfg)
			r := mustResize(t, s, tt.h, tt.w)
			k := s.Classes()
			totSrc, totDst := make([]float64, k), make([]float64, k)
			worst := 0.0
			for i := range s.Len() {
				_, sm := sample(t, s, i)
				_, dm := sample(t, r, i)
				cs, cd := make([]float64, k), make([]float64, k)
				for _, m := range sm {
					cs[m]++
				}
				for _, m := range dm {
					cd[m]++
				}
				for c := range k {
					a, b := cs[c]/float64(len(sm)), cd[c]/float64(len(dm))
					totSrc[c] += a
					totDst[c] += b
					worst = max(worst, math.Abs(a-b))
					if math.Abs(a-b) > tt.perSample {
						t.Errorf("sample %d class %d: share %.4f after resize, %.4f before", i, c, b, a)
					}
				}
			}
			for c := range k {
				a, b := totSrc[c]/float64(s.Len()), totDst[c]/float64(s.Len())
				if math.Abs(a-b) > tt.overall {
					t.Errorf("class %d: mean share %.4f after resize, %.4f before", c, b, a)
				}
			}
			t.Logf("worst per-sample share difference %.4f", worst)
		})
	}
}

// TestResizeIdentity: resizing to the source's own size gives the source's
// 8-bit pictures normalized, bit for bit, and for Synthetic its masks
// exactly and its Sample values within 8-bit rounding.
func TestResizeIdentity(t *testing.T) {
	tests := []struct {
		name string
		src  ImageSource
	}{
		{"synthetic 64", mustSynthetic(t, SyntheticConfig{Count: 6, Size: 64, Seed: 1})},
		{"synthetic 17 noisy", mustSynthetic(t, SyntheticConfig{Count: 6, Size: 17, Seed: 4, Noise: 0.5})},
		{"pattern 20x30", patterned(3, 20, 30, []uint8{0, 1, 2, Ignore})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, w := tt.src.Size()
			r := mustResize(t, tt.src, h, w)
			const tol = 0.5/255/Std + 1e-6
			for i := range r.Len() {
				img, mask := sample(t, r, i)
				pic, pmask, err := tt.src.Image(i)
				if err != nil {
					t.Fatal(err)
				}
				if !equalSample(img, mask, normalized8(pic, tt.src.Channels()), pmask.Pix) {
					t.Fatalf("sample %d differs from the source's normalized 8-bit picture", i)
				}
				sImg, sMask := sample(t, tt.src, i)
				if string(sMask) != string(mask) {
					t.Fatalf("sample %d: mask differs from the source's Sample", i)
				}
				for k := range img {
					if d := math.Abs(float64(img[k] - sImg[k])); d > tol {
						t.Fatalf("sample %d value %d: %v, source Sample %v (diff %v > %v)", i, k, img[k], sImg[k], d, tol)
					}
				}
				// The resized pictures are copies: changing them leaves the
				// source alone.
				ri, rm, err := r.(ImageSource).Image(i)
				if err != nil {
					t.Fatal(err)
				}
				ri.Pix[0]++
				rm.Pix[0]++
				if img2, mask2 := sample(t, r, i); !equalSample(img2, mask2, img, mask) {
					t.Fatalf("sample %d changed after editing a returned picture", i)
				}
			}
		})
	}
}

// TestResizeUpscale: a 2x upscale repeats each mask pixel in a 2x2 block,
// keeps a flat image flat, and interpolates between neighbours.
func TestResizeUpscale(t *testing.T) {
	flat := &pictureSource{n: 2, h: 9, w: 7, c: 3, classes: 2, pics: func(i int) (*image.RGBA, *image.Gray, error) {
		img := image.NewRGBA(image.Rect(0, 0, 7, 9))
		for p := 0; p < len(img.Pix); p += 4 {
			img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = 40+uint8(i), 128, 201, 255
		}
		return img, image.NewGray(image.Rect(0, 0, 7, 9)), nil
	}}
	// ramp: columns 0..w-1 with red 0, 10, 20, ...
	ramp := &pictureSource{n: 1, h: 4, w: 6, c: 1, classes: 2, pics: func(int) (*image.RGBA, *image.Gray, error) {
		img := image.NewRGBA(image.Rect(0, 0, 6, 4))
		for p := range 24 {
			img.Pix[4*p], img.Pix[4*p+3] = uint8(10*(p%6)), 255
		}
		return img, image.NewGray(image.Rect(0, 0, 6, 4)), nil
	}}
	tests := []struct {
		name  string
		src   ImageSource
		scale int
	}{
		{"synthetic 32 x2", mustSynthetic(t, SyntheticConfig{Count: 4, Size: 32, Seed: 6}), 2},
		{"synthetic 16 x3", mustSynthetic(t, SyntheticConfig{Count: 4, Size: 16, Seed: 7}), 3},
		{"pattern x2", patterned(2, 10, 14, []uint8{0, 1, 5, Ignore}), 2},
		{"flat x2", flat, 2},
		{"flat x3", flat, 3},
		{"ramp x2", ramp, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh, sw := tt.src.Size()
			h, w := sh*tt.scale, sw*tt.scale
			r := mustResize(t, tt.src, h, w)
			for i := range r.Len() {
				srcImg, srcMask := sample(t, tt.src, i)
				img, mask := sample(t, r, i)
				for y := range h {
					for x := range w {
						if got, want := mask[y*w+x], srcMask[(y/tt.scale)*sw+x/tt.scale]; got != want {
							t.Fatalf("sample %d mask (%d, %d) = %d, want %d from source (%d, %d)", i, y, x, got, want, y/tt.scale, x/tt.scale)
						}
					}
				}
				switch tt.src {
				case flat:
					for k, v := range img {
						if want := srcImg[(k/(h*w))*sh*sw]; v != want {
							t.Fatalf("flat sample %d value %d = %v, want %v", i, k, v, want)
						}
					}
				case ramp:
					// Output column x samples the source at (x+0.5)/2-0.5:
					// inside the image, red is 10 times that, rounded.
					for y := range h {
						for x := 1; x < w-1; x++ {
							want := (float32(math.Round(10*((float64(x)+0.5)/2-0.5)))/255 - Mean) / Std
							if got := img[y*w+x]; math.Abs(float64(got-want)) > 1.01/255/Std {
								t.Fatalf("ramp (%d, %d) = %v, want %v", y, x, got, want)
							}
						}
					}
				}
			}
		})
	}
}

func TestResizeDeterministic(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 12, Size: 40, Seed: 17, Noise: 0.2})
	tests := []struct{ h, w int }{{20, 20}, {57, 33}, {40, 40}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d", tt.h, tt.w), func(t *testing.T) {
			r := mustResize(t, s, tt.h, tt.w)
			refImg := make([][]float32, r.Len())
			refMask := make([][]uint8, r.Len())
			for i := range r.Len() {
				refImg[i], refMask[i] = sample(t, r, i)
			}
			r2 := mustResize(t, mustSynthetic(t, s.Config()), tt.h, tt.w)
			for i := r.Len() - 1; i >= 0; i-- { // reverse order, fresh datasets
				for _, ds := range []Dataset{r, r2} {
					img, mask := sample(t, ds, i)
					if !equalSample(img, mask, refImg[i], refMask[i]) {
						t.Fatalf("sample %d differs on a later call", i)
					}
				}
			}
			for i := 1; i < r.Len(); i++ {
				if equalSample(refImg[i], refMask[i], refImg[0], refMask[0]) {
					t.Fatalf("sample %d equals sample 0", i)
				}
			}
		})
	}
}

// TestResizeFillBatch: parallel batch filling gives the same as Sample one
// at a time (run with -race to check for data races).
func TestResizeFillBatch(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 40, Size: 48, Seed: 23})
	tests := []struct {
		name string
		src  ImageSource
		h, w int
	}{
		{"down", s, 24, 24},
		{"up non-square", s, 64, 80},
		{"identity", s, 48, 48},
		{"pattern", patterned(40, 12, 18, []uint8{0, 2, Ignore}), 25, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustResize(t, tt.src, tt.h, tt.w)
			idx := Shuffle([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 3, 3, 39, 38, 20, 21, 22, 23, 24, 25, 26, 27}, 9, 1)
			c, px := r.Channels()*tt.h*tt.w, tt.h*tt.w
			images := make([]float32, len(idx)*c)
			masks := make([]uint8, len(idx)*px)
			for range 3 {
				if err := FillBatch(r, idx, images, masks); err != nil {
					t.Fatal(err)
				}
				for b, i := range idx {
					img, mask := sample(t, r, i)
					if !equalSample(images[b*c:(b+1)*c], masks[b*px:(b+1)*px], img, mask) {
						t.Fatalf("batch position %d (sample %d) differs from Sample", b, i)
					}
				}
			}
			err := FillBatch(r, []int{0, r.Len()}, make([]float32, 2*c), make([]uint8, 2*px))
			if err == nil || !strings.Contains(err.Error(), "batch position 1") || !strings.Contains(err.Error(), "out of range") {
				t.Fatalf("out-of-range index: %v", err)
			}
		})
	}
}

func TestResizeErrors(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 3, Size: 16})
	tests := []struct {
		name string
		src  ImageSource
		h, w int
		want []string
	}{
		{"zero height", s, 0, 16, []string{"data.resize", "[0, 16]", "at least 1"}},
		{"zero width", s, 16, 0, []string{"data.resize", "[16, 0]"}},
		{"negative", s, -3, -4, []string{"data.resize", "[-3, -4]"}},
		{"too tall", s, MaxResizeSize + 1, 8, []string{"data.resize", "16385", "at most 16384"}},
		{"too wide", s, 8, math.MaxInt, []string{"data.resize"}},
		{"no source", nil, 8, 8, []string{"data.resize", "no source"}},
		{"four channels", &pictureSource{n: 1, h: 4, w: 4, c: 4, classes: 2}, 8, 8, []string{"data.resize", "4 channels"}},
		{"zero channels", &pictureSource{n: 1, h: 4, w: 4, c: 0, classes: 2}, 8, 8, []string{"data.resize", "0 channels"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Resize(tt.src, tt.h, tt.w)
			if err == nil || r != nil {
				t.Fatalf("Resize(%d, %d) = %v, %v; want an error", tt.h, tt.w, r, err)
			}
			if !strings.HasPrefix(err.Error(), "data.resize: ") {
				t.Errorf("error %q does not start with data.resize", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	// Errors of Sample: the index, the buffers, and what the source gives.
	broken := errors.New("unreadable file")
	bad := &pictureSource{n: 3, h: 8, w: 8, c: 3, classes: 2, pics: func(i int) (*image.RGBA, *image.Gray, error) {
		switch i {
		case 0:
			return nil, nil, broken
		case 1:
			return image.NewRGBA(image.Rect(0, 0, 8, 8)), image.NewGray(image.Rect(0, 0, 8, 7)), nil
		}
		return image.NewRGBA(image.Rect(0, 0, 0, 0)), image.NewGray(image.Rect(0, 0, 0, 0)), nil
	}}
	rs := mustResize(t, s, 8, 8)
	rb := mustResize(t, bad, 4, 4)
	img, mask := make([]float32, 3*64), make([]uint8, 64)
	bImg, bMask := make([]float32, 3*16), make([]uint8, 16)
	sampleTests := []struct {
		name string
		ds   Dataset
		i    int
		img  []float32
		mask []uint8
		want string
		is   error
	}{
		{"negative index", rs, -1, img, mask, "out of range", nil},
		{"index past end", rs, 3, img, mask, "out of range [0, 3)", nil},
		{"short image", rs, 0, img[1:], mask, "image buffer", nil},
		{"source-sized image", rs, 0, make([]float32, 3*16*16), make([]uint8, 16*16), "image buffer", nil},
		{"nil mask", rs, 0, img, nil, "mask buffer", nil},
		{"source error", rb, 0, bImg, bMask, "unreadable file", broken},
		{"mask size differs", rb, 1, bImg, bMask, "image is 8x8 and mask 7x8", nil},
		{"empty image", rb, 2, bImg, bMask, "same nonzero size", nil},
	}
	for _, tt := range sampleTests {
		t.Run("Sample "+tt.name, func(t *testing.T) {
			err := tt.ds.Sample(tt.i, tt.img, tt.mask)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Sample: got %v, want an error containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("Sample: error %v does not wrap %v", err, tt.is)
			}
		})
	}
}

// TestResizeVaryingSource: each sample is scaled from its own bounds, so a
// source whose pictures differ in size (and need not start at (0, 0))
// yields samples of one size.
func TestResizeVaryingSource(t *testing.T) {
	src := &pictureSource{n: 4, h: 0, w: 0, c: 3, classes: 3, pics: func(i int) (*image.RGBA, *image.Gray, error) {
		b := image.Rect(5, 7, 5+10+7*i, 7+6+3*i)
		img, mask := image.NewRGBA(b), image.NewGray(b)
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				cls := uint8(0)
				if x-b.Min.X >= b.Dx()/2 {
					cls = 2 // right half class 2, red
				}
				mask.Pix[mask.PixOffset(x, y)] = cls
				o := img.PixOffset(x, y)
				img.Pix[o], img.Pix[o+3] = 120*cls, 255
			}
		}
		return img, mask, nil
	}}
	r := mustResize(t, src, 12, 16)
	for i := range r.Len() {
		img, mask := sample(t, r, i)
		for y := range 12 {
			for x := range 16 {
				want := uint8(0)
				if x >= 8 {
					want = 2
				}
				if mask[y*16+x] != want {
					t.Fatalf("sample %d mask (%d, %d) = %d, want %d", i, y, x, mask[y*16+x], want)
				}
			}
		}
		// Far from the class edge the image is flat.
		if v, want := img[0], float32((0.0-Mean)/Std); v != want {
			t.Fatalf("sample %d red at (0, 0) = %v, want %v", i, v, want)
		}
		if v, want := img[15], (float32(240)/255-Mean)/Std; v != want {
			t.Fatalf("sample %d red at (0, 15) = %v, want %v", i, v, want)
		}
	}
}

// TestResizeChained: a resized set is an ImageSource itself.
func TestResizeChained(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 2, Size: 32, Seed: 1})
	r := mustResize(t, s, 48, 48)
	rr := mustResize(t, r.(ImageSource), 32, 32)
	if h, w := rr.Size(); h != 32 || w != 32 {
		t.Fatalf("Size() = %dx%d", h, w)
	}
	if got := fmt.Sprint(rr); !strings.Contains(got, "synthetic shapes") || !strings.Contains(got, "resized to 48x48 resized to 32x32") {
		t.Fatalf("String() = %q", got)
	}
	sample(t, rr, 1)
}

func BenchmarkResize(b *testing.B) {
	s := mustSynthetic(b, SyntheticConfig{})
	for _, size := range []int{32, 128} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			r := mustResize(b, s, size, size)
			img, mask := buffers(r)
			for b.Loop() {
				if err := r.Sample(3, img, mask); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
