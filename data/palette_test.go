package data

import (
	"fmt"
	"image"
	"image/color"
	"testing"
)

// TestClassColorsDistinct: every class 0..254 has its own color, none is
// Ignore's white, and the colors past the fixed table are saturated and
// bright (legible on black and white, and not gray).
func TestClassColorsDistinct(t *testing.T) {
	seen := map[color.RGBA]int{}
	white := ClassColor(Ignore)
	for k := range 255 {
		c := ClassColor(uint8(k))
		if c.A != 255 {
			t.Errorf("class %d: alpha %d", k, c.A)
		}
		if c == white {
			t.Errorf("class %d is Ignore's white", k)
		}
		if j, ok := seen[c]; ok {
			t.Errorf("classes %d and %d share %v", j, k, c)
		}
		seen[c] = k
		if k >= len(palette) {
			hi := max(c.R, c.G, c.B)
			lo := min(c.R, c.G, c.B)
			if hi < 200 || int(hi)-int(lo) < 120 {
				t.Errorf("class %d: %v is dark or grayish", k, c)
			}
		}
	}
}

// TestOverlayTintsEveryClass: class 0 is tinted like the others (no class is
// assumed to be background) and Ignore keeps the image.
func TestOverlayTintsEveryClass(t *testing.T) {
	const w, h = 3, 2
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 200
	}
	mask := []uint8{0, 1, 2, Ignore, 30, 0}
	out := Overlay(img, mask, w, h)
	for i, k := range mask {
		got := out.RGBAAt(i%w, i/w)
		want := color.RGBA{200, 200, 200, 255}
		if k != Ignore {
			c := ClassColor(k)
			want = color.RGBA{uint8((200 + int(c.R)) / 2), uint8((200 + int(c.G)) / 2), uint8((200 + int(c.B)) / 2), 255}
		}
		if got != want {
			t.Errorf("pixel %d (class %d): %v, want %v", i, k, got, want)
		}
	}
}

// TestLegend: one row per class, its swatch in the class's color, and text
// (dark pixels) beside each swatch; a long label widens the picture.
func TestLegend(t *testing.T) {
	label := func(k int) string { return fmt.Sprintf("class %d", k) }
	wide := Legend([]string{label(0), "a much longer name of class 1"})
	if narrow := Legend([]string{label(0), label(1)}); wide.Bounds().Dx() <= narrow.Bounds().Dx()+100 {
		t.Errorf("a long label: %v wide, short ones %v", wide.Bounds(), narrow.Bounds())
	}
	for _, classes := range []int{1, 4, 23} {
		var labels []string
		for k := range classes {
			labels = append(labels, label(k))
		}
		img := Legend(labels)
		if got, want := img.Bounds().Dy(), legendPad*2+classes*legendRow; got != want {
			t.Fatalf("%d classes: height %d, want %d", classes, got, want)
		}
		for k := range classes {
			y := legendPad + k*legendRow + legendRow/2
			if got := img.RGBAAt(legendPad+legendSwatch/2, y); got != ClassColor(uint8(k)) {
				t.Errorf("%d classes: swatch %d is %v, want %v", classes, k, got, ClassColor(uint8(k)))
			}
			dark := 0
			for x := legendPad*2 + legendSwatch; x < img.Bounds().Dx(); x++ {
				for dy := -legendRow / 2; dy < legendRow/2; dy++ {
					if c := img.RGBAAt(x, y+dy); c.R < 100 && c.G < 100 && c.B < 100 {
						dark++
					}
				}
			}
			if dark < 10 {
				t.Errorf("%d classes: row %d has no label text (%d dark pixels)", classes, k, dark)
			}
		}
	}
}
