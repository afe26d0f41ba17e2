package data

import (
	"image"
	"image/color"
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

// ReadImageDeep is ReadImage keeping 16 bits per channel where the file
// has them: an *image.RGBA, or an *image.RGBA64 for a 16-bit file (R = G
// = B = luma for channels 1), as the datasets read their images (Window
// cuts normalized tiles from it; EightBit is its 8-bit view).
func ReadImageDeep(path string, channels int) (image.Image, error) {
	return decodeImageDeep(path, channels, MaxImagePixels)
}

// ImageInfo is what an image file's header says ReadImageDeep will make
// of it, read without decoding its pixels (so predict can plan an image
// before decoding it; no pixel limit applies here).
type ImageInfo struct {
	H, W int
	// Depth is the bits per channel: 16 for 16-bit PNG and TIFF files,
	// else 8.
	Depth int
	// Decode is what ReadImageDeep holds at the decode's peak (the
	// decoder's picture, and a converted one beside it where the
	// conversion cannot be made in place); Picture what it holds after
	// (the picture it returns: 8 bytes a pixel at 16 bits, else 4).
	Decode, Picture int64
}

// ReadImageInfo is the ImageInfo of an image file's header. What is not a
// regular file is refused unread; the error names the file.
func ReadImageInfo(path string) (ImageInfo, error) {
	im, err := openImageFile(path, math.MaxInt)
	if err != nil {
		return ImageInfo{}, err
	}
	im.Close()
	info := ImageInfo{H: im.cfg.Height, W: im.cfg.Width, Depth: 8, Decode: im.imageCost()}
	switch im.cfg.ColorModel {
	case color.Gray16Model, color.RGBA64Model, color.NRGBA64Model:
		info.Depth = 16
	}
	info.Picture = int64(info.Depth/2) * im.pixels()
	return info, nil
}
