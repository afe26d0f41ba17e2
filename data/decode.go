package data

import (
	"bufio"
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

	"github.com/memunet/memunet/infile"
	"golang.org/x/image/tiff"
)

// MaxImagePixels bounds width*height of an image or mask file. It is checked
// from the file's header before the pixels are decoded, so a corrupt or
// hostile header cannot make the decoder allocate gigabytes.
const MaxImagePixels = 1 << 27 // 134 Mpx, 512 MiB as RGBA

// Bounds on a file's bytes beside its pixels: no image needs more than
// maxFileBytesPerPixel bytes a pixel (16-bit RGBA stored uncompressed is
// 8) plus maxFileExtraBytes of other chunks (profiles, text, thumbnails),
// so a larger file is something else, refused before it is read through.
const (
	maxFileBytesPerPixel = 16
	maxFileExtraBytes    = 64 << 20
)

// imageFile is an image file whose header has been read: its size, format
// and what decoding it will cost are known before a pixel is decoded. Its
// bytes are read where the decoder asks (r), never whole.
type imageFile struct {
	name        string
	r           io.ReaderAt
	size        int64
	close       func() error // nil for bytes in memory
	cfg         image.Config
	format      string    // the decoder's name: "png", "jpeg", "gif", "tiff"
	head        []byte    // the first bytes (a PNG's IHDR, for fileFormat)
	tiff        *tiffInfo // a TIFF's first directory
	progressive bool      // a progressive JPEG (see decodedBytes)
}

// openImageFile opens path (a regular file: a FIFO, a device or a socket is
// refused by name, unread) and reads its header; the error names the file.
func openImageFile(path string, maxPixels int) (*imageFile, error) {
	f, size, err := infile.Open(path, 0)
	if err != nil {
		return nil, fileError(path, err)
	}
	im, err := readImageHeader(path, f, size, maxPixels)
	if err != nil {
		f.Close()
		return nil, err
	}
	im.close = f.Close
	return im, nil
}

