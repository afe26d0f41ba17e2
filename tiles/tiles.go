package tiles

import (
	"fmt"
	"math"
)

// Layout is how tiles cover an H x W image.
type Layout struct {
	H, W   int // the image
	Tile   int // the tiles' side
	Stride int // the step between neighbouring tiles
	// PadTop and PadLeft are the padding rows above and columns left of
	// the image; PH and PW the padded size: Tile + (Rows-1)*Stride and
	// Tile + (Cols-1)*Stride.
	PadTop, PadLeft int
	PH, PW          int
	Rows, Cols      int // tiles down and across
}

// MaxOverlap bounds the overlap: at 0.9 a tile steps a tenth of its side,
// a hundred tiles over each pixel.
const MaxOverlap = 0.9

// ValidateOverlap refuses an overlap outside [0, MaxOverlap]; what names
// the flag or key.
func ValidateOverlap(what string, overlap float64) error {
	if !(overlap >= 0 && overlap <= MaxOverlap) {
		return fmt.Errorf("%s %g: the share of a tile its neighbour covers must be in [0, %g], e.g. 0.25 or 0.5 (nnU-Net's)", what, overlap, MaxOverlap)
	}
	return nil
}

// New lays tiles of side tile with the given overlap over an h x w image.
func New(h, w, tile int, overlap float64) (Layout, error) {
	if h < 1 || w < 1 || tile < 1 {
		return Layout{}, fmt.Errorf("tiles: an image of %dx%d and tiles of %d: sizes must be at least 1", h, w, tile)
	}
	if err := ValidateOverlap("tiles: overlap", overlap); err != nil {
		return Layout{}, err
	}
	s := max(1, int(math.Round(float64(tile)*(1-overlap))))
	l := Layout{H: h, W: w, Tile: tile, Stride: s}
	l.Rows, l.PH, l.PadTop = along(h, tile, s)
	l.Cols, l.PW, l.PadLeft = along(w, tile, s)
	return l, nil
}

// along is the tiles along a side of n pixels, the padded length and the
// padding before the image.
func along(n, tile, s int) (count, padded, before int) {
	count = 1
	if n > tile {
		count = (n-tile+s-1)/s + 1
	}
	padded = tile + (count-1)*s
	return count, padded, (padded - n) / 2
}

// Count is the number of tiles.
func (l Layout) Count() int { return l.Rows * l.Cols }

// Origin is tile k's top-left corner in image coordinates (negative or
// past the image where it covers padding); tiles are numbered row by row.
func (l Layout) Origin(k int) (y, x int) {
	return k/l.Cols*l.Stride - l.PadTop, k%l.Cols*l.Stride - l.PadLeft
}

// Blend modes.
const (
	Gaussian = "gaussian"
	Constant = "constant"
)

// ValidateBlend refuses a blend mode other than gaussian and constant.
func ValidateBlend(what, blend string) error {
	if blend != Gaussian && blend != Constant {
		return fmt.Errorf("%s %q: gaussian (tiles weigh most at their centre, sigma = tile/8) or constant (every pixel alike)", what, blend)
	}
	return nil
}

// Weights is a tile's weight at each of its tile*tile pixels, row by row.
func Weights(tile int, blend string) []float64 {
	w := make([]float64, tile*tile)
	if blend != Gaussian {
		for k := range w {
			w[k] = 1
		}
		return w
	}
	sigma := float64(tile) / 8
	g := make([]float64, tile)
	for i := range g {
		d := float64(i) + 0.5 - float64(tile)/2
		g[i] = math.Exp(-d * d / (2 * sigma * sigma))
	}
	top := g[tile/2] * g[tile/2] // the largest: a centre pixel's
	for y := range tile {
		for x := range tile {
			w[y*tile+x] = g[y] * g[x] / top
		}
	}
	return w
}

// OpenRows is the tile rows a batch of batch tiles, added in order, can
// leave open at once: those it spans and the one before it.
func (l Layout) OpenRows(batch int) int {
	return min(l.Rows, (max(batch, 1)+l.Cols-1)/l.Cols+1)
}

