package data

import (
	"image"
	"math"
)

// ReadImage decodes an image file (PNG, JPEG, GIF or TIFF) exactly as the file
// datasets read their images: an RGBA picture at (0, 0), opaque, gray
// replicated to R, G and B for channels 1; at most MaxImagePixels pixels.
// What is not a regular file is refused unread. Every error names the
// file. memunet predict reads its inputs with it.
func ReadImage(path string, channels int) (*image.RGBA, error) {
	return decodeImageFile(path, channels, MaxImagePixels)
}

// ImageSize is the height and width an image file's header declares,
// read without decoding its pixels (so predict can say what an image will
// need before decoding it; no pixel limit applies here). What is not a
// regular file is refused unread. The error names the file.
func ImageSize(path string) (h, w int, err error) {
	im, err := openImageFile(path, math.MaxInt)
	if err != nil {
		return 0, 0, err
	}
	im.Close()
	return im.cfg.Height, im.cfg.Width, nil
}
