package data

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	_ "image/gif" // register the formats image.Decode reads
	_ "image/jpeg"
	_ "image/png"
	"io"
	"os"
	"strings"
)

// MaxImagePixels bounds width*height of an image or mask file. It is checked
// from the file's header before the pixels are decoded, so a corrupt or
// hostile header cannot make the decoder allocate gigabytes.
const MaxImagePixels = 1 << 27 // 134 Mpx, 512 MiB as RGBA

// readFile reads a whole image file; the error names the file.
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot read: %v", path, err)
	}
	return b, nil
}

// decodeFile decodes a PNG, JPEG or GIF file (the format is told by its
// contents, not its name) of at most maxPixels pixels. Every error starts
// with name and says what is wrong with the file.
func decodeFile(name string, b []byte, maxPixels int) (image.Image, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %s", name, describeDecodeError(err, ""))
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("%s: %s image of %dx%d pixels: an image needs at least one pixel", name, strings.ToUpper(format), cfg.Height, cfg.Width)
	}
	if int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return nil, fmt.Errorf("%s: %s image of %dx%d (height x width) pixels is larger than the %d pixels memunet reads; scale it down beforehand",
			name, strings.ToUpper(format), cfg.Height, cfg.Width, maxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %s", name, describeDecodeError(err, format))
	}
	if img.Bounds().Empty() { // a GIF's first frame may be smaller than its header says
		return nil, fmt.Errorf("%s: %s image has an empty first frame", name, strings.ToUpper(format))
	}
	return img, nil
}

// describeDecodeError turns a decoder error into a sentence for the user.
func describeDecodeError(err error, format string) string {
	switch {
	case errors.Is(err, image.ErrFormat):
		return "not a PNG, JPEG or GIF file (unknown format); images must be PNG, JPEG or GIF, masks PNG or GIF"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "unexpected EOF"):
		if format == "" {
			return "the file is truncated (it ends inside the image header)"
		}
		return fmt.Sprintf("the %s file is truncated (it ends before all pixels are stored); re-export or re-download it", strings.ToUpper(format))
	}
	if format == "" {
		return fmt.Sprintf("cannot read the image header: %v; the file is corrupt or not an image", err)
	}
	if strings.Contains(err.Error(), "not enough image data") || strings.Contains(err.Error(), "not enough pixel data") {
		return fmt.Sprintf("the %s file is truncated or corrupt (%v); re-export or re-download it", strings.ToUpper(format), err)
	}
	return fmt.Sprintf("cannot decode the %s data: %v; the file is corrupt", strings.ToUpper(format), err)
}

