package data

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// encodePNG, encodeGIF and encodeJPEG return a picture as file bytes.
func encodePNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeGIF(t testing.TB, m *image.Paletted) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, m, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// scene draws sample i of a toy set: a mid-gray noisy background with a
// bright disc (class 1) and, with three classes, a dark square (class 2).
// It returns the RGB picture and the class of every pixel.
func scene(i, h, w, classes int) (*image.RGBA, []uint8) {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	cls := make([]uint8, h*w)
	cx, cy := float64(w)*(0.3+0.4*float64(i%3)/2), float64(h)*(0.35+0.3*float64(i%2))
	r := float64(min(h, w)) / 5
	sq := [4]int{w/8 + i%3, h/8 + i%2, w/8 + i%3 + w/5, h/8 + i%2 + h/5}
	for y := range h {
		for x := range w {
			z := mix64(uint64(i)<<32 | uint64(y*w+x))
			v := uint8(100 + z%40)
			c := uint8(0)
			if dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy; dx*dx+dy*dy <= r*r {
				v, c = uint8(210+z%40), 1
			} else if classes > 2 && x >= sq[0] && x < sq[2] && y >= sq[1] && y < sq[3] {
				v, c = uint8(10+z%30), 2
			}
			p := 4 * (y*w + x)
			img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = v, v/2+60, 255-v, 255
			cls[y*w+x] = c
		}
	}
	return img, cls
}

// carvanaLike writes n samples in the folder layout as Carvana has them:
// DIR/images/car_NN.jpg and DIR/masks/car_NN_mask.gif, each mask a
// two-color GIF (palette index 0 background, 1 car). It returns the class
// maps.
func carvanaLike(t testing.TB, dir string, n, h, w int) [][]uint8 {
	t.Helper()
	pal := color.Palette{color.Gray{0}, color.Gray{255}}
	var all [][]uint8
	for i := range n {
		img, cls := scene(i, h, w, 2)
		name := fmt.Sprintf("car_%02d", i)
		writeFile(t, filepath.Join(dir, "images", name+".jpg"), encodeJPEG(t, img))
		m := image.NewPaletted(image.Rect(0, 0, w, h), pal)
		copy(m.Pix, cls)
		writeFile(t, filepath.Join(dir, "masks", name+"_mask.gif"), encodeGIF(t, m))
		all = append(all, cls)
	}
	return all
}

// grayFolder writes n samples as PNG images and 8-bit grayscale PNG masks
// with the values vals[class] (e.g. 0 and 255), all named NN.png.
func grayFolder(t testing.TB, dir string, n, h, w int, vals []uint8) [][]uint8 {
	t.Helper()
	var all [][]uint8
	for i := range n {
		img, cls := scene(i, h, w, len(vals))
		writeFile(t, filepath.Join(dir, "images", fmt.Sprintf("%02d.png", i)), encodePNG(t, img))
		m := image.NewGray(image.Rect(0, 0, w, h))
		for p, c := range cls {
			m.Pix[p] = vals[c]
		}
		writeFile(t, filepath.Join(dir, "masks", fmt.Sprintf("%02d.png", i)), encodePNG(t, m))
		all = append(all, cls)
	}
	return all
}

func folderConfig(dir string) SourceConfig {
	return SourceConfig{Config: Config{Source: SourceFolder, Path: dir, ValFraction: 0.25, Seed: 1}, Channels: 3, Classes: 2}
}

