package data

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"

	"github.com/memunet/memunet/outdir"
)

// WriteFolder writes every sample of src in the folder layout that
// data.source: folder reads: DIR/images/NNNNN.png (RGB) and
// DIR/masks/NNNNN.png (a palette PNG whose indices are the classes, see
// MaskPalette). It refuses a directory that already holds images/ or
// masks/ files, so nothing is overwritten; each file is written whole or
// not at all, never through a link (outdir.WriteFile). The caller holds
// the folder's lock.
func WriteFolder(src ImageSource, dir string) error {
	imgDir, maskDir := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	for _, d := range []string{imgDir, maskDir} {
		if entries, err := os.ReadDir(d); err == nil && len(entries) > 0 {
			return fmt.Errorf("%s already holds %d files; write into a new or empty directory", d, len(entries))
		}
		if err := outdir.Subfolder(d); err != nil {
			if _, serr := os.Stat(d); isLoop(serr) {
				return fmt.Errorf("%s: %s", d, loopMsg(d))
			}
			return err
		}
	}
	digits := len(fmt.Sprint(max(src.Len()-1, 0)))
	digits = max(digits, 5)
	pal := MaskPalette()
	var buf bytes.Buffer
	for i := range src.Len() {
		img, mask, err := src.Image(i)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%0*d.png", digits, i)
		buf.Reset()
		if err := png.Encode(&buf, img); err != nil {
			return fmt.Errorf("encoding image %d: %w", i, err)
		}
		if err := outdir.WriteBytes(filepath.Join(imgDir, name), buf.Bytes()); err != nil {
			return err
		}
		pm := image.NewPaletted(mask.Bounds(), pal)
		copy(pm.Pix, mask.Pix)
		buf.Reset()
		if err := png.Encode(&buf, pm); err != nil {
			return fmt.Errorf("encoding mask %d: %w", i, err)
		}
		if err := outdir.WriteBytes(filepath.Join(maskDir, name), buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
