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

// ImageDepth is the bits per channel an image file's header declares:
// 16 for 16-bit PNG and TIFF files, else 8. What is not a regular file is
// refused unread; the error names the file.
func ImageDepth(path string) (int, error) {
	im, err := openImageFile(path, math.MaxInt)
	if err != nil {
		return 0, err
	}
	im.Close()
	switch im.cfg.ColorModel {
	case color.Gray16Model, color.RGBA64Model, color.NRGBA64Model:
		return 16, nil
	}
	return 8, nil
}

// ImageCost is what ReadImageDeep holds of an image file, from its
// header: at the decode's peak (the decoder's picture, and a converted one
// beside it where the conversion cannot be made in place) and after (the
// picture it returns: 8 bytes a pixel for 16-bit files, else 4). What is
// not a regular file is refused unread; the error names the file.
func ImageCost(path string) (decode, picture int64, err error) {
	im, err := openImageFile(path, math.MaxInt)
	if err != nil {
		return 0, 0, err
	}
	im.Close()
	per := int64(4)
	switch im.cfg.ColorModel {
	case color.Gray16Model, color.RGBA64Model, color.NRGBA64Model:
		per = 8
	}
	return im.imageCost(), per * im.pixels(), nil
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
