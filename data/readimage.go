package data

import "image"

// ReadImage decodes an image file (PNG, JPEG or GIF) exactly as the file
// datasets read their images: an RGBA picture at (0, 0), opaque, gray
// replicated to R, G and B for channels 1; at most MaxImagePixels pixels.
// Every error names the file. memunet predict reads its inputs with it.
func ReadImage(path string, channels int) (*image.RGBA, error) {
	return decodeImageFile(path, channels, MaxImagePixels)
}
