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
// luma, color.Gray16Model's weights). A 16-bit color source is converted
// in place (src must not be used after), a 16-bit gray one into a new
// picture.
func toDeep(src image.Image, gray bool) image.Image {
	if !is16(src) {
		return toRGBA(src, gray)
	}
	w, h := src.Bounds().Dx(), src.Bounds().Dy()
	return &image.RGBA64{Pix: convertRows(src, 8, newRGBA64Rows(src, gray).convert), Stride: 8 * w, Rect: image.Rect(0, 0, w, h)}
}

// rgba64Rows converts a 16-bit picture to opaque RGBA64 one row at a time,
// pixel for pixel as toDeep does, into a row of its own.
type rgba64Rows struct {
	src  image.Image
	gray bool
	row  *image.RGBA64
}

func newRGBA64Rows(src image.Image, gray bool) *rgba64Rows {
	return &rgba64Rows{src: src, gray: gray, row: image.NewRGBA64(image.Rect(0, 0, src.Bounds().Dx(), 1))}
}

// convert returns row y (0 at the top) as RGBA64 bytes, valid until the
// next call.
func (r *rgba64Rows) convert(y int) []uint8 {
	b := r.src.Bounds()
	w, row := b.Dx(), r.row
	// Colors unmultiplied by alpha, as toRGBA takes them
	// (color.NRGBA64Model's rule, without boxing every pixel).
	switch s := r.src.(type) {
	case *image.Gray16:
		src := s.Pix[y*s.Stride:][:2*w]
		for x := range w {
			for ch := range 3 {
				row.Pix[8*x+2*ch], row.Pix[8*x+2*ch+1] = src[2*x], src[2*x+1]
			}
		}
	case *image.NRGBA64:
		src := s.Pix[y*s.Stride:][:8*w]
		for x := range w {
			copy(row.Pix[8*x:8*x+6], src[8*x:8*x+6])
		}
	case *image.RGBA64:
		for x := range w {
			c := unpremultiply64(s.RGBA64At(b.Min.X+x, b.Min.Y+y))
			row.SetRGBA64(x, 0, color.RGBA64{R: c.R, G: c.G, B: c.B})
		}
	default:
		for x := range w {
			c := color.NRGBA64Model.Convert(r.src.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
			row.SetRGBA64(x, 0, color.RGBA64{R: c.R, G: c.G, B: c.B})
		}
	}
	for p := 0; p < len(row.Pix); p += 8 {
		if r.gray {
			rr, g, bl := uint32(row.Pix[p])<<8|uint32(row.Pix[p+1]), uint32(row.Pix[p+2])<<8|uint32(row.Pix[p+3]), uint32(row.Pix[p+4])<<8|uint32(row.Pix[p+5])
			l := (19595*rr + 38470*g + 7471*bl + 1<<15) >> 16
			for ch := range 3 {
				row.Pix[p+2*ch], row.Pix[p+2*ch+1] = uint8(l>>8), uint8(l)
			}
		}
		row.Pix[p+6], row.Pix[p+7] = 0xff, 0xff
	}
	return row.Pix
}

// unpremultiply64 is color.NRGBA64Model.Convert of a premultiplied color.
func unpremultiply64(c color.RGBA64) color.NRGBA64 {
	r, g, b, a := uint32(c.R), uint32(c.G), uint32(c.B), uint32(c.A)
	switch a {
	case 0xffff:
		return color.NRGBA64{uint16(r), uint16(g), uint16(b), 0xffff}
	case 0:
		return color.NRGBA64{}
	}
	return color.NRGBA64{uint16(r * 0xffff / a), uint16(g * 0xffff / a), uint16(b * 0xffff / a), uint16(a)}
}

// normalizeDecoded writes the first c channels of a decoded picture to
// out, planar, exactly as normalizeDeep(toDeep(src, gray)) would, one row
// at a time: no converted picture is made beside the decoder's.
func normalizeDecoded(src image.Image, gray bool, c int, out []float32) {
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	plane := w * h
	if is16(src) {
		rows := newRGBA64Rows(src, gray)
		for y := range h {
			row := rows.convert(y)
			for ch := range c {
				dst := out[ch*plane+y*w:][:w]
				for x := range dst {
					v := float32(uint16(row[8*x+2*ch])<<8|uint16(row[8*x+2*ch+1])) / 65535
					dst[x] = (v - Mean) / Std
				}
			}
		}
		return
	}
	rows := newRGBARows(src, gray)
	for y := range h {
		row := rows.convert(y)
		for ch := range c {
			dst := out[ch*plane+y*w:][:w]
			for x := range dst {
				v := float32(row[4*x+ch]) / 255
				dst[x] = (v - Mean) / Std
			}
		}
	}
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
