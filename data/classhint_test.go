package data

import (
	"fmt"
	"image"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// valuesFolder writes 32x32 images and 16-bit gray masks whose pixels hold
// vals in turn, 1024 a mask, in as many pairs as that takes (at least 2).
func valuesFolder(t *testing.T, dir string, vals []uint16) {
	t.Helper()
	const side = 32
	n := max(2, (len(vals)+side*side-1)/(side*side))
	for i := range n {
		img, _ := scene(i, side, side, 2)
		writeFile(t, filepath.Join(dir, "images", fmt.Sprintf("%02d.png", i)), encodePNG(t, img))
		m := image.NewGray16(image.Rect(0, 0, side, side))
		for p := range side * side {
			v := vals[(i*side*side+p)%len(vals)]
			m.Pix[2*p], m.Pix[2*p+1] = uint8(v>>8), uint8(v)
		}
		writeFile(t, filepath.Join(dir, "masks", fmt.Sprintf("%02d.png", i)), encodePNG(t, m))
	}
}

func countTo(n int) []uint16 {
	vs := make([]uint16, n)
	for k := range vs {
		vs[k] = uint16(k)
	}
	return vs
}

// classesHint finds a model.classes value a message asks for.
var classesHint = regexp.MustCompile(`model\.classes(?::| to) (\d+)`)

// TestClassHintsInRange: a hint never asks for more than MaxClasses
// classes. 16-bit masks of 1027 values once said "set model.classes:
// 1027"; past 255 values the problem says the masks hold more values than
// any model.classes takes, names a mask and its format, and points at the
// mask format and data.mask_values. Counts within range keep the exact
// hint; a VOC mask value above 254 points at data.mask_values, not at
// raising model.classes.
func TestClassHintsInRange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		make    func(t *testing.T, dir string) SourceConfig
		want    []string
		notWant string
	}{
		{"1027 values", func(t *testing.T, dir string) SourceConfig {
			valuesFolder(t, dir, countTo(1027))
			cfg := folderConfig(dir)
			cfg.Classes = 3
			return cfg
		}, []string{"masks/00.png: the masks hold 1027 distinct values", "more than memunet's maximum of 255 classes (model.classes)",
			"value 255, the 256th, first occurs here, a 16-bit gray PNG", "class masks", "data.mask_values"}, "set model.classes"},
		{"256 values", func(t *testing.T, dir string) SourceConfig {
			valuesFolder(t, dir, countTo(256))
			return folderConfig(dir)
		}, []string{"256 distinct values", "maximum of 255 classes"}, "set model.classes"},
		{"255 values", func(t *testing.T, dir string) SourceConfig {
			valuesFolder(t, dir, countTo(255))
			return folderConfig(dir)
		}, []string{"255 distinct values", "set model.classes: 255, or data.mask_values"}, "maximum of 255"},
		{"4 values", func(t *testing.T, dir string) SourceConfig {
			valuesFolder(t, dir, []uint16{0, 300, 1000, 1027})
			return folderConfig(dir)
		}, []string{"4 distinct values [0 300 1000 1027]", "set model.classes: 4"}, "maximum of 255"},
		{"VOC value 300", func(t *testing.T, dir string) SourceConfig {
			vocLike(t, dir, [][2]int{{16, 16}, {16, 16}, {16, 16}}, nil)
			cls := make([]uint8, 16*16)
			cls[5] = 1
			writeFile(t, filepath.Join(dir, "SegmentationClass", "2007_000001.png"), encodePNG(t, gray16Mask(16, 16, cls, []uint16{0, 300})))
			return SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.3}, Channels: 3, Classes: 3}
		}, []string{"2007_000001.png", "mask value 300 (1 pixels) is not a class", "set data.mask_values", "at most 255"}, "raise model.classes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.make(t, t.TempDir()))
			if err == nil {
				t.Fatal("opened; want a problem")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, tc.notWant) {
				t.Errorf("error says %q:\n%s", tc.notWant, msg)
			}
			for _, m := range classesHint.FindAllStringSubmatch(msg, -1) {
				if n, _ := strconv.Atoi(m[1]); n < 2 || n > MaxClasses {
					t.Errorf("hint %q is outside 2..%d", m[0], MaxClasses)
				}
			}
		})
	}
}