func mustOpen(t testing.TB, cfg SourceConfig) *Set {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestFolderCarvanaLike(t *testing.T) {
	dir := t.TempDir()
	want := carvanaLike(t, dir, 8, 24, 32)
	cfg := folderConfig(dir)
	cfg.MaskSuffix = "_mask"
	set := mustOpen(t, cfg)
	rep := set.Report
	if rep.Samples != 8 || rep.Train != 6 || rep.Val != 2 || len(set.Train) != 6 || len(set.Val) != 2 {
		t.Fatalf("samples %d train %d val %d", rep.Samples, rep.Train, rep.Val)
	}
	if !rep.Discovered || rep.Mapping[0] != 0 || rep.Mapping[1] != 1 || rep.Mapping[255] != -1 {
		t.Errorf("mapping not discovered as 0->0, 1->1: %v", rep.Mapping[:3])
	}
	if s := rep.Summary(""); !strings.Contains(s, "0->0 1->1") || !strings.Contains(s, "data.mask_values: [0, 1]") {
		t.Errorf("summary does not print the discovered mapping: %s", s)
	}
	// A checkpoint's commands say the mapping, not the hint (issue 49).
	if s := rep.Recap(""); !strings.Contains(s, "0->0 1->1") || strings.Contains(s, "data.mask_values") {
		t.Errorf("recap: %s: want the mapping without the data.mask_values hint", s)
	}
	if h, w := set.Data.Size(); h != 24 || w != 32 || set.Data.Channels() != 3 || set.Data.Classes() != 2 {
		t.Fatalf("size %dx%d", h, w)
	}
	img, mask := buffers(set.Data)
	for i := range 8 {
		if err := set.Data.Sample(i, img, mask); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(mask, want[i]) {
			t.Fatalf("sample %d: mask differs from the one written", i)
		}
		// The disc is bright in R: its mean normalized R is well above the background's.
		var in, out float64
		var nin, nout int
		for p, c := range mask {
			if c == 1 {
				in += float64(img[p])
				nin++
			} else {
				out += float64(img[p])
				nout++
			}
		}
		if in/float64(nin) < out/float64(nout)+1 {
			t.Errorf("sample %d: disc not brighter than background (%.2f vs %.2f)", i, in/float64(nin), out/float64(nout))
		}
	}
}

func TestFolderGrayMasksWithValues(t *testing.T) {
	dir := t.TempDir()
	want := grayFolder(t, dir, 6, 16, 16, []uint8{0, 128, 255})
	cfg := folderConfig(dir)
	cfg.Classes, cfg.MaskValues = 3, []int{0, 128, 255}
	set := mustOpen(t, cfg)
	if set.Report.Discovered {
		t.Error("mapping marked discovered though data.mask_values was given")
	}
	img, mask := buffers(set.Data)
	for i := range 6 {
		if err := set.Data.Sample(i, img, mask); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(mask, want[i]) {
			t.Fatalf("sample %d: mask differs", i)
		}
	}
	// Exact normalization of the PNG's 8-bit pixels, channel by channel.
	src, _ := scene(0, 16, 16, 3)
	if err := set.Data.Sample(0, img, mask); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(img, normalized8(src, 3)) {
		t.Error("image values are not the normalized 8-bit pixels")
	}
}

func TestFolderGrayscaleChannel(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 4, 16, 16, []uint8{0, 1})
	cfg := folderConfig(dir)
	cfg.Channels = 1
	set := mustOpen(t, cfg)
	img, mask := buffers(set.Data)
	if len(img) != 16*16 {
		t.Fatalf("one channel gives %d values", len(img))
	}
	if err := set.Data.Sample(0, img, mask); err != nil {
		t.Fatal(err)
	}
	src, _ := scene(0, 16, 16, 2)
	p := 5*16 + 7
	r, g, b := float64(src.Pix[4*p]), float64(src.Pix[4*p+1]), float64(src.Pix[4*p+2])
	luma := math.Round((19595*r + 38470*g + 7471*b) / 65536)
	if got := float64(img[p])*Std*255 + Mean*255; math.Abs(got-luma) > 0.01 {
		t.Errorf("gray value %.3f, want the luma %.0f", got, luma)
	}
}

func TestScaleAndNormalize(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 4, 64, 48, []uint8{0, 255})
	cfg := folderConfig(dir)
	cfg.Scale = 0.5
	set := mustOpen(t, cfg)
	if h, w := set.Data.Size(); h != 32 || w != 24 {
		t.Fatalf("scale 0.5 of 64x48 gives %dx%d", h, w)
	}
	cfg.SizeMultiple = 16
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "data.resize: [32, 32]") {
		t.Errorf("32x24 with a multiple of 16: %v", err)
	}

	cfg = folderConfig(dir)
	plain := mustOpen(t, cfg)
	cfg.Mean, cfg.Std = []float64{0.485, 0.456, 0.406}, []float64{0.229, 0.224, 0.225}
	norm := mustOpen(t, cfg)
	a, m := buffers(plain.Data)
	b, _ := buffers(norm.Data)
	if err := plain.Data.Sample(1, a, m); err != nil {
		t.Fatal(err)
	}
	if err := norm.Data.Sample(1, b, m); err != nil {
		t.Fatal(err)
	}
	plane := 64 * 48
	for k := range a {
		c := k / plane
		raw := float64(a[k])*Std + Mean
		want := (raw - cfg.Mean[c]) / cfg.Std[c]
		if math.Abs(float64(b[k])-want) > 1e-5 {
			t.Fatalf("value %d (channel %d): %v, want %v", k, c, b[k], want)
		}
	}
}

func TestCheckListsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 6, 16, 16, []uint8{0, 255})
	os.Remove(filepath.Join(dir, "masks", "01.png"))
	writeFile(t, filepath.Join(dir, "masks", "04.png"), encodePNG(t, image.NewGray(image.Rect(0, 0, 8, 8))))
	writeFile(t, filepath.Join(dir, "masks", "99.png"), encodePNG(t, image.NewGray(image.Rect(0, 0, 16, 16))))
	b, _ := os.ReadFile(filepath.Join(dir, "images", "05.png"))
	writeFile(t, filepath.Join(dir, "images", "05.png"), b[:40])
	rep, err := Check(folderConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Write(&out)
	s := out.String()
	for _, w := range []string{
		"error: " + filepath.Join(dir, "images", "01.png") + ": has no mask",
		"error: " + filepath.Join(dir, "masks", "04.png") + ": is 8x8",
		"error: " + filepath.Join(dir, "images", "05.png") + ": the PNG file is truncated",
		"warning: " + filepath.Join(dir, "masks", "99.png") + ": has no image",
		"problems: 4 (3 errors, 1 warnings)",
		"  0 -> class 0:", "255 -> class 1:",
		"to fix this mapping, set data.mask_values: [0, 255]",
		"image sizes (height x width: images): 16x16: 4",
	} {
		if !strings.Contains(s, w) {
			t.Errorf("report lacks %q:\n%s", w, s)
		}
	}
	_, oerr := Open(folderConfig(dir))
	if oerr == nil || !strings.Contains(oerr.Error(), "and 2 more problems") {
		t.Errorf("Open: %v", oerr)
	}
}

func TestCheckSynthetic(t *testing.T) {
	rep, err := Check(SourceConfig{Config: Config{Source: SourceSynthetic, ValFraction: 0.25, Count: 16, Size: 32, Seed: 1}, Channels: 3, Classes: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Samples != 16 || rep.Train+rep.Val != 16 || rep.Height != 32 || len(rep.Problems) != 0 {
		t.Fatalf("report %+v", rep)
	}
	var px int64
	for _, mv := range rep.Values {
		px += mv.Pixels
	}
	if px != 16*32*32 || rep.Value(0).Pixels == 0 || rep.Value(1).Pixels == 0 {
		t.Errorf("class histogram %v sums to %d", rep.Values, px)
	}
}

// The synthetic set written in the folder layout reads back as the same
// samples (8-bit images, identical masks).
func TestWriteFolderRoundTrip(t *testing.T) {
	syn := mustSynthetic(t, SyntheticConfig{Count: 6, Size: 16, Seed: 4})
	dir := t.TempDir()
	if err := WriteFolder(syn, dir); err != nil {
		t.Fatal(err)
	}
	if err := WriteFolder(syn, dir); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("second write into the same directory: %v", err)
	}
	cfg := folderConfig(dir)
	cfg.Classes, cfg.MaskValues = 4, []int{0, 1, 2, 3}
	set := mustOpen(t, cfg)
	for i := range 6 {
		img, mask := buffers(set.Data)
		if err := set.Data.Sample(i, img, mask); err != nil {
			t.Fatal(err)
		}
		pi, pm, err := syn.Image(i)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(mask, pm.Pix) || !slices.Equal(img, normalized8(pi, 3)) {
			t.Fatalf("sample %d differs after the round trip", i)
		}
	}
}

// A file that goes bad after Open is an error naming it when its sample is
// read.
func TestSampleErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
	set := mustOpen(t, folderConfig(dir))
	p := filepath.Join(dir, "masks", "02.png")
	m := image.NewGray(image.Rect(0, 0, 16, 16))
	m.Pix[33] = 9
	writeFile(t, p, encodePNG(t, m))
	img, mask := buffers(set.Data)
	err := set.Data.Sample(2, img, mask)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "mask value 9 at x=1, y=2") {
		t.Errorf("Sample after the mask changed: %v", err)
	}
	os.Remove(filepath.Join(dir, "images", "03.png"))
	if err := set.Data.Sample(3, img, mask); err == nil || !strings.Contains(err.Error(), "03.png") {
		t.Errorf("Sample after the image was removed: %v", err)
	}
}