// toRGBA converts a decoded image into a new RGBA picture at (0, 0) with
// opaque alpha. With gray set, R, G and B all hold the luma (ITU-R 601, as
// color.GrayModel and PIL's convert("L") compute it). Transparency is
// ignored: a non-premultiplied pixel keeps its color (PIL's convert("RGB")).
func toRGBA(src image.Image, gray bool) *image.RGBA {
	b := src.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	switch s := src.(type) {
	case *image.NRGBA:
		for y := range b.Dy() {
			copy(dst.Pix[y*dst.Stride:y*dst.Stride+4*b.Dx()], s.Pix[y*s.Stride:y*s.Stride+4*b.Dx()])
		}
	case *image.Gray:
		for y := range b.Dy() {
			row := s.Pix[y*s.Stride : y*s.Stride+b.Dx()]
			for x, v := range row {
				p := y*dst.Stride + 4*x
				dst.Pix[p], dst.Pix[p+1], dst.Pix[p+2] = v, v, v
			}
		}
	default:
		draw.Draw(dst, dst.Rect, src, b.Min, draw.Src)
		if hasAlpha(src) {
			// draw premultiplied the colors by alpha; take them unmultiplied.
			for y := range b.Dy() {
				for x := range b.Dx() {
					c := color.NRGBAModel.Convert(src.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
					p := y*dst.Stride + 4*x
					dst.Pix[p], dst.Pix[p+1], dst.Pix[p+2] = c.R, c.G, c.B
				}
			}
		}
	}
	for p := 0; p < len(dst.Pix); p += 4 {
		if gray {
			// color.GrayModel's weights: (19595 R + 38470 G + 7471 B) / 65536.
			r, g, bl := uint32(dst.Pix[p]), uint32(dst.Pix[p+1]), uint32(dst.Pix[p+2])
			y := uint8((19595*r + 38470*g + 7471*bl + 1<<15) >> 16)
			dst.Pix[p], dst.Pix[p+1], dst.Pix[p+2] = y, y, y
		}
		dst.Pix[p+3] = 255
	}
	return dst
}

// hasAlpha reports whether a picture of a type other than NRGBA, Gray or
// opaque YCbCr might hold non-opaque pixels.
func hasAlpha(m image.Image) bool {
	switch s := m.(type) {
	case *image.YCbCr, *image.Gray, *image.Gray16, *image.CMYK:
		return false
	case *image.Paletted:
		for _, c := range s.Palette {
			if _, _, _, a := c.RGBA(); a != 0xffff {
				return true
			}
		}
		return false
	case interface{ Opaque() bool }:
		return !s.Opaque()
	}
	return true
}

// rawMask returns the 8-bit value of every pixel of a mask picture,
// row-major from its top-left: the palette index of a palette image (PNG
// or GIF), the gray level of a grayscale one (a 16-bit gray level's high
// byte). Any other picture is accepted when every pixel is a shade of gray
// (R = G = B), whose level is the value; a colored pixel is an error naming
// the file and the pixel, since colors are not class indices.
func rawMask(name string, m image.Image) ([]uint8, error) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]uint8, w*h)
	switch s := m.(type) {
	case *image.Paletted:
		for y := range h {
			copy(out[y*w:(y+1)*w], s.Pix[y*s.Stride:y*s.Stride+w])
		}
		return out, nil
	case *image.Gray:
		for y := range h {
			copy(out[y*w:(y+1)*w], s.Pix[y*s.Stride:y*s.Stride+w])
		}
		return out, nil
	case *image.Gray16:
		for y := range h {
			for x := range w {
				out[y*w+x] = s.Pix[y*s.Stride+2*x] // big-endian: the high byte
			}
		}
		return out, nil
	}
	for y := range h {
		for x := range w {
			c := color.NRGBAModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			if c.R != c.G || c.G != c.B {
				return nil, fmt.Errorf("%s: the mask is a color image (pixel x=%d, y=%d is rgb(%d, %d, %d)); a mask must be a grayscale or palette PNG or GIF whose pixel values are class indices",
					name, x, y, c.R, c.G, c.B)
			}
			out[y*w+x] = c.R
		}
	}
	return out, nil
}

// decodeImageFile decodes an image file into an RGBA picture (gray for
// channels 1).
func decodeImageFile(path string, channels, maxPixels int) (*image.RGBA, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return decodeImage(path, b, channels, maxPixels)
}

// decodeImage is decodeImageFile on the file's bytes; name is used in errors.
func decodeImage(name string, b []byte, channels, maxPixels int) (*image.RGBA, error) {
	img, err := decodeFile(name, b, maxPixels)
	if err != nil {
		return nil, err
	}
	return toRGBA(img, channels == 1), nil
}

// decodeMaskFile decodes a mask file into its raw values (see rawMask) and
// its size.
func decodeMaskFile(path string, maxPixels int) (raw []uint8, w, h int, err error) {
	b, err := readFile(path)
	if err != nil {
		return nil, 0, 0, err
	}
	return decodeMask(path, b, maxPixels)
}

// decodeMask is decodeMaskFile on the file's bytes; name is used in errors.
func decodeMask(name string, b []byte, maxPixels int) (raw []uint8, w, h int, err error) {
	m, err := decodeFile(name, b, maxPixels)
	if err != nil {
		return nil, 0, 0, err
	}
	raw, err = rawMask(name, m)
	if err != nil {
		return nil, 0, 0, err
	}
	return raw, m.Bounds().Dx(), m.Bounds().Dy(), nil
}