// fileError says why path could not be opened, naming it.
func fileError(path string, err error) error {
	var refused *infile.Error
	switch {
	case errors.As(err, &refused):
		return err
	case isLoop(err):
		return fmt.Errorf("%s: %s", path, loopMsg(path))
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: cannot read: %v", path, err)
}

// readImageHeader reads the header of an image of size bytes from r and
// checks it: a known format (a TIFF memunet reads right, see checkTIFF), at
// least one pixel, at most maxPixels, and a size its pixels can account
// for. Errors start with name.
func readImageHeader(name string, r io.ReaderAt, size int64, maxPixels int) (*imageFile, error) {
	if size == 0 {
		return nil, fmt.Errorf("%s: the file is empty (0 bytes); re-export or re-download it", name)
	}
	head := make([]byte, 32)
	n, _ := r.ReadAt(head, 0)
	im := &imageFile{name: name, r: r, size: size, head: head[:n]}
	var cfg image.Config
	var format string
	var err error
	if isTIFF(im.head) {
		// x/image/tiff reads a whole file into memory unless it is given
		// an io.ReaderAt, which image.DecodeConfig does not pass on.
		t, err := checkTIFF(name, r, size)
		if err != nil {
			return nil, err
		}
		im.tiff = &t
		cfg, err = tiff.DecodeConfig(im.section())
		format = "tiff"
		if err != nil {
			return nil, fmt.Errorf("%s: %s", name, describeDecodeError(err, ""))
		}
	} else if cfg, format, err = image.DecodeConfig(bufio.NewReader(im.section())); err != nil {
		return nil, fmt.Errorf("%s: %s", name, describeDecodeError(err, ""))
	}
	im.cfg, im.format = cfg, format
	px := int64(cfg.Width) * int64(cfg.Height)
	switch {
	case cfg.Width <= 0 || cfg.Height <= 0:
		return nil, fmt.Errorf("%s: %s image of %dx%d pixels: an image needs at least one pixel", name, strings.ToUpper(format), cfg.Height, cfg.Width)
	case px > int64(maxPixels):
		return nil, fmt.Errorf("%s: %s image of %dx%d (height x width) pixels is larger than the %d pixels memunet reads; scale it down beforehand",
			name, strings.ToUpper(format), cfg.Height, cfg.Width, maxPixels)
	case size > maxFileBytesPerPixel*px+maxFileExtraBytes:
		return nil, fmt.Errorf("%s: %d bytes for a %s image of %dx%d pixels, more than any image of that size holds; the file is corrupt or not an image",
			name, size, strings.ToUpper(format), cfg.Height, cfg.Width)
	}
	if format == "jpeg" {
		im.progressive = jpegProgressive(bufio.NewReader(im.section()))
	}
	// Bytes, not pixels: a progressive JPEG holds 5 times its picture
	// while it decodes. A mask's cost (maskCost) is at most this.
	if need := im.imageCost(); need > MaxDecodeBytes {
		return nil, fmt.Errorf("%s: %s of %dx%d (height x width) pixels takes %s to decode, %d a pixel, more than the %s memunet decodes of one file; scale it down, or save it as a baseline JPEG or a PNG",
			name, im.describe(), cfg.Height, cfg.Width, byteSize(need), need/px, byteSize(MaxDecodeBytes))
	}
	return im, nil
}

// describe names the file's kind for the decode budget's error:
// "progressive JPEG (YCbCr)", "16-bit gray PNG", "TIFF (...)".
func (im *imageFile) describe() string {
	if im.format != "jpeg" {
		return im.fileFormat(8)
	}
	kind := "baseline JPEG"
	if im.progressive {
		kind = "progressive JPEG"
	}
	switch im.cfg.ColorModel {
	case color.CMYKModel:
		return kind + " (CMYK)"
	case color.GrayModel:
		return kind + " (gray)"
	case color.RGBAModel:
		return kind + " (RGB)"
	}
	return kind + " (YCbCr)"
}

// section is the file from its start, to read through once.
func (im *imageFile) section() *io.SectionReader { return io.NewSectionReader(im.r, 0, im.size) }

// Close closes the file (nothing for bytes in memory).
func (im *imageFile) Close() error {
	if im.close == nil {
		return nil
	}
	return im.close()
}

// pixels is the image's width times height.
func (im *imageFile) pixels() int64 { return int64(im.cfg.Width) * int64(im.cfg.Height) }

// decodedBytes is what the decoder holds per pixel for the header's color
// model: the picture (8 for 16-bit color, 4 for 8-bit, 2 for 16-bit gray,
// 1 for gray or a palette). A JPEG decodes into planes of one byte a sample
// (YCbCr, and K for CMYK), an RGB or CMYK one converted into a new picture
// of 4 beside them, and a progressive one keeps 4 bytes a sample of
// coefficients besides.
func (im *imageFile) decodedBytes() int64 {
	m := im.cfg.ColorModel
	if im.format == "jpeg" {
		n := int64(3) // samples a pixel
		switch m {
		case color.GrayModel:
			n = 1
		case color.CMYKModel:
			n = 4
		}
		planes := n
		if m == color.RGBAModel || m == color.CMYKModel {
			planes += 4
		}
		if im.progressive {
			planes += 4 * n
		}
		return planes
	}
	switch {
	case m == color.RGBA64Model || m == color.NRGBA64Model:
		return 8
	case m == color.CMYKModel:
		return 4
	case m == color.RGBAModel || m == color.NRGBAModel:
		return 4
	case m == color.Gray16Model:
		return 2
	case m == color.GrayModel:
		return 1
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 8
}

// imageCost is the bytes decoding the file as a picture takes at its
// peak: the decoder's, and a converted one beside it where the conversion
// cannot be made in place (toRGBA, toDeep). Sample converts row by row into
// floats, and holds only the decoder's (decodedBytes).
func (im *imageFile) imageCost() int64 {
	return (im.decodedBytes() + im.convertedBytes()) * im.pixels()
}

// convertedBytes is what toRGBA or toDeep makes a pixel beside the
// decoder's picture: nothing where they convert it in place (4 or 8 bytes
// a pixel, in rows), else an RGBA picture, or an RGBA64 for 16-bit gray.
func (im *imageFile) convertedBytes() int64 {
	switch m := im.cfg.ColorModel; m {
	case color.RGBAModel, color.NRGBAModel, color.CMYKModel, color.RGBA64Model, color.NRGBA64Model:
		return 0
	case color.Gray16Model:
		return 8
	case color.GrayModel, color.YCbCrModel:
		return 4
	default:
		if _, ok := m.(color.Palette); ok {
			return 4
		}
		return 8
	}
}

// maskCost is the bytes decoding the file as a mask takes: the decoder's
// picture, which classes then overwrite in place.
func (im *imageFile) maskCost() int64 { return im.decodedBytes() * im.pixels() }

// decode decodes the pixels. Every error starts with the file's name.
func (im *imageFile) decode() (image.Image, error) {
	var img image.Image
	var err error
	if im.format == "tiff" {
		img, err = tiff.Decode(im.section())
	} else {
		img, _, err = image.Decode(bufio.NewReaderSize(im.section(), 64<<10))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s", im.name, describeDecodeError(err, im.format))
	}
	if img.Bounds().Empty() { // a GIF's first frame may be smaller than its header says
		return nil, fmt.Errorf("%s: %s image has an empty first frame", im.name, strings.ToUpper(im.format))
	}
	return img, nil
}

// decodeFile decodes a PNG, JPEG, GIF or TIFF file's bytes (the format is
// told by its contents, not its name) of at most maxPixels pixels. Every
// error starts with name and says what is wrong with the file. format is
// the decoder's name of the format ("png", "jpeg", "gif", "tiff").
func decodeFile(name string, b []byte, maxPixels int) (img image.Image, format string, err error) {
	im, err := readImageHeader(name, bytes.NewReader(b), int64(len(b)), maxPixels)
	if err != nil {
		return nil, "", err
	}
	img, err = im.decode()
	return img, im.format, err
}

// jpegProgressive reports whether a JPEG stream's frame is progressive
// (SOF2), walking its segments up to the frame header.
func jpegProgressive(r *bufio.Reader) bool {
	var b [2]byte
	if _, err := io.ReadFull(r, b[:]); err != nil || b != [2]byte{0xff, 0xd8} {
		return false
	}
	for range 1024 {
		c, err := r.ReadByte()
		if err != nil || c != 0xff {
			return false
		}
		m := byte(0xff)
		for m == 0xff { // fill bytes
			if m, err = r.ReadByte(); err != nil {
				return false
			}
		}
		switch {
		case m == 0xc2:
			return true
		case m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			return false // another frame type
		case m == 0x01 || m >= 0xd0 && m <= 0xd9:
			continue // no length
		}
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return false
		}
		if _, err := r.Discard(int(b[0])<<8 | int(b[1]) - 2); err != nil {
			return false
		}
	}
	return false
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

// pixBuffer is the bytes of a decoded picture whose rows lie one after the
// other from (0, 0), and its bytes per pixel; ok is false for any other.
func pixBuffer(m image.Image) (pix []byte, bpp int, ok bool) {
	var stride int
	var r image.Rectangle
	switch s := m.(type) {
	case *image.RGBA:
		pix, stride, r, bpp = s.Pix, s.Stride, s.Rect, 4
	case *image.NRGBA:
		pix, stride, r, bpp = s.Pix, s.Stride, s.Rect, 4
	case *image.CMYK:
		pix, stride, r, bpp = s.Pix, s.Stride, s.Rect, 4
	case *image.RGBA64:
		pix, stride, r, bpp = s.Pix, s.Stride, s.Rect, 8
	case *image.NRGBA64:
		pix, stride, r, bpp = s.Pix, s.Stride, s.Rect, 8
	case *image.Gray16:
		pix, stride, r, bpp = s.Pix, s.Stride, s.Rect, 2
	case *image.Gray:
		pix, stride, r, bpp = s.Pix, s.Stride, s.Rect, 1
	case *image.Paletted:
		pix, stride, r, bpp = s.Pix, s.Stride, s.Rect, 1
	default:
		return nil, 0, false
	}
	if r.Min != (image.Point{}) || stride != bpp*r.Dx() || len(pix) < stride*r.Dy() {
		return nil, 0, false
	}
	return pix, bpp, true
}

// toRGBA converts a decoded image into an RGBA picture at (0, 0) with
// opaque alpha. With gray set, R, G and B all hold the luma (ITU-R 601, as
// color.GrayModel and PIL's convert("L") compute it). Transparency is
// ignored: a non-premultiplied pixel keeps its color (PIL's convert("RGB")).
//
// A source of 4 or more bytes a pixel is converted in place, row by row
// (row y of the result ends where row y of the source begins or before),
// and must not be used after; any other gets a new picture. Either way no
// more than the larger of the two pictures is held, and one row.
func toRGBA(src image.Image, gray bool) *image.RGBA {
	w, h := src.Bounds().Dx(), src.Bounds().Dy()
	return &image.RGBA{Pix: convertRows(src, 4, newRGBARows(src, gray).convert), Stride: 4 * w, Rect: image.Rect(0, 0, w, h)}
}

// convertRows is the bytes of a converted picture of bpp bytes a pixel,
// row y being convert(y): src's own bytes where it has at least bpp a
// pixel (row y of the result ends where row y of src begins or before, so
// convert reads no row already overwritten), else new ones.
func convertRows(src image.Image, bpp int, convert func(y int) []uint8) []uint8 {
	w, h := src.Bounds().Dx(), src.Bounds().Dy()
	var pix []uint8
	if own, n, ok := pixBuffer(src); ok && n >= bpp {
		pix = own[:bpp*w*h]
	} else {
		pix = make([]uint8, bpp*w*h)
	}
	for y := range h {
		copy(pix[y*bpp*w:], convert(y))
	}
	return pix
}

// rgbaRows converts a decoded picture to 8-bit RGBA one row at a time,
// pixel for pixel as toRGBA does, into a row of its own.
type rgbaRows struct {
	src   image.Image
	gray  bool
	alpha bool // colors to take unmultiplied (see hasAlpha)
	row   *image.RGBA
}

func newRGBARows(src image.Image, gray bool) *rgbaRows {
	r := &rgbaRows{src: src, gray: gray, row: image.NewRGBA(image.Rect(0, 0, src.Bounds().Dx(), 1))}
	switch src.(type) {
	case *image.NRGBA, *image.Gray:
	default:
		r.alpha = hasAlpha(src)
	}
	return r
}

// convert returns row y (0 at the top) as RGBA bytes, valid until the next
// call.
func (r *rgbaRows) convert(y int) []uint8 {
	b := r.src.Bounds()
	w, sy, row := b.Dx(), b.Min.Y+y, r.row
	switch s := r.src.(type) {
	case *image.NRGBA:
		copy(row.Pix, s.Pix[y*s.Stride:][:4*w])
	case *image.Gray:
		for x, v := range s.Pix[y*s.Stride:][:w] {
			row.Pix[4*x], row.Pix[4*x+1], row.Pix[4*x+2] = v, v, v
		}
	default:
		draw.Draw(row, row.Rect, r.src, image.Pt(b.Min.X, sy), draw.Src)
		if r.alpha {
			// draw premultiplied the colors by alpha; take them unmultiplied.
			for x := range w {
				c := color.NRGBAModel.Convert(r.src.At(b.Min.X+x, sy)).(color.NRGBA)
				row.Pix[4*x], row.Pix[4*x+1], row.Pix[4*x+2] = c.R, c.G, c.B
			}
		}
	}
	for p := 0; p < len(row.Pix); p += 4 {
		if r.gray {
			// color.GrayModel's weights: (19595 R + 38470 G + 7471 B) / 65536.
			rr, g, bl := uint32(row.Pix[p]), uint32(row.Pix[p+1]), uint32(row.Pix[p+2])
			l := uint8((19595*rr + 38470*g + 7471*bl + 1<<15) >> 16)
			row.Pix[p], row.Pix[p+1], row.Pix[p+2] = l, l, l
		}
		row.Pix[p+3] = 255
	}
	return row.Pix
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

// fileFormat names how the file stores its values, from its header:
// "16-bit gray PNG", "8-bit palette PNG", "palette GIF", "16-bit gray TIFF
// (tiled 256x256, LZW)", ... (bits: the depth of the decoded picture, for
// formats whose header says nothing).
func (im *imageFile) fileFormat(bits int) string {
	switch im.format {
	case "png":
		// The signature (8 bytes), IHDR's length and type (8), width and
		// height (8), then the bit depth and the color type.
		b := im.head
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
		if im.tiff != nil {
			return im.tiff.format()
		}
	}
	return fmt.Sprintf("%d-bit %s", bits, strings.ToUpper(im.format))
}

// decodeImageFile decodes an image file into an RGBA picture (gray for
// channels 1).
func decodeImageFile(path string, channels, maxPixels int) (*image.RGBA, error) {
	im, err := openImageFile(path, maxPixels)
	if err != nil {
		return nil, err
	}
	defer im.Close()
	return im.decodeImage(channels)
}

// decodeImage is decodeImageFile on the file's bytes; name is used in errors.
func decodeImage(name string, b []byte, channels, maxPixels int) (*image.RGBA, error) {
	im, err := readImageHeader(name, bytes.NewReader(b), int64(len(b)), maxPixels)
	if err != nil {
		return nil, err
	}
	return im.decodeImage(channels)
}

// decodeImage decodes the file as an image (see toRGBA).
func (im *imageFile) decodeImage(channels int) (*image.RGBA, error) {
	img, err := im.decode()
	if err != nil {
		return nil, err
	}
	return toRGBA(img, channels == 1), nil
}

// decodeImageDeep is decodeImageFile keeping 16 bits per channel where
// the file has them (see toDeep).
func decodeImageDeep(path string, channels, maxPixels int) (image.Image, error) {
	im, err := openImageFile(path, maxPixels)
	if err != nil {
		return nil, err
	}
	defer im.Close()
	img, err := im.decode()
	if err != nil {
		return nil, err
	}
	return toDeep(img, channels == 1), nil
}
