package data

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gray16Folder writes n samples as PNG images and 16-bit grayscale PNG
// masks (image/png writes an image.Gray16 as a 16-bit gray PNG) with the
// values vals[class], all named NN.png. It returns the class maps.
func gray16Folder(t testing.TB, dir string, n, h, w int, vals []uint16) [][]uint8 {
	t.Helper()
	var all [][]uint8
	for i := range n {
		img, cls := scene(i, h, w, len(vals))
		writeFile(t, filepath.Join(dir, "images", fmt.Sprintf("%02d.png", i)), encodePNG(t, img))
		writeFile(t, filepath.Join(dir, "masks", fmt.Sprintf("%02d.png", i)), encodePNG(t, gray16Mask(w, h, cls, vals)))
		all = append(all, cls)
	}
	return all
}

// gray16Mask is a 16-bit gray picture holding vals[cls[p]] at pixel p.
func gray16Mask(w, h int, cls []uint8, vals []uint16) *image.Gray16 {
	m := image.NewGray16(image.Rect(0, 0, w, h))
	for p, c := range cls {
		m.SetGray16(p%w, p/w, color.Gray16{Y: vals[c]})
	}
	return m
}

// checkSamples reads every sample of set and compares its mask with want.
func checkSamples(t *testing.T, set *Set, want [][]uint8) {
	t.Helper()
	img, mask := buffers(set.Data)
	for i := range set.Data.Len() {
		if err := set.Data.Sample(i, img, mask); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(mask, want[i]) {
			t.Fatalf("sample %d: the classes differ from the mask written", i)
		}
	}
}

func reportText(rep *Report) string {
	var b bytes.Buffer
	rep.Write(&b)
	return b.String()
}

// 16-bit gray masks are read by their full value: 0, 1, 2 (whose high
// bytes are all 0) and 256, 257, 1000 (high bytes 1, 1, 3) are three
// classes each, found by the folder scan.
func TestMask16Discovered(t *testing.T) {
	for _, vals := range [][]uint16{{0, 1, 2}, {256, 257, 1000}} {
		t.Run(fmt.Sprint(vals), func(t *testing.T) {
			dir := t.TempDir()
			want := gray16Folder(t, dir, 6, 16, 16, vals)
			cfg := folderConfig(dir)
			cfg.Classes = 3
			set := mustOpen(t, cfg)
			checkSamples(t, set, want)
			rep := set.Report
			if len(rep.Problems) != 0 {
				t.Errorf("problems: %v", rep.Problems)
			}
			text := reportText(rep)
			for k, v := range vals {
				if w := fmt.Sprintf("%d -> class %d:", v, k); !strings.Contains(text, w) {
					t.Errorf("report lacks %q:\n%s", w, text)
				}
			}
			for _, w := range []string{"masks: 16-bit gray PNG", fmt.Sprintf("data.mask_values: [%d, %d, %d]", vals[0], vals[1], vals[2])} {
				if !strings.Contains(text, w) {
					t.Errorf("report lacks %q:\n%s", w, text)
				}
			}
			if s, w := rep.Summary(""), fmt.Sprintf("%d->0 %d->1 %d->2", vals[0], vals[1], vals[2]); !strings.Contains(s, w) || !strings.Contains(s, "16-bit gray") {
				t.Errorf("summary lacks %q and the bit depth: %s", w, s)
			}
		})
	}
}

// With data.mask_values the 16-bit values listed are the classes; a value
// not listed is an error naming the mask, even when its high byte is that
// of a class.
func TestMask16WithMaskValues(t *testing.T) {
	dir := t.TempDir()
	want := gray16Folder(t, dir, 6, 16, 16, []uint16{0, 257, 1000})
	cfg := folderConfig(dir)
	cfg.Classes, cfg.MaskValues = 3, []int{0, 257, 1000}
	set := mustOpen(t, cfg)
	checkSamples(t, set, want)
	if set.Report.Discovered {
		t.Error("mapping marked discovered though data.mask_values was given")
	}

	// 256 has 257's high byte.
	bad := filepath.Join(dir, "masks", "03.png")
	cls := slices.Clone(want[3])
	cls[20] = 3
	writeFile(t, bad, encodePNG(t, gray16Mask(16, 16, cls, []uint16{0, 257, 1000, 256})))
	_, err := Open(cfg)
	if err == nil || !strings.Contains(err.Error(), bad+": mask value 256 (1 pixels) is not a class") || !strings.Contains(err.Error(), "data.mask_values is [0 257 1000]") {
		t.Fatalf("Open with an unlisted 16-bit value: %v", err)
	}
	rep, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if text := reportText(rep); !strings.Contains(text, "256 -> not a class:") || !strings.Contains(text, "257 -> class 1:") {
		t.Errorf("report:\n%s", text)
	}

	// Without data.mask_values the scan finds four values for three classes.
	cfg.MaskValues = nil
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "4 distinct values [0 256 257 1000]") {
		t.Errorf("Open with a fourth 16-bit value found by the scan: %v", err)
	}
}

// VOC masks stored as 16-bit gray hold the classes by value, 255 ignored;
// 258 (high byte 1) is no class.
func TestMask16VOC(t *testing.T) {
	dir := t.TempDir()
	vocLike(t, dir, [][2]int{{16, 16}, {16, 16}, {16, 16}}, [][2]int{{16, 16}})
	ids := []string{"2007_000000", "2007_000001", "2007_000002", "2007_000003"}
	var want [][]uint8
	for i, id := range ids {
		_, cls := scene(i, 16, 16, 3)
		cls[0] = Ignore
		writeFile(t, filepath.Join(dir, "SegmentationClass", id+".png"), encodePNG(t, gray16Mask(16, 16, cls, []uint16{0, 1, 2, 255: 255})))
		want = append(want, cls)
	}
	cfg := SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.3}, Channels: 3, Classes: 3}
	set := mustOpen(t, cfg)
	checkSamples(t, set, want)
	if text := reportText(set.Report); !strings.Contains(text, "255 -> ignored:") || !strings.Contains(text, "masks: 16-bit gray PNG") {
		t.Errorf("report:\n%s", text)
	}

	bad := filepath.Join(dir, "SegmentationClass", ids[1]+".png")
	cls := slices.Clone(want[1])
	cls[5] = 3
	writeFile(t, bad, encodePNG(t, gray16Mask(16, 16, cls, []uint16{0, 1, 2, 258, 255: 255})))
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), bad+": mask value 258 (1 pixels) is not a class") {
		t.Errorf("Open with value 258: %v", err)
	}
}

// data.mask_values takes 16-bit values, 0 to 65535.
func TestMaskValuesRange(t *testing.T) {
	cfg := folderConfig("x")
	cfg.MaskValues = []int{0, 65535}
	if err := cfg.Validate(); err != nil {
		t.Errorf("[0, 65535]: %v", err)
	}
	for _, vals := range [][]int{{0, 65536}, {-1, 0}} {
		cfg.MaskValues = vals
		err := cfg.Validate()
		if w := fmt.Sprintf("data.mask_values: %d: ", vals[0]+vals[1]); err == nil || !strings.Contains(err.Error(), w) || !strings.Contains(err.Error(), "0 to 65535") {
			t.Errorf("%v: %v, want %q and the range", vals, err, w)
		}
	}
}

// 16-bit masks of other kinds (gray with alpha, RGB with gray pixels) are
// read by value too; the report names each kind.
func TestMask16OtherKinds(t *testing.T) {
	g := image.NewNRGBA64(image.Rect(0, 0, 3, 2))
	for p := range 6 {
		v := uint16(p * 300)
		g.SetNRGBA64(p%3, p/3, color.NRGBA64{R: v, G: v, B: v, A: uint16(0xffff - p)})
	}
	m, err := decodeMask("m.png", encodePNG(t, g), fuzzMaxPixels)
	if err != nil || !slices.Equal(m.values(), []uint16{0, 300, 600, 900, 1200, 1500}) || m.bits != 16 || m.format != "16-bit RGBA PNG" {
		t.Errorf("16-bit gray RGBA: %v %+v", err, m)
	}
	g.SetNRGBA64(2, 1, color.NRGBA64{R: 1, G: 2, B: 1, A: 0xffff})
	if _, err := decodeMask("c.png", encodePNG(t, g), fuzzMaxPixels); err == nil || !strings.Contains(err.Error(), "c.png: the mask is a color image (pixel x=2, y=1") {
		t.Errorf("16-bit color pixel: %v", err)
	}
	gr := image.NewGray(image.Rect(0, 0, 2, 2))
	gr.Pix[3] = 200
	if m, err := decodeMask("g.png", encodePNG(t, gr), fuzzMaxPixels); err != nil || m.bits != 8 || m.format != "8-bit gray PNG" || m.values()[3] != 200 {
		t.Errorf("8-bit gray: %v %+v", err, m)
	}
}
