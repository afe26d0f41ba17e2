package data

import (
	"image"
	"image/color"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
)

// TestDecodeCostPerPixel: reading a sample allocates what its decoders'
// pictures take beside the float tensor and mask it becomes, no more: 10
// bytes a pixel for a 16-bit RGB image with a 16-bit gray mask (the image's
// 8, converted in place, made floats before the mask's 2 are decoded, so 8
// are held at most), 5 for 8-bit RGB with a palette mask; it was 23 and 14.
// The files are streamed, not read whole, and no second RGBA picture, value
// array or class picture is made.
func TestDecodeCostPerPixel(t *testing.T) {
	kinds := []struct {
		name        string
		pictures    func(w, h int) (image.Image, image.Image)
		maxPerPixel float64
	}{
		{"16-bit RGB, 16-bit gray mask", func(w, h int) (image.Image, image.Image) {
			rng := rand.New(rand.NewPCG(1, 2))
			img, mask := image.NewRGBA64(image.Rect(0, 0, w, h)), image.NewGray16(image.Rect(0, 0, w, h))
			for y := range h {
				for x := range w {
					v := uint16(rng.IntN(1 << 16))
					img.SetRGBA64(x, y, color.RGBA64{v, v / 2, ^v, 0xffff})
					mask.SetGray16(x, y, color.Gray16{uint16(x % 2 * 1000)})
				}
			}
			return img, mask
		}, 10},
		{"8-bit RGB, palette mask", func(w, h int) (image.Image, image.Image) {
			img, _ := scene(1, h, w, 2)
			mask := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Gray{0}, color.Gray{255}})
			for k := range mask.Pix {
				mask.Pix[k] = uint8(k % 2)
			}
			return img, mask
		}, 5},
	}
	for _, kind := range kinds {
		// The cost of a pixel is the slope between two sizes: what does
		// not grow with the image (buffers, decoder state) drops out.
		var allocated [2]uint64
		sizes := [2][2]int{{256, 192}, {512, 384}}
		for k, size := range sizes {
			w, h := size[0], size[1]
			dir := t.TempDir()
			img, mask := kind.pictures(w, h)
			for _, name := range []string{"a.png", "b.png"} {
				writeFile(t, filepath.Join(dir, "images", name), encodePNG(t, img))
				writeFile(t, filepath.Join(dir, "masks", name), encodePNG(t, mask))
			}
			set, err := Open(SourceConfig{Config: Config{Source: SourceFolder, Path: dir, ValFraction: 0.5}, Channels: 3, Classes: 2})
			if err != nil {
				t.Fatal(err)
			}
			out, classes := make([]float32, 3*w*h), make([]uint8, w*h)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if err := set.Data.Sample(0, out, classes); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			allocated[k] = after.TotalAlloc - before.TotalAlloc
		}
		px := func(s [2]int) float64 { return float64(s[0] * s[1]) }
		perPixel := float64(allocated[1]-allocated[0]) / (px(sizes[1]) - px(sizes[0]))
		t.Logf("%s: %.2f bytes a pixel beside the 13-byte tensor and mask", kind.name, perPixel)
		if perPixel > kind.maxPerPixel+0.25 {
			t.Errorf("%s: reading a sample allocated %.2f bytes a pixel, want at most %g", kind.name, perPixel, kind.maxPerPixel)
		}
	}
}
