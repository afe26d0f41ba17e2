package data

import (
	"fmt"
	"image"
	"image/color"
	"path/filepath"

	"github.com/memunet/memunet/outdir"
)

// WritePreview writes a preview image to path whole, holding path's
// folder while it writes (no lock file stays beside it).
func WritePreview(path string, img image.Image) error {
	lock, err := outdir.Acquire(filepath.Dir(path), "memunet data preview")
	if err != nil {
		return err
	}
	defer lock.Clear()
	return outdir.WritePNG(path, img)
}

// Preview draws the samples idx of ds as training sees them in epoch
// (0-based) under cfg's flip and augmentation (Augmented): four to a row,
// each image beside its mask, scaled up to about 96 pixels wide
// (PreviewGrid).
func Preview(ds Dataset, idx []int, cfg LoaderConfig, epoch int) (*image.RGBA, error) {
	aug, err := Augmented(ds, idx, cfg, epoch)
	if err != nil {
		return nil, err
	}
	all := make([]int, len(idx))
	for i := range all {
		all[i] = i
	}
	_, w := ds.Size()
	return PreviewGrid(aug, all, 4, max(1, 96/max(w, 1)))
}

// PreviewGrid renders the samples indices of ds as a grid for looking at:
// each cell is the image (denormalized; 1- or 2-channel images shown as gray
// from channel 0, otherwise channels 0..2 as RGB) beside its mask in
// ClassColor colors, cols cells per row, every pixel scaled up scale times
// (nearest), cells separated by a 2-pixel gray gutter.
func PreviewGrid(ds Dataset, indices []int, cols, scale int) (*image.RGBA, error) {
	if cols < 1 || scale < 1 {
		return nil, fmt.Errorf("data: preview grid needs cols >= 1 and scale >= 1, got %d and %d", cols, scale)
	}
	c := ds.Channels()
	h, w := ds.Size()
	const gap = 2
	rows := (len(indices) + cols - 1) / cols
	cols = min(cols, max(len(indices), 1))
	cellW, cellH := 2*w*scale+gap, h*scale+gap
	if px := (int64(cols)*int64(cellW) + gap) * (int64(rows)*int64(cellH) + gap); px > MaxImagePixels {
		return nil, fmt.Errorf("data: a preview of %d samples of %dx%d at scale %d would be %d pixels, more than the %d an image may have; show fewer samples",
			len(indices), h, w, scale, px, MaxImagePixels)
	}
	out := image.NewRGBA(image.Rect(0, 0, cols*cellW+gap, rows*cellH+gap))
	gutter := color.RGBA{128, 128, 128, 255}
	for k := 0; k < len(out.Pix); k += 4 {
		out.Pix[k], out.Pix[k+1], out.Pix[k+2], out.Pix[k+3] = gutter.R, gutter.G, gutter.B, 255
	}
	img := make([]float32, c*h*w)
	mask := make([]uint8, h*w)
	for n, i := range indices {
		if err := ds.Sample(i, img, mask); err != nil {
			return nil, err
		}
		x0, y0 := gap+(n%cols)*cellW, gap+(n/cols)*cellH
		for y := range h * scale {
			for x := range w * scale {
				p := (y/scale)*w + x/scale
				var px color.RGBA
				if c >= 3 {
					px = color.RGBA{to8(Denormalize(img[p])), to8(Denormalize(img[h*w+p])), to8(Denormalize(img[2*h*w+p])), 255}
				} else {
					g := to8(Denormalize(img[p]))
					px = color.RGBA{g, g, g, 255}
				}
				out.SetRGBA(x0+x, y0+y, px)
				out.SetRGBA(x0+w*scale+x, y0+y, ClassColor(mask[p]))
			}
		}
	}
	return out, nil
}
