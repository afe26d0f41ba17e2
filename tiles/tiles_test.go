package tiles

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		h, w, tile   int
		overlap      float64
		rows, cols   int
		ph, pw       int
		top, left, s int
	}{
		{16, 16, 16, 0.5, 1, 1, 16, 16, 0, 0, 8},   // one tile: the image itself
		{10, 12, 16, 0.25, 1, 1, 16, 16, 3, 2, 12}, // smaller than a tile: padded around
		{32, 20, 16, 0, 2, 2, 32, 32, 0, 6, 16},
		{40, 40, 16, 0.5, 4, 4, 40, 40, 0, 0, 8},
		{41, 40, 16, 0.5, 5, 4, 48, 40, 3, 0, 8},
		{4096, 4096, 256, 0.5, 31, 31, 4096, 4096, 0, 0, 128},
		{100, 37, 8, 0.9, 93, 30, 100, 37, 0, 0, 1}, // stride rounds to 1
	} {
		l, err := New(tc.h, tc.w, tc.tile, tc.overlap)
		if err != nil {
			t.Fatal(err)
		}
		got := [9]int{l.Rows, l.Cols, l.PH, l.PW, l.PadTop, l.PadLeft, l.Stride}
		want := [9]int{tc.rows, tc.cols, tc.ph, tc.pw, tc.top, tc.left, tc.s}
		if got != want {
			t.Errorf("%dx%d tile %d overlap %g: rows, cols, ph, pw, top, left, stride = %v, want %v", tc.h, tc.w, tc.tile, tc.overlap, got[:7], want[:7])
		}
		// Every image pixel is covered; no tile starts past the padding.
		covered := make([]bool, l.H*l.W)
		for k := range l.Count() {
			y0, x0 := l.Origin(k)
			if y0 < -l.PadTop || x0 < -l.PadLeft || y0+l.Tile > l.PH-l.PadTop || x0+l.Tile > l.PW-l.PadLeft {
				t.Fatalf("tile %d at (%d, %d) leaves the padded image", k, y0, x0)
			}
			for y := max(y0, 0); y < min(y0+l.Tile, l.H); y++ {
				for x := max(x0, 0); x < min(x0+l.Tile, l.W); x++ {
					covered[y*l.W+x] = true
				}
			}
		}
		for k, c := range covered {
			if !c {
				t.Fatalf("%dx%d: pixel %d is under no tile", tc.h, tc.w, k)
			}
		}
	}
	for _, o := range []float64{-0.1, 0.95, 1, math.NaN()} {
		if _, err := New(8, 8, 4, o); err == nil || !strings.Contains(err.Error(), "[0, 0.9]") {
			t.Errorf("overlap %g: %v", o, err)
		}
	}
}

func TestWeights(t *testing.T) {
	g := Weights(16, Gaussian)
	if g[8*16+8] != 1 || g[7*16+7] != 1 || g[0] <= 0 || g[0] >= 1e-6 || g[3*16+5] != g[5*16+3] || g[0] != g[15*16+15] {
		t.Errorf("gaussian: centre %g, corner %g, symmetric %v", g[8*16+8], g[0], g[3*16+5] == g[5*16+3])
	}
	for _, v := range Weights(8, Constant) {
		if v != 1 {
			t.Fatalf("constant weight %g", v)
		}
	}
	if ValidateBlend("--blend", "median") == nil {
		t.Error("median blend accepted")
	}
}

