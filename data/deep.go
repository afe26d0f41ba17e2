package data

import (
	"image"
	"image/color"
	"image/draw"

	xdraw "golang.org/x/image/draw"
)

// Images with 16 bits per channel (16-bit TIFF, PNG) keep them: their raw
// intensity is v = p/65535, normalized as 8-bit ones are, (v-Mean)/Std or by
// data.mean/std. An 8-bit view (the high byte) serves previews and writes.

// DeepImager is a source whose images may have 16 bits per channel:
// DeepImage returns sample i's image as *image.RGBA (8-bit) or
// *image.RGBA64 (16-bit; R = G = B = luma for one channel), at (0, 0),
// and its mask. The file sources, Resize and the nifti set are ones.
type DeepImager interface {
	DeepImage(i int) (image.Image, *image.Gray, error)
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

// EightBit is the 8-bit view of a picture toDeep made (ReadImageDeep,
// DeepImage): m itself, or the high byte of every channel.
func EightBit(m image.Image) *image.RGBA {
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

// Window writes the first c channels of the h x w window at (y0, x0) of
// a picture toDeep made (ReadImageDeep, DeepImage) to out, planar,
// normalized as the datasets normalize it: (v-Mean)/Std, then v*a + b
// per channel where a is not nil (data.mean/std: NormCoefficients). Where
// the window leaves the picture, reflect mirrors it about its edges
// (numpy's "reflect": tiles.Layout's padding), else the values are 0 (a
// patch's padding).
func Window(m image.Image, c, y0, x0, h, w int, a, b []float32, reflect bool, out []float32) {
	H, W := m.Bounds().Dy(), m.Bounds().Dx()
	rgba, _ := m.(*image.RGBA)
	deep, _ := m.(*image.RGBA64)
	for ch := range c {
		dst := out[ch*h*w : (ch+1)*h*w]
		for y := range h {
			sy := y0 + y
			if reflect {
				sy = ReflectIndex(sy, H)
			}
			for x := range w {
				sx := x0 + x
				if reflect {
					sx = ReflectIndex(sx, W)
				}
				if sy < 0 || sy >= H || sx < 0 || sx >= W {
					dst[y*w+x] = 0
					continue
				}
				var v float32
				if rgba != nil {
					v = float32(rgba.Pix[sy*rgba.Stride+4*sx+ch]) / 255
				} else {
					o := sy*deep.Stride + 8*sx + 2*ch
					v = float32(uint16(deep.Pix[o])<<8|uint16(deep.Pix[o+1])) / 65535
				}
				n := (v - Mean) / Std
				if a != nil {
					n = n*a[ch] + b[ch]
				}
				dst[y*w+x] = n
			}
		}
	}
}

// ReflectIndex maps i onto [0, n) by mirroring about the ends without
// repeating them (-1 -> 1, n -> n-2), as often as it takes: how Window
// pads tiles, and predict pads a volume's windows.
func ReflectIndex(i, n int) int {
	if n == 1 {
		return 0
	}
	period := 2 * (n - 1)
	i %= period
	if i < 0 {
		i += period
	}
	if i >= n {
		i = period - i
	}
	return i
}

// NormCoefficients are data.mean and data.std as Normalize applies them
// after the package's normalization: v*a[c] + b[c]; nil, nil for the
// package's own Mean and Std.
func NormCoefficients(mean, std []float64, c int) (a, b []float32, err error) {
	if err := ValidateNorm(mean, std, c); err != nil {
		return nil, nil, err
	}
	if defaultNorm(mean, std) {
		return nil, nil, nil
	}
	a, b = make([]float32, c), make([]float32, c)
	for ch := range c {
		m, s := float64(Mean), float64(Std)
		if len(mean) > 0 {
			m = mean[min(ch, len(mean)-1)]
		}
		if len(std) > 0 {
			s = std[min(ch, len(std)-1)]
		}
		// (x*Std + Mean - m) / s = x*a + b
		a[ch] = float32(Std / s)
		b[ch] = float32((Mean - m) / s)
	}
	return a, b, nil
}

// ScalePicture scales a picture toDeep made to h x w as Resize scales
// images (draw.BiLinear; 16 bits kept); one already h x w is returned as
// it is.
func ScalePicture(m image.Image, h, w int) image.Image {
	b := m.Bounds()
	if b.Dx() == w && b.Dy() == h {
		return m
	}
	dr := image.Rect(0, 0, w, h)
	var out xdraw.Image = image.NewRGBA(dr)
	if is16(m) {
		out = image.NewRGBA64(dr)
	}
	xdraw.BiLinear.Scale(out, dr, m, b, xdraw.Src, nil)
	return out
}