// BandBytes is a Blender's memory for k output planes (see the package
// doc).
func (l Layout) BandBytes(k, batch int) int64 {
	rows := int64(l.Tile + (l.OpenRows(batch)-1)*l.Stride)
	return rows * int64(l.PW) * int64(k+1) * 8
}

// Blender accumulates tiles' outputs (k planes each) in a band of rows
// and hands out each image row once every tile over it is in.
type Blender struct {
	l       Layout
	k       int
	weights []float64
	band    int       // the band's rows
	base    int       // the padded row the band starts at
	acc     []float64 // k planes of band x PW: Σ w·out
	wsum    []float64 // band x PW: Σ w
	next    int       // the tile Add expects
	out     []float32 // one finished row, k planes of W
}

// NewBlender blends k-plane tile outputs over l with the given weights
// (Weights), for tiles added at most batch at a time between Emits.
func NewBlender(l Layout, k int, weights []float64, batch int) *Blender {
	band := l.Tile + (l.OpenRows(batch)-1)*l.Stride
	return &Blender{l: l, k: k, weights: weights, band: band,
		acc: make([]float64, k*band*l.PW), wsum: make([]float64, band*l.PW), out: make([]float32, k*l.W)}
}

// Add adds tile k's output: k planes of Tile x Tile, float32. Tiles must
// come in order (0, 1, ...), and a batch's worth at most between Emits.
func (b *Blender) Add(tile int, out []float32) error {
	t, pw := b.l.Tile, b.l.PW
	if tile != b.next || len(out) != b.k*t*t {
		return fmt.Errorf("tiles: tile %d (%d values) added, want tile %d (%d values)", tile, len(out), b.next, b.k*t*t)
	}
	y0 := tile/b.l.Cols*b.l.Stride - b.base
	x0 := tile % b.l.Cols * b.l.Stride
	if y0 < 0 || y0+t > b.band {
		return fmt.Errorf("tiles: tile %d lies outside the band (rows %d..%d of the padded image): Emit between batches", tile, b.base, b.base+b.band)
	}
	for y := range t {
		row := (y0+y)*pw + x0
		wr := b.weights[y*t : (y+1)*t]
		ws := b.wsum[row : row+t]
		for x, w := range wr {
			ws[x] += w
		}
		for c := range b.k {
			acc := b.acc[c*b.band*pw+row : c*b.band*pw+row+t]
			src := out[(c*t+y)*t : (c*t+y+1)*t]
			for x, w := range wr {
				acc[x] += w * float64(src[x])
			}
		}
	}
	b.next++
	return nil
}

// Emit hands every image row no tile still to come touches to fn, in
// order: the row's index in the image and its k planes of W values (the
// blended outputs), valid during the call; then the band moves down.
func (b *Blender) Emit(fn func(y int, planes []float32) error) error {
	limit := b.l.PH // every tile in: all rows are finished
	if b.next < b.l.Count() {
		limit = b.next / b.l.Cols * b.l.Stride // the first row the next tile touches
	}
	pw, w := b.l.PW, b.l.W
	for py := b.base; py < limit; py++ {
		y := py - b.l.PadTop
		if y < 0 || y >= b.l.H {
			continue
		}
		r := (py - b.base) * pw
		for c := range b.k {
			acc := b.acc[c*b.band*pw+r+b.l.PadLeft:]
			ws := b.wsum[r+b.l.PadLeft:]
			dst := b.out[c*w : (c+1)*w]
			for x := range dst {
				dst[x] = float32(acc[x] / ws[x])
			}
		}
		if err := fn(y, b.out); err != nil {
			return err
		}
	}
	if shift := limit - b.base; shift > 0 {
		keep := max(b.band-shift, 0)
		for c := range b.k {
			plane := b.acc[c*b.band*pw : (c+1)*b.band*pw]
			copy(plane, plane[min(shift, b.band)*pw:])
			clear(plane[keep*pw:])
		}
		copy(b.wsum, b.wsum[min(shift, b.band)*pw:])
		clear(b.wsum[keep*pw:])
		b.base = limit
	}
	return nil
}
