package data

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// palette is the fixed color of each class below its length: class 0
// black (a class like any other: overlays tint its pixels too), then
// Trubetskoy's 20 distinct colors, the most distinguishable first.
var palette = []color.RGBA{
	{0, 0, 0, 255},       // 0 black
	{230, 25, 75, 255},   // 1 red
	{60, 180, 75, 255},   // 2 green
	{0, 130, 200, 255},   // 3 blue
	{255, 225, 25, 255},  // 4 yellow
	{145, 30, 180, 255},  // 5 purple
	{70, 240, 240, 255},  // 6 cyan
	{245, 130, 48, 255},  // 7 orange
	{240, 50, 230, 255},  // 8 magenta
	{210, 245, 60, 255},  // 9 lime
	{250, 190, 190, 255}, // 10 pink
	{0, 128, 128, 255},   // 11 teal
	{230, 190, 255, 255}, // 12 lavender
	{170, 110, 40, 255},  // 13 brown
	{255, 250, 200, 255}, // 14 beige
	{128, 0, 0, 255},     // 15 maroon
	{170, 255, 195, 255}, // 16 mint
	{128, 128, 0, 255},   // 17 olive
	{255, 215, 180, 255}, // 18 apricot
	{0, 0, 128, 255},     // 19 navy
	{128, 128, 128, 255}, // 20 grey
}

// ClassColor is the color of class k in masks, overlays, previews and
// legends: a fixed table for classes 0..20, then hues a golden angle apart
// at fixed saturation and brightness (never near black, white or gray, so
// always legible beside the table's), and white for Ignore.
func ClassColor(k uint8) color.RGBA {
	if k == Ignore {
		return color.RGBA{255, 255, 255, 255}
	}
	if int(k) < len(palette) {
		return palette[k]
	}
	hue := math.Mod(float64(int(k)-len(palette))*137.50776405, 360)
	return hsv(hue, 0.75, 0.95)
}

// hsv converts a hue in degrees, saturation and value in [0, 1] to RGB.
func hsv(h, s, v float64) color.RGBA {
	c := v * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	m := v - c
	var r, g, b float64
	switch {
	case h < 60:
		r, g = c, x
	case h < 120:
		r, g = x, c
	case h < 180:
		g, b = c, x
	case h < 240:
		g, b = x, c
	case h < 300:
		r, b = x, c
	default:
		r, b = c, x
	}
	to8 := func(f float64) uint8 { return uint8(math.Round((f + m) * 255)) }
	return color.RGBA{to8(r), to8(g), to8(b), 255}
}

// MaskPalette is the palette of the mask PNGs memunet writes: index k is
// ClassColor(k), so a palette PNG shows the classes in color while its
// pixel values (palette indices) are the class indices.
func MaskPalette() color.Palette {
	p := make(color.Palette, 256)
	for k := range p {
		p[k] = ClassColor(uint8(k))
	}
	return p
}

// Overlay returns img with every pixel blended half and half with the
// color of its class in mask (w x h, class per pixel; Ignore pixels keep
// the image). Class 0 is tinted like every class, so no class is assumed
// to be background; Legend says which color is which.
func Overlay(img *image.RGBA, mask []uint8, w, h int) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			px := img.RGBAAt(img.Rect.Min.X+x, img.Rect.Min.Y+y)
			if k := mask[y*w+x]; k != Ignore {
				c := ClassColor(k)
				px = color.RGBA{uint8((int(px.R) + int(c.R)) / 2), uint8((int(px.G) + int(c.G)) / 2), uint8((int(px.B) + int(c.B)) / 2), 255}
			}
			px.A = 255
			out.SetRGBA(x, y, px)
		}
	}
	return out
}

// Legend geometry, in pixels.
const (
	legendRow    = 18
	legendSwatch = 14
	legendPad    = 6
)

// Legend draws one row per class, labels[k] being class k's text: a
// swatch of its ClassColor and the label beside it, black text on white.
// The picture is as wide as the longest label.
func Legend(labels []string) *image.RGBA {
	face := basicfont.Face7x13
	widest := 0
	for _, l := range labels {
		widest = max(widest, font.MeasureString(face, l).Ceil())
	}
	width := legendPad*3 + legendSwatch + widest
	img := image.NewRGBA(image.Rect(0, 0, width, legendPad*2+len(labels)*legendRow))
	fill(img, img.Rect, color.RGBA{255, 255, 255, 255})
	d := &font.Drawer{Dst: img, Src: image.Black, Face: face}
	for k, l := range labels {
		y := legendPad + k*legendRow
		sw := image.Rect(legendPad, y+(legendRow-legendSwatch)/2, legendPad+legendSwatch, y+(legendRow+legendSwatch)/2)
		fill(img, sw.Inset(-1), color.RGBA{96, 96, 96, 255}) // outline, so light colors show on white
		fill(img, sw, ClassColor(uint8(k)))
		d.Dot = fixed.P(sw.Max.X+legendPad, y+legendRow/2+face.Ascent/2)
		d.DrawString(l)
	}
	return img
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// HexColor is c as "#rrggbb".
func HexColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }
