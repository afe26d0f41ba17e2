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
		if isLoop(err) {
			return nil, fmt.Errorf("%s: %s", path, loopMsg(path))
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot read: %v", path, err)
	}
	return b, nil
}

// decodeFile decodes a PNG, JPEG, GIF or TIFF file (the format is told by
// its contents, not its name) of at most maxPixels pixels. Every error
// starts with name and says what is wrong with the file. format is the
// decoder's name of the format ("png", "jpeg", "gif", "tiff").
func decodeFile(name string, b []byte, maxPixels int) (img image.Image, format string, err error) {
	if isTIFF(b) {
		if _, err := checkTIFF(name, b); err != nil {
			return nil, "", err
		}
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %s", name, describeDecodeError(err, ""))
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, "", fmt.Errorf("%s: %s image of %dx%d pixels: an image needs at least one pixel", name, strings.ToUpper(format), cfg.Height, cfg.Width)
	}
	if int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return nil, "", fmt.Errorf("%s: %s image of %dx%d (height x width) pixels is larger than the %d pixels memunet reads; scale it down beforehand",
			name, strings.ToUpper(format), cfg.Height, cfg.Width, maxPixels)
	}
	img, _, err = image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %s", name, describeDecodeError(err, format))
	}
	if img.Bounds().Empty() { // a GIF's first frame may be smaller than its header says
		return nil, "", fmt.Errorf("%s: %s image has an empty first frame", name, strings.ToUpper(format))
	}
	return img, format, nil
}

// describeDecodeError turns a decoder error into a sentence for the user.
func describeDecodeError(err error, format string) string {
	switch {
	case errors.Is(err, image.ErrFormat):
		return "not a PNG, JPEG or GIF file, and not a TIFF (unknown format); images must be PNG, JPEG, GIF or TIFF, masks PNG, GIF or TIFF"
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

// maskPixels is a decoded mask: the raw value of every pixel, row-major
// from its top-left, its size, and how the file stores the values.
type maskPixels struct {
	raw    []uint16
	w, h   int
	bits   int    // 16 for a 16-bit mask (values 0..65535), else 8 (0..255)
	format string // the file's kind for people, e.g. "16-bit gray PNG", "8-bit palette PNG", "palette GIF"
}

// rawMask returns the value of every pixel of a mask picture, row-major
// from its top-left: the palette index of a palette image (PNG, GIF or TIFF), the
// gray level of a grayscale one, read by value: 0..255 for 8-bit gray,
// 0..65535 for 16-bit gray (the whole 16-bit number, as PIL reads it, never
// its high byte). Any other picture is accepted when every pixel
// is a shade of gray (R = G = B), whose level is the value (16-bit for a
// 16-bit picture); a colored pixel is an error naming the file and the
// pixel, since colors are not class indices. bits is 16 for a 16-bit
// picture, else 8.
func rawMask(name string, m image.Image) (raw []uint16, bits int, err error) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]uint16, w*h)
	switch s := m.(type) {
	case *image.Paletted:
		for y := range h {
			for x, v := range s.Pix[y*s.Stride : y*s.Stride+w] {
				out[y*w+x] = uint16(v)
			}
		}
		return out, 8, nil
	case *image.Gray:
		for y := range h {
			for x, v := range s.Pix[y*s.Stride : y*s.Stride+w] {
				out[y*w+x] = uint16(v)
			}
		}
		return out, 8, nil
	case *image.Gray16:
		for y := range h {
			row := s.Pix[y*s.Stride : y*s.Stride+2*w]
			for x := range w {
				out[y*w+x] = uint16(row[2*x])<<8 | uint16(row[2*x+1]) // big-endian
			}
		}
		return out, 16, nil
	case *image.RGBA64, *image.NRGBA64: // 16-bit RGB(A) and 16-bit gray with transparency
		for y := range h {
			for x := range w {
				c := color.NRGBA64Model.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
				if c.R != c.G || c.G != c.B {
					return nil, 0, colorMaskError(name, x, y, fmt.Sprintf("rgb(%d, %d, %d) of 65535", c.R, c.G, c.B))
				}
				out[y*w+x] = c.R
			}
		}
		return out, 16, nil
	}
	for y := range h {
		for x := range w {
			c := color.NRGBAModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			if c.R != c.G || c.G != c.B {
				return nil, 0, colorMaskError(name, x, y, fmt.Sprintf("rgb(%d, %d, %d)", c.R, c.G, c.B))
			}
			out[y*w+x] = uint16(c.R)
		}
	}
	return out, 8, nil
}

func colorMaskError(name string, x, y int, rgb string) error {
	return fmt.Errorf("%s: the mask is a color image (pixel x=%d, y=%d is %s); a mask must be a grayscale or palette PNG, GIF or TIFF whose pixel values are class indices",
		name, x, y, rgb)
}

// fileFormat names how an image or mask file stores its values, from its
// header: "16-bit gray PNG", "8-bit palette PNG", "palette GIF", "16-bit
// gray TIFF (tiled 256x256, LZW)", ... (bits: the depth of the decoded
// picture, for formats whose header says nothing).
func fileFormat(b []byte, format string, bits int) string {
	switch format {
	case "png":
		// The signature (8 bytes), IHDR's length and type (8), width and
		// height (8), then the bit depth and the color type.
		if len(b) < 26 {
			break
		}
		kind := map[byte]string{0: "gray", 2: "RGB", 3: "palette", 4: "gray+alpha", 6: "RGBA"}[b[25]]
		if kind == "" {
			break
		}
		return fmt.Sprintf("%d-bit %s PNG", b[24], kind)
	case "gif":
		return "palette GIF"
	case "tiff":
		if t, err := tiffHeader(b); err == nil {
			return t.format()
		}
	}
	return fmt.Sprintf("%d-bit %s", bits, strings.ToUpper(format))
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
	img, _, err := decodeFile(name, b, maxPixels)
	if err != nil {
		return nil, err
	}
	return toRGBA(img, channels == 1), nil
}

// decodeImageDeep is decodeImageFile keeping 16 bits per channel where
// the file has them (see toDeep).
func decodeImageDeep(path string, channels, maxPixels int) (image.Image, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	img, _, err := decodeFile(path, b, maxPixels)
	if err != nil {
		return nil, err
	}
	return toDeep(img, channels == 1), nil
}

// decodeMaskFile decodes a mask file into its raw values (see rawMask).
func decodeMaskFile(path string, maxPixels int) (maskPixels, error) {
	b, err := readFile(path)
	if err != nil {
		return maskPixels{}, err
	}
	return decodeMask(path, b, maxPixels)
}

// decodeMask is decodeMaskFile on the file's bytes; name is used in errors.
func decodeMask(name string, b []byte, maxPixels int) (maskPixels, error) {
	m, format, err := decodeFile(name, b, maxPixels)
	if err != nil {
		return maskPixels{}, err
	}
	raw, bits, err := rawMask(name, m)
	if err != nil {
		return maskPixels{}, err
	}
	return maskPixels{raw: raw, w: m.Bounds().Dx(), h: m.Bounds().Dy(), bits: bits, format: fileFormat(b, format, bits)}, nil
}
