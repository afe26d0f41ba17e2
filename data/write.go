package data

import (
	"bytes"
	"context"
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
// masks/ files, so nothing is overwritten (a temporary file a killed
// writer left, outdir.IsTemp, is removed instead); each file is written
// whole or not at all, never through a link (outdir.WriteFile). It writes
// the whole set or none: on an error it removes what it wrote and the
// folders it made. The caller holds the folder's lock.
func WriteFolder(src ImageSource, dir string) error {
	return WriteFolderUntil(context.Background(), src, dir)
}

// WriteFolderUntil is WriteFolder stopped once ctx is done: it checks
// between samples, removes what it wrote and returns context.Cause(ctx).
func WriteFolderUntil(ctx context.Context, src ImageSource, dir string) error {
	imgDir, maskDir := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	var made, written []string
	err := func() error {
		for _, d := range []string{imgDir, maskDir} {
			if err := clearTemps(d); err != nil {
				return err
			}
			if _, err := os.Lstat(d); os.IsNotExist(err) {
				made = append(made, d)
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
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
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
			written = append(written, filepath.Join(imgDir, name))
			pm := image.NewPaletted(mask.Bounds(), pal)
			copy(pm.Pix, mask.Pix)
			buf.Reset()
			if err := png.Encode(&buf, pm); err != nil {
				return fmt.Errorf("encoding mask %d: %w", i, err)
			}
			if err := outdir.WriteBytes(filepath.Join(maskDir, name), buf.Bytes()); err != nil {
				return err
			}
			written = append(written, filepath.Join(maskDir, name))
		}
		return nil
	}()
	if err != nil {
		for _, f := range written {
			os.Remove(f)
		}
		for _, d := range made {
			os.Remove(d) // only if empty: never another's file
		}
	}
	return err
}

// clearTemps readies d for WriteFolder: it removes the temporary files a
// killed writer left in the real folder d and refuses d if it holds any
// other file; it never looks through a link.
func clearTemps(d string) error {
	if st, err := os.Lstat(d); err != nil || !st.IsDir() {
		return nil // absent (made next), or a link Subfolder refuses with the reason
	}
	entries, err := os.ReadDir(d)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		if outdir.IsTemp(e.Name()) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(d, e.Name())); err != nil {
				return err
			}
			continue
		}
		n++
	}
	if n > 0 {
		return fmt.Errorf("%s already holds %d files; write into a new or empty directory", d, n)
	}
	return nil
}