// naive blends every tile into whole-image float64 arrays: the reference.
func naive(l Layout, k int, weights []float64, outs [][]float32) []float32 {
	acc, ws := make([]float64, k*l.PH*l.PW), make([]float64, l.PH*l.PW)
	for i, out := range outs {
		y0, x0 := l.Origin(i)
		y0, x0 = y0+l.PadTop, x0+l.PadLeft
		for y := range l.Tile {
			for x := range l.Tile {
				w := weights[y*l.Tile+x]
				ws[(y0+y)*l.PW+x0+x] += w
				for c := range k {
					acc[(c*l.PH+y0+y)*l.PW+x0+x] += w * float64(out[(c*l.Tile+y)*l.Tile+x])
				}
			}
		}
	}
	res := make([]float32, k*l.H*l.W)
	for c := range k {
		for y := range l.H {
			for x := range l.W {
				py, px := y+l.PadTop, x+l.PadLeft
				res[(c*l.H+y)*l.W+x] = float32(acc[(c*l.PH+py)*l.PW+px] / ws[py*l.PW+px])
			}
		}
	}
	return res
}

// blend runs a Blender over outs, batch tiles between Emits, and returns
// the k planes of the image.
func blend(t *testing.T, l Layout, k int, weights []float64, outs [][]float32, batch int) []float32 {
	t.Helper()
	b := NewBlender(l, k, weights, batch)
	res := make([]float32, k*l.H*l.W)
	seen := 0
	emit := func(y int, planes []float32) error {
		if y != seen {
			t.Fatalf("row %d emitted, want %d", y, seen)
		}
		seen++
		for c := range k {
			copy(res[(c*l.H+y)*l.W:(c*l.H+y+1)*l.W], planes[c*l.W:(c+1)*l.W])
		}
		return nil
	}
	for i, out := range outs {
		if err := b.Add(i, out); err != nil {
			t.Fatal(err)
		}
		if (i+1)%batch == 0 {
			if err := b.Emit(emit); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Emit(emit); err != nil {
		t.Fatal(err)
	}
	if seen != l.H {
		t.Fatalf("%d rows emitted, want %d", seen, l.H)
	}
	return res
}

// TestBlender: the band gives the whole-image blend bit for bit, for any
// batch between Emits; one tile over the whole image is its output bit for
// bit, Gaussian weights or not; tiles out of order are refused.
func TestBlender(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		h, w, tile int
		overlap    float64
	}{{16, 16, 16, 0.5}, {37, 29, 8, 0.5}, {40, 24, 16, 0.25}, {9, 50, 16, 0.75}, {33, 33, 8, 0}} {
		l, err := New(tc.h, tc.w, tc.tile, tc.overlap)
		if err != nil {
			t.Fatal(err)
		}
		const k = 3
		outs := make([][]float32, l.Count())
		for i := range outs {
			outs[i] = make([]float32, k*tc.tile*tc.tile)
			for j := range outs[i] {
				outs[i][j] = float32(rng.NormFloat64() * 10)
			}
		}
		for _, mode := range []string{Gaussian, Constant} {
			wts := Weights(tc.tile, mode)
			want := naive(l, k, wts, outs)
			for _, batch := range []int{1, 2, 3, 7, l.Count()} {
				got := blend(t, l, k, wts, outs, batch)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%+v %s batch %d: value %d = %v, want %v", tc, mode, batch, i, got[i], want[i])
					}
				}
			}
			if l.Count() == 1 && l.H == tc.tile && l.W == tc.tile {
				for i, v := range blend(t, l, k, wts, outs, 1) {
					if math.Float32bits(v) != math.Float32bits(outs[0][i]) {
						t.Fatalf("%s: one tile over the image: value %d = %v, the tile's %v", mode, i, v, outs[0][i])
					}
				}
			}
		}
	}
	l, _ := New(32, 32, 16, 0.5)
	b := NewBlender(l, 1, Weights(16, Gaussian), 1)
	if err := b.Add(1, make([]float32, 256)); err == nil {
		t.Error("tile 1 before tile 0 accepted")
	}
	for i := range 6 { // two tile rows fit the band of a batch of 1 (3 tiles a row)
		if err := b.Add(i, make([]float32, 256)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(6, make([]float32, 256)); err == nil || !strings.Contains(err.Error(), "Emit between batches") {
		t.Errorf("a third row without Emit: %v", err)
	}
}
