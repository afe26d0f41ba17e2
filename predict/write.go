package predict

import (
	"encoding/binary"
	"fmt"
	"image"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/outdir"
	xdraw "golang.org/x/image/draw"
)

// scaleMask scales a class map from w x h to ow x oh, nearest neighbor.
func scaleMask(m []uint8, w, h, ow, oh int) []uint8 {
	if w == ow && h == oh {
		return m
	}
	src := &image.Gray{Pix: m, Stride: w, Rect: image.Rect(0, 0, w, h)}
	dst := image.NewGray(image.Rect(0, 0, ow, oh))
	xdraw.NearestNeighbor.Scale(dst, dst.Rect, src, src.Rect, xdraw.Src, nil)
	return dst.Pix
}

// writeMask writes a palette PNG whose pixel values are the classes and
// whose colors are data.ClassColor's.
// With values (each class's raw value in the training masks, where they
// are not the class indices) it writes those values instead: 8-bit gray
// when they fit, else 16-bit gray, so a set with 0/255 masks gets 0/255
// masks back.
func writeMask(path string, m []uint8, w, h int, values []int) error {
	r := image.Rect(0, 0, w, h)
	if values == nil {
		return outdir.WritePNG(path, &image.Paletted{Pix: m, Stride: w, Rect: r, Palette: data.MaskPalette()})
	}
	if slices.Max(values) <= 255 {
		img := image.NewGray(r)
		for i, k := range m {
			img.Pix[i] = uint8(values[k])
		}
		return outdir.WritePNG(path, img)
	}
	img := image.NewGray16(r)
	for i, k := range m {
		img.Pix[2*i], img.Pix[2*i+1] = uint8(values[k]>>8), uint8(values[k])
	}
	return outdir.WritePNG(path, img)
}

// writeProbs writes one image's class probabilities (K planes of w x h),
// scaled to ow x oh (bilinear, align_corners=False), into dir as names
// (outputOf's): one .npy (float32, K x oh x ow), or one 16-bit gray PNG per
// class (65535 = 1).
func writeProbs(dir string, names []string, probs []float32, k, w, h, ow, oh int) error {
	planes := probs[:k*w*h] // at the file's size already: no copy
	if w != ow || h != oh {
		planes = make([]float32, 0, k*ow*oh)
		for c := range k {
			planes = append(planes, resizePlane(probs[c*w*h:(c+1)*w*h], w, h, ow, oh)...)
		}
	}
	if len(names) == 1 && strings.HasSuffix(names[0], ".npy") {
		return writeNpy(filepath.Join(dir, names[0]), planes, k, oh, ow)
	}
	for c, name := range names {
		img := image.NewGray16(image.Rect(0, 0, ow, oh))
		for i, v := range planes[c*ow*oh : (c+1)*ow*oh] {
			q := uint16(math.Round(float64(min(max(v, 0), 1)) * 65535))
			img.Pix[2*i], img.Pix[2*i+1] = uint8(q>>8), uint8(q)
		}
		if err := outdir.WritePNG(filepath.Join(dir, name), img); err != nil {
			return err
		}
	}
	return nil
}

// probName is class c's probability map of stem.
func probName(stem string, c int) string { return fmt.Sprintf("%s_prob%d.png", stem, c) }

// resizePlane scales a w x h plane to ow x oh bilinearly, PyTorch's
// align_corners=False (source coordinates clamped to the plane).
func resizePlane(src []float32, w, h, ow, oh int) []float32 {
	if w == ow && h == oh {
		return src
	}
	out := make([]float32, ow*oh)
	coord := func(d, n, on int) (int, int, float64) {
		x := max((float64(d)+0.5)*float64(n)/float64(on)-0.5, 0)
		x0 := min(int(x), n-1)
		return x0, min(x0+1, n-1), x - float64(x0)
	}
	for y := range oh {
		y0, y1, fy := coord(y, h, oh)
		for x := range ow {
			x0, x1, fx := coord(x, w, ow)
			top := float64(src[y0*w+x0])*(1-fx) + float64(src[y0*w+x1])*fx
			bot := float64(src[y1*w+x0])*(1-fx) + float64(src[y1*w+x1])*fx
			out[y*ow+x] = float32(top*(1-fy) + bot*fy)
		}
	}
	return out
}

// writeNpy writes values as a NumPy .npy file (format 1.0, little-endian
// float32, C order) of the given shape.
func writeNpy(path string, values []float32, shape ...int) error {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s,), }", strings.Join(dims, ", "))
	// magic (6) + version (2) + length (2) + header + newline: a multiple of 64
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	err := outdir.WriteFile(path, func(w io.Writer) error {
		head := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
		binary.LittleEndian.PutUint16(head[8:], uint16(len(header)))
		if _, err := w.Write(append(head, header...)); err != nil {
			return err
		}
		var b [4]byte
		for _, v := range values {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			if _, err := w.Write(b[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