func TestSourceConfigValidation(t *testing.T) {
	base := folderConfig("x")
	for _, tc := range []struct {
		edit func(*SourceConfig)
		want string
	}{
		{func(c *SourceConfig) { c.Path = "" }, "data.path"},
		{func(c *SourceConfig) { c.Source = "coco" }, "data.source"},
		{func(c *SourceConfig) { c.Channels = 2 }, "model.in_channels"},
		{func(c *SourceConfig) { c.MaskValues = []int{0, 65536} }, "data.mask_values: 65536"},
		{func(c *SourceConfig) { c.MaskValues = []int{0, 0} }, "listed twice"},
		{func(c *SourceConfig) { c.MaskValues = []int{0, 1, 2} }, "model.classes is 2"},
		{func(c *SourceConfig) { c.Mean = []float64{0.5, 0.5} }, "data.mean"},
		{func(c *SourceConfig) { c.Std = []float64{0} }, "data.std"},
		{func(c *SourceConfig) { c.Std = []float64{math.NaN()} }, "data.std"},
		{func(c *SourceConfig) { c.Scale = -1 }, "data.scale"},
		{func(c *SourceConfig) { c.Scale, c.Resize = 0.5, []int{8, 8} }, "both set"},
		{func(c *SourceConfig) { c.Resize = []int{8} }, "data.resize"},
	} {
		c := base
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", c, err, tc.want)
		}
	}
}

func TestOpenCached(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
	cfg := folderConfig(dir)
	a, fresh, err := OpenCached(cfg)
	if err != nil || !fresh {
		t.Fatalf("first: fresh %v, %v", fresh, err)
	}
	b, fresh, err := OpenCached(cfg)
	if err != nil || fresh || a != b {
		t.Fatalf("second: fresh %v, same %v, %v", fresh, a == b, err)
	}
	cfg.Seed = 2 // another config reads again
	if _, fresh, _ := OpenCached(cfg); !fresh {
		t.Error("another config reused the set")
	}
	cfg.Seed = 1
	// A changed file is read (and checked) again.
	p := filepath.Join(dir, "images", "01.png")
	raw, _ := os.ReadFile(p)
	writeFile(t, p, raw[:len(raw)/2])
	if _, _, err := OpenCached(cfg); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("after truncating %s: %v", p, err)
	}
	writeFile(t, p, raw)
	// A file added to a folder, too.
	writeFile(t, filepath.Join(dir, "images", "09.png"), raw)
	if _, _, err := OpenCached(cfg); err == nil || !strings.Contains(err.Error(), "09.png: has no mask") {
		t.Fatalf("after adding an image without a mask: %v", err)
	}
}

func TestProbeSize(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 3, 64, 48, []uint8{0, 255})
	cfg := folderConfig(dir)
	if h, w, err := ProbeSize(cfg); err != nil || h != 64 || w != 48 {
		t.Errorf("folder: %dx%d, %v", h, w, err)
	}
	cfg.Scale = 0.5
	if h, w, err := ProbeSize(cfg); err != nil || h != 32 || w != 24 {
		t.Errorf("folder scaled 0.5: %dx%d, %v", h, w, err)
	}
	cfg.Scale, cfg.Resize = 0, []int{16, 8}
	if h, w, err := ProbeSize(cfg); err != nil || h != 16 || w != 8 {
		t.Errorf("resized: %dx%d, %v", h, w, err)
	}
	voc := t.TempDir()
	vocLike(t, voc, [][2]int{{40, 56}, {32, 32}}, nil)
	if h, w, err := ProbeSize(SourceConfig{Config: Config{Source: SourceVOC, Path: voc}}); err != nil || h != 40 || w != 56 {
		t.Errorf("voc: %dx%d, %v", h, w, err)
	}
	if _, _, err := ProbeSize(folderConfig(filepath.Join(dir, "nope"))); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing folder: %v", err)
	}
	if h, w, err := ProbeSize(SourceConfig{Config: Config{Source: SourceSynthetic, Size: 64, Scale: 0.25}}); err != nil || h != 16 || w != 16 {
		t.Errorf("synthetic: %dx%d, %v", h, w, err)
	}
}
