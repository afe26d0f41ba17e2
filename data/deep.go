package data

import (
	"image"
	"image/color"
	"image/draw"
)

// Images with 16 bits per channel (16-bit TIFF, PNG) keep them: their raw
// intensity is v = p/65535, normalized as 8-bit ones are, (v-Mean)/Std or by
// data.mean/std. An 8-bit view (the high byte) serves previews and writes.

// deepImager is a source whose images may have 16 bits per channel:
// deepImage returns sample i's image as *image.RGBA (8-bit) or
// *image.RGBA64 (16-bit; R = G = B = luma for one channel) and its mask.
type deepImager interface {
	deepImage(i int) (image.Image, *image.Gray, error)
}

// is16 reports whether a decoded picture has 16 bits per channel.
func is16(m image.Image) bool {
	switch m.(type) {
	case *image.Gray16, *image.RGBA64, *image.NRGBA64:
		return true
	}
	return false
}

// toDeep converts a decoded picture as toRGBA does, keeping 16 bits per
// channel where it has them: an *image.RGBA for 8-bit pictures, else an
// *image.RGBA64 (opaque, at (0, 0); with gray set R, G and B hold the
// luma, color.Gray16Model's weights).
func toDeep(src image.Image, gray bool) image.Image {
	if !is16(src) {
		return toRGBA(src, gray)
	}
	b := src.Bounds()
	dst := image.NewRGBA64(image.Rect(0, 0, b.Dx(), b.Dy()))
	if g, ok := src.(*image.Gray16); ok {
		for y := range b.Dy() {
			row := g.Pix[y*g.Stride : y*g.Stride+2*b.Dx()]
			for x := range b.Dx() {
				p := y*dst.Stride + 8*x
				for ch := range 3 {
					dst.Pix[p+2*ch], dst.Pix[p+2*ch+1] = row[2*x], row[2*x+1]
				}
			}
		}
	} else {
		for y := range b.Dy() {
			for x := range b.Dx() {
				// Colors unmultiplied by alpha, as toRGBA takes them.
				c := color.NRGBA64Model.Convert(src.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
				dst.SetRGBA64(x, y, color.RGBA64{R: c.R, G: c.G, B: c.B})
			}
		}
	}
	for p := 0; p < len(dst.Pix); p += 8 {
		if gray {
			r, g, bl := uint32(dst.Pix[p])<<8|uint32(dst.Pix[p+1]), uint32(dst.Pix[p+2])<<8|uint32(dst.Pix[p+3]), uint32(dst.Pix[p+4])<<8|uint32(dst.Pix[p+5])
			y := (19595*r + 38470*g + 7471*bl + 1<<15) >> 16
			for ch := range 3 {
				dst.Pix[p+2*ch], dst.Pix[p+2*ch+1] = uint8(y>>8), uint8(y)
			}
		}
		dst.Pix[p+6], dst.Pix[p+7] = 0xff, 0xff
	}
	return dst
}

// to8bit is the 8-bit view of a picture toDeep made: m itself, or the high
// byte of every channel.
func to8bit(m image.Image) *image.RGBA {
	if r, ok := m.(*image.RGBA); ok {
		return r
	}
	b := m.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(dst, dst.Rect, m, b.Min, draw.Src)
	return dst
}

// normalizeDeep writes the first c channels of a picture toDeep made to
// out, planar, normalized as the package does: 8-bit values by
// normalize8, 16-bit values p as (p/65535 - Mean)/Std.
func normalizeDeep(m image.Image, c int, out []float32) {
	d, ok := m.(*image.RGBA64)
	if !ok {
		normalize8(m.(*image.RGBA), c, out)
		return
	}
	plane := d.Rect.Dx() * d.Rect.Dy()
	for ch := range c {
		dst := out[ch*plane : (ch+1)*plane]
		for p := range dst {
			v := float32(uint16(d.Pix[8*p+2*ch])<<8|uint16(d.Pix[8*p+2*ch+1])) / 65535
			dst[p] = (v - Mean) / Std
		}
	}
}
