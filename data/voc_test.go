package data

import (
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// vocPalette is the start of PASCAL VOC's color map, plus 255 (the
// "void" border, drawn cream).
func vocPalette() color.Palette {
	p := make(color.Palette, 256)
	for k := range p {
		p[k] = color.RGBA{uint8(k), uint8(k), uint8(k), 255}
	}
	p[0], p[1], p[2] = color.RGBA{0, 0, 0, 255}, color.RGBA{128, 0, 0, 255}, color.RGBA{0, 128, 0, 255}
	p[255] = color.RGBA{224, 224, 192, 255}
	return p
}

// vocLike writes a VOC root: JPEGImages/ID.jpg of the given sizes,
// SegmentationClass/ID.png palette masks (3 classes, a 1-pixel 255 border
// around each object) and the train/val lists.
func vocLike(t testing.TB, dir string, train, val [][2]int) {
	t.Helper()
	write := func(list string, sizes [][2]int, first int) {
		var ids []string
		for k, sz := range sizes {
			id := fmt.Sprintf("2007_%06d", first+k)
			ids = append(ids, id)
			img, cls := scene(first+k, sz[0], sz[1], 3)
			writeFile(t, filepath.Join(dir, "JPEGImages", id+".jpg"), encodeJPEG(t, img))
			m := image.NewPaletted(image.Rect(0, 0, sz[1], sz[0]), vocPalette())
			h, w := sz[0], sz[1]
			for y := range h {
				for x := range w {
					c := cls[y*w+x]
					m.Pix[y*w+x] = c
					// void border: a background pixel next to an object
					if c == 0 && ((x > 0 && cls[y*w+x-1] != 0) || (x+1 < w && cls[y*w+x+1] != 0)) {
						m.Pix[y*w+x] = 255
					}
				}
			}
			writeFile(t, filepath.Join(dir, "SegmentationClass", id+".png"), encodePNG(t, m))
		}
		writeFile(t, filepath.Join(dir, "ImageSets", "Segmentation", list), []byte(strings.Join(ids, "\n")+"\n"))
	}
	write("train.txt", train, 0)
	if val != nil {
		write("val.txt", val, len(train))
	}
}

func TestVOCLike(t *testing.T) {
	dir := t.TempDir()
	vocLike(t, dir, [][2]int{{40, 48}, {48, 40}, {40, 48}, {40, 48}, {36, 44}}, [][2]int{{40, 48}, {48, 40}})
	cfg := SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.5, Seed: 1}, Channels: 3, Classes: 3}

	// Differing sizes need a resize, and the error says so naming a file.
	_, err := Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "data.resize") || !strings.Contains(err.Error(), "JPEGImages") {
		t.Fatalf("differing sizes without resize: %v", err)
	}
	cfg.Resize = []int{32, 32}
	set := mustOpen(t, cfg)
	rep := set.Report
	if !rep.ValFromLists || !slices.Equal(set.Train, []int{0, 1, 2, 3, 4}) || !slices.Equal(set.Val, []int{5, 6}) {
		t.Errorf("split not from the lists: train %v val %v", set.Train, set.Val)
	}
	if rep.Mapping[255] != int16(Ignore) || rep.Mapping[2] != 2 || rep.Mapping[3] != -1 {
		t.Errorf("VOC mapping: 2->%d 3->%d 255->%d", rep.Mapping[2], rep.Mapping[3], rep.Mapping[255])
	}
	if rep.Value(255).Pixels == 0 || rep.Value(2).Pixels == 0 || len(rep.Sizes) != 3 {
		t.Errorf("report: %d void pixels, %d class-2 pixels, %d sizes", rep.Value(255).Pixels, rep.Value(2).Pixels, len(rep.Sizes))
	}
	img, mask := buffers(set.Data)
	seen := map[uint8]bool{}
	for i := range set.Data.Len() {
		if err := set.Data.Sample(i, img, mask); err != nil {
			t.Fatal(err)
		}
		for _, v := range mask {
			seen[v] = true
		}
	}
	if len(seen) != 4 || !seen[0] || !seen[1] || !seen[2] || !seen[Ignore] {
		t.Errorf("resized masks hold %v, want 0, 1, 2 and 255 only", seen)
	}

	// Without val.txt the training list is split by val_fraction.
	if err := os.Remove(filepath.Join(dir, vocValList)); err != nil {
		t.Fatal(err)
	}
	set = mustOpen(t, cfg)
	if set.Report.ValFromLists || len(set.Train)+len(set.Val) != 5 || len(set.Val) == 0 {
		t.Errorf("fraction split: train %v val %v", set.Train, set.Val)
	}
}
