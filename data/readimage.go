package data

import (
	"bufio"
	"errors"
	"fmt"
	"image"
	"os"
)

// ReadImage decodes an image file (PNG, JPEG, GIF or TIFF) exactly as the file
// datasets read their images: an RGBA picture at (0, 0), opaque, gray
// replicated to R, G and B for channels 1; at most MaxImagePixels pixels.
// Every error names the file. memunet predict reads its inputs with it.
func ReadImage(path string, channels int) (*image.RGBA, error) {
	return decodeImageFile(path, channels, MaxImagePixels)
}

// ImageSize is the height and width an image file's header declares,
// read without decoding its pixels (so predict can say what an image will
// need before decoding it). The error names the file.
func ImageSize(path string) (h, w int, err error) {
	f, err := os.Open(path)
	if err != nil {
		if isLoop(err) {
			return 0, 0, fmt.Errorf("%s: %s", path, loopMsg(path))
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return 0, 0, fmt.Errorf("%s: cannot read: %v", path, err)
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(bufio.NewReader(f))
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %s", path, describeDecodeError(err, ""))
	}
	return cfg.Height, cfg.Width, nil
}
