package data

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
)

// maskPixels is a decoded mask: the file's name, the decoder's picture, its
// size and how the file stores the values.
type maskPixels struct {
	name   string
	img    image.Image
	w, h   int
	bits   int    // 16 for a 16-bit mask (values 0..65535), else 8 (0..255)
	format string // the file's kind for people, e.g. "16-bit gray PNG", "8-bit palette PNG", "palette GIF"
}

// maskBits is 16 for a picture whose values are 16-bit, else 8.
func maskBits(m image.Image) int {
	switch m.(type) {
	case *image.Gray16, *image.RGBA64, *image.NRGBA64:
		return 16
	}
	return 8
}

// rawRow writes the value of every pixel of row y of a mask picture into
// row (one value a pixel): the palette index of a palette image (PNG, GIF
// or TIFF), the gray level of a grayscale one, read by value: 0..255 for 8-bit
// gray, 0..65535 for 16-bit gray (the whole 16-bit number, as PIL reads
// it, never its high byte). Any other picture is accepted when every pixel
// is a shade of gray (R = G = B), whose level is the value (16-bit for a
// 16-bit picture); a colored pixel is an error naming the file and the
// pixel, since colors are not class indices.
func rawRow(name string, m image.Image, y int, row []uint16) error {
	b := m.Bounds()
	w := b.Dx()
	switch s := m.(type) {
	case *image.Paletted:
		for x, v := range s.Pix[y*s.Stride:][:w] {
			row[x] = uint16(v)
		}
		return nil
	case *image.Gray:
		for x, v := range s.Pix[y*s.Stride:][:w] {
			row[x] = uint16(v)
		}
		return nil
	case *image.Gray16:
		src := s.Pix[y*s.Stride:][:2*w]
		for x := range w {
			row[x] = uint16(src[2*x])<<8 | uint16(src[2*x+1]) // big-endian
		}
		return nil
	case *image.RGBA64, *image.NRGBA64: // 16-bit RGB(A) and 16-bit gray with transparency
		for x := range w {
			c := color.NRGBA64Model.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
			if c.R != c.G || c.G != c.B {
				return colorMaskError(name, x, y, fmt.Sprintf("rgb(%d, %d, %d) of 65535", c.R, c.G, c.B))
			}
			row[x] = c.R
		}
		return nil
	}
	for x := range w {
		c := color.NRGBAModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
		if c.R != c.G || c.G != c.B {
			return colorMaskError(name, x, y, fmt.Sprintf("rgb(%d, %d, %d)", c.R, c.G, c.B))
		}
		row[x] = uint16(c.R)
	}
	return nil
}

func colorMaskError(name string, x, y int, rgb string) error {
	return fmt.Errorf("%s: the mask is a color image (pixel x=%d, y=%d is %s); a mask must be a grayscale or palette PNG, GIF or TIFF whose pixel values are class indices",
		name, x, y, rgb)
}

// histogram counts the pixels of each raw value, ascending, one row at a
// time; a colored pixel is an error (see rawRow).
func (m maskPixels) histogram() ([]valueCount, error) {
	row := make([]uint16, m.w)
	counts := make([]int64, 1<<m.bits)
	for y := range m.h {
		if err := rawRow(m.name, m.img, y, row); err != nil {
			return nil, err
		}
		for _, v := range row {
			counts[v]++
		}
	}
	var out []valueCount
	for v, n := range counts {
		if n > 0 {
			out = append(out, valueCount{uint16(v), n})
		}
	}
	return out, nil
}

// classes maps every pixel of the mask to its class by lut (a class, Ignore,
// or -1: no class), in place where the decoder's picture allows (m.img must
// not be used after: row y of classes ends before row y+1 of the picture
// begins). A value that is no class, or a colored pixel, is an error naming
// the file and the pixel; desc says how lut was made.
func (m maskPixels) classes(lut []int16, desc string) (*image.Gray, error) {
	out := &image.Gray{Stride: m.w, Rect: image.Rect(0, 0, m.w, m.h)}
	if pix, _, ok := pixBuffer(m.img); ok {
		out.Pix = pix[:m.w*m.h]
	} else {
		out.Pix = make([]uint8, m.w*m.h)
	}
	return out, m.classesInto(lut, desc, out.Pix)
}

// classesInto is classes writing into dst (w*h values, row-major), which
// may be the decoder's picture's own bytes.
func (m maskPixels) classesInto(lut []int16, desc string, dst []uint8) error {
	row := make([]uint16, m.w)
	for y := range m.h {
		if err := rawRow(m.name, m.img, y, row); err != nil {
			return err
		}
		out := dst[y*m.w:][:m.w]
		for x, v := range row {
			c := lut[v]
			if c < 0 {
				return fmt.Errorf("%s: mask value %d at x=%d, y=%d is not a class (%s)", m.name, v, x, y, desc)
			}
			out[x] = uint8(c)
		}
	}
	return nil
}

// decodeMaskFile decodes a mask file.
func decodeMaskFile(path string, maxPixels int) (maskPixels, error) {
	im, err := openImageFile(path, maxPixels)
	if err != nil {
		return maskPixels{}, err
	}
	defer im.Close()
	return im.decodeMask()
}

// decodeMask is decodeMaskFile on the file's bytes, its values checked
// (a colored pixel is an error); name is used in errors.
func decodeMask(name string, b []byte, maxPixels int) (maskPixels, error) {
	im, err := readImageHeader(name, bytes.NewReader(b), int64(len(b)), maxPixels)
	if err != nil {
		return maskPixels{}, err
	}
	m, err := im.decodeMask()
	if err == nil {
		_, err = m.histogram()
	}
	if err != nil {
		return maskPixels{}, err
	}
	return m, nil
}

// decodeMask decodes the file as a mask.
func (im *imageFile) decodeMask() (maskPixels, error) {
	m, err := im.decode()
	if err != nil {
		return maskPixels{}, err
	}
	bits := maskBits(m)
	return maskPixels{name: im.name, img: m, w: m.Bounds().Dx(), h: m.Bounds().Dy(), bits: bits, format: im.fileFormat(bits)}, nil
}
