package data

import (
	"fmt"
	"image"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sizedFolder writes one PNG image and gray mask (classes 0..2) per size.
func sizedFolder(t *testing.T, dir string, sizes [][2]int) {
	t.Helper()
	for i, sz := range sizes {
		img, cls := scene(i, sz[0], sz[1], 3)
		writeFile(t, filepath.Join(dir, "images", fmt.Sprintf("%02d.png", i)), encodePNG(t, img))
		m := image.NewGray(image.Rect(0, 0, sz[1], sz[0]))
		copy(m.Pix, cls)
		writeFile(t, filepath.Join(dir, "masks", fmt.Sprintf("%02d.png", i)), encodePNG(t, m))
	}
}

func patchConfig(dir string, patch ...int) SourceConfig {
	cfg := folderConfig(dir)
	cfg.Classes, cfg.Patch, cfg.PatchForeground, cfg.SizeMultiple = 3, patch, DefaultPatchForeground, 8
	return cfg
}

// TestPatchWholeImage: a patch the size of the image is the image's
// sample bit for bit, with the default normalization and data.mean/std,
// 8-bit and 16-bit; Sample is the centre crop.
func TestPatchWholeImage(t *testing.T) {
	dir := t.TempDir()
	sizedFolder(t, dir, [][2]int{{32, 40}, {32, 40}, {32, 40}, {32, 40}})
	tdir := t.TempDir() // 16-bit TIFFs
	for i := range 4 {
		img := tiffSpec{w: 40, h: 32, samples: 1, bits: 16, photometric: 1, pix: tiffPixels(40, 32, 1, 16, uint64(i))}
		mask := tiffSpec{w: 40, h: 32, samples: 1, bits: 8, photometric: 1, pix: make([]uint16, 40*32)}
		mask.pix[i*9] = 1
		mask.pix[0] = 2
		writeFile(t, filepath.Join(tdir, "images", fmt.Sprintf("%d.tif", i)), img.bytes())
		writeFile(t, filepath.Join(tdir, "masks", fmt.Sprintf("%d.tif", i)), mask.bytes())
	}
	for _, tc := range []struct {
		name      string
		dir       string
		channels  int
		mean, std []float64
	}{{"8-bit RGB", dir, 3, nil, nil}, {"8-bit mean/std", dir, 3, []float64{0.4, 0.5, 0.6}, []float64{0.2}}, {"16-bit gray mean/std", tdir, 1, []float64{0.3}, []float64{0.1}}} {
		t.Run(tc.name, func(t *testing.T) {
			whole := patchConfig(tc.dir)
			whole.Channels, whole.Mean, whole.Std = tc.channels, tc.mean, tc.std
			ref := mustOpen(t, whole)
			for _, p := range [][]int{{32, 40}, {16, 24}} {
				cfg := whole
				cfg.Patch = p
				set := mustOpen(t, cfg)
				n := tc.channels * 32 * 40
				a, am := make([]float32, n), make([]uint8, 32*40)
				b, bm := make([]float32, tc.channels*p[0]*p[1]), make([]uint8, p[0]*p[1])
				for i := range set.Data.Len() {
					if err := ref.Data.Sample(i, a, am); err != nil {
						t.Fatal(err)
					}
					if err := set.Data.Sample(i, b, bm); err != nil {
						t.Fatal(err)
					}
					y0, x0 := (32-p[0])/2, (40-p[1])/2
					for c := range tc.channels {
						for y := range p[0] {
							for x := range p[1] {
								if got, want := b[(c*p[0]+y)*p[1]+x], a[(c*32+y0+y)*40+x0+x]; got != want {
									t.Fatalf("patch %v sample %d (%d, %d, %d): %v, want %v", p, i, c, y, x, got, want)
								}
							}
						}
					}
					for y := range p[0] {
						if !slices.Equal(bm[y*p[1]:(y+1)*p[1]], am[(y0+y)*40+x0:(y0+y)*40+x0+p[1]]) {
							t.Fatalf("patch %v sample %d mask row %d differs", p, i, y)
						}
					}
				}
			}
		})
	}
}

// TestPatchDraws: training patches are a function of (seed, epoch,
// sample): equal when asked again (a resumed loader), different across
// epochs; with patch_foreground 1 every patch is centred on foreground;
// images of any size, those smaller than the patch padded (0, Ignore).
func TestPatchDraws(t *testing.T) {
	dir := t.TempDir()
	sizedFolder(t, dir, [][2]int{{48, 64}, {40, 40}, {64, 24}, {56, 72}, {16, 80}, {48, 48}, {40, 56}, {64, 64}})
	cfg := patchConfig(dir, 32, 32)
	cfg.PatchForeground = 1
	set := mustOpen(t, cfg)
	p := set.Data.(*patches)
	if h, w := set.Data.Size(); h != 32 || w != 32 || !strings.Contains(set.Report.Patched, "data.patch [32, 32]") {
		t.Fatalf("size %dx%d, %q", h, w, set.Report.Patched)
	}
	img, mask := make([]float32, 3*32*32), make([]uint8, 32*32)
	img2, mask2 := make([]float32, 3*32*32), make([]uint8, 32*32)
	differs := 0
	for i := range set.Data.Len() {
		for epoch := range 4 {
			if err := p.sampleEpoch(i, 7, epoch, img, mask); err != nil {
				t.Fatal(err)
			}
			if err := p.sampleEpoch(i, 7, epoch, img2, mask2); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(img, img2) || !slices.Equal(mask, mask2) {
				t.Fatalf("sample %d epoch %d: two draws differ", i, epoch)
			}
			if !slices.ContainsFunc(mask, func(c uint8) bool { return c == 1 || c == 2 }) {
				t.Errorf("sample %d epoch %d: patch_foreground 1 drew a patch without foreground", i, epoch)
			}
			if epoch > 0 {
				p.sampleEpoch(i, 7, epoch-1, img2, mask2)
				if !slices.Equal(img, img2) {
					differs++
				}
			}
		}
	}
	if differs < set.Data.Len() {
		t.Errorf("only %d of %d epoch changes moved the patch", differs, 3*set.Data.Len())
	}
	// Sample 4 is 16x80: every patch has 8 rows of padding above and below.
	p.sampleEpoch(4, 7, 0, img, mask)
	for y := range 32 {
		pad := y < 8 || y >= 24
		for x := range 32 {
			if pad && (img[y*32+x] != 0 || img[(2*32+y)*32+x] != 0 || mask[y*32+x] != Ignore) {
				t.Fatalf("pixel (%d, %d) of the padding is %v, mask %d", y, x, img[y*32+x], mask[y*32+x])
			}
			if !pad && mask[y*32+x] == Ignore {
				t.Fatalf("pixel (%d, %d) inside the image is ignored", y, x)
			}
		}
	}
	// A Loader takes each micro-batch's patches from (seed, epoch): a
	// fresh one asked for micro-batch 5 gives what an uninterrupted one did.
	lc := LoaderConfig{Batch: 2, PerEpoch: 3, Seed: 7, Flip: true}
	a, _ := NewLoader(set.Data, set.Train, lc)
	b, _ := NewLoader(set.Data, set.Train, lc)
	defer a.Close()
	defer b.Close()
	ai, am := make([]float32, 2*3*32*32), make([]uint8, 2*32*32)
	bi, bm := make([]float32, 2*3*32*32), make([]uint8, 2*32*32)
	for m := range 6 {
		if _, err := a.Batch(m, ai, am); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Batch(5, bi, bm); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ai, bi) || !slices.Equal(am, bm) {
		t.Errorf("micro-batch 5 differs between a run and its resume")
	}
}

func TestPatchRefused(t *testing.T) {
	dir := t.TempDir()
	sizedFolder(t, dir, [][2]int{{24, 32}, {32, 24}, {24, 24}, {16, 40}})
	for _, tc := range []struct {
		name string
		edit func(*SourceConfig)
		want string
	}{
		{"larger than every image", func(c *SourceConfig) { c.Patch = []int{40, 40} }, "data.patch [40, 40] is larger than every image (the largest image is 24x32)"},
		{"not a multiple", func(c *SourceConfig) { c.Patch = []int{20, 24} }, "data.patch: [20 24] is not divisible by 2^model.depth = 8"},
		{"one number", func(c *SourceConfig) { c.Patch = []int{16} }, "data.patch: [16]: must be [H, W]"},
		{"foreground share", func(c *SourceConfig) { c.PatchForeground = 1.5 }, "data.patch_foreground: 1.5"},
		{"scale of differing sizes", func(c *SourceConfig) { c.Scale = 0.5 }, "data.scale 0.5 with data.patch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := patchConfig(dir, 16, 16)
			tc.edit(&cfg)
			err := cfg.Validate() // as a loaded config is, before it opens
			if err == nil {
				_, err = Open(cfg)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// Differing sizes are fine with a patch, and data.resize scales first.
	for _, edit := range []func(*SourceConfig){func(*SourceConfig) {}, func(c *SourceConfig) { c.Resize = []int{48, 48} }} {
		cfg := patchConfig(dir, 16, 16)
		edit(&cfg)
		if _, err := Open(cfg); err != nil {
			t.Error(err)
		}
	}
	if h, w, err := ProbeSize(patchConfig(dir, 16, 24)); err != nil || h != 16 || w != 24 {
		t.Errorf("ProbeSize %d, %d, %v", h, w, err)
	}
}
