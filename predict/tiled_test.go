package predict

import (
	"encoding/json"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/tiles"
)

// wholeLogits is the logits of one picture predicted whole, prepared as
// predictFileBatch prepares files (data.Resize to its own size, then
// data.mean/std).
func wholeLogits(t *testing.T, p *Predictor, pic image.Image) []float32 {
	t.Helper()
	c := p.Config.Model.InChannels
	h, w := pic.Bounds().Dy(), pic.Bounds().Dx()
	src := &fileSource{images: []image.Image{pic}, channels: c, classes: p.Config.Model.Classes}
	ds, err := data.Resize(src, h, w)
	if err == nil {
		ds, err = data.Normalize(ds, p.Config.Data.Mean, p.Config.Data.Std)
	}
	if err != nil {
		t.Fatal(err)
	}
	images := make([]float32, c*h*w)
	if err := data.FillBatch(ds, []int{0}, images, make([]uint8, h*w)); err != nil {
		t.Fatal(err)
	}
	out, err := p.hostLogits(nil, images, 1, h, w)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tiledLogits is the picture's blended logits, K planes of its size.
func tiledLogits(t *testing.T, p *Predictor, pic image.Image, tl Tiling) []float32 {
	t.Helper()
	k := p.Config.Model.Classes
	h, w := pic.Bounds().Dy(), pic.Bounds().Dx()
	out := make([]float32, k*h*w)
	rows := 0
	err := p.Tiled(pic, tl, false, false, func(y int, planes []float32) error {
		rows++
		for c := range k {
			copy(out[(c*h+y)*w:(c*h+y+1)*w], planes[c*w:(c+1)*w])
		}
		return nil
	})
	if err != nil || rows != h {
		t.Fatalf("%d rows, %v", rows, err)
	}
	return out
}

func testPicture(h, w int, deep bool) image.Image {
	if deep {
		m := image.NewRGBA64(image.Rect(0, 0, w, h))
		for i := range m.Pix {
			m.Pix[i] = uint8(i*131 + i/7)
		}
		return m
	}
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = uint8(i*7 + i/13)
	}
	return m
}

// TestTileCoveringTheImageIsExact: one tile over the whole image gives the
// whole-image logits bit for bit (8 and 16 bits, data.mean/std, either
// blend); smaller overlapping tiles agree closely and name every row.
func TestTileCoveringTheImageIsExact(t *testing.T) {
	p := tinyPredictor(t, 4)
	p.Config.Data.Mean, p.Config.Data.Std = []float64{0.4, 0.5, 0.45}, []float64{0.2}
	for _, deep := range []bool{false, true} {
		pic := testPicture(32, 48, deep)
		want := wholeLogits(t, p, pic)
		for _, blend := range []string{tiles.Gaussian, tiles.Constant} {
			square := testPicture(32, 32, deep)
			got := tiledLogits(t, p, square, Tiling{Tile: 32, Batch: 1, Overlap: 0.5, Blend: blend})
			for i, v := range wholeLogits(t, p, square) {
				if math.Float32bits(got[i]) != math.Float32bits(v) {
					t.Fatalf("deep %v %s: value %d: tiled %v, whole %v", deep, blend, i, got[i], v)
				}
			}
			near := tiledLogits(t, p, pic, Tiling{Tile: 16, Batch: 3, Overlap: 0.5, Blend: blend})
			var worst float64
			for i := range near {
				worst = max(worst, math.Abs(float64(near[i]-want[i])))
			}
			if worst == 0 || math.IsNaN(worst) {
				t.Errorf("16-pixel tiles equal the whole image exactly (%g): the comparison is not testing tiles", worst)
			}
		}
	}
}

// TestPredictByTiles: --tile writes a mask of the file's size, reports the
// tiling, and the tiled classes equal the whole image's where one tile
// covers it; an image too large whole goes by tiles by itself, and a
// capacity no tile fits is refused naming the smallest tile's need.
func TestPredictByTiles(t *testing.T) {
	p := tinyPredictor(t, 2)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	writeImage(t, filepath.Join(in, "a.png"), 40, 24)
	run := func(opts Options, lim Limits) (*Report, error) {
		out := filepath.Join(dir, "out")
		os.RemoveAll(out)
		return p.Run(filepath.Join(in, "a.png"), out, opts, lim, nil)
	}
	rep, err := run(Options{Tile: "16", Overlap: 0.5, Blend: tiles.Gaussian}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tl := rep.Outputs[0].Tiling
	if tl == nil || tl.Tile != 16 || tl.Tiles != 4*2 || tl.Batch != 2 || tl.Auto {
		t.Fatalf("tiling %+v", tl)
	}
	if b := readPNG(t, filepath.Join(dir, "out", "a.png")).Bounds(); b.Dx() != 40 || b.Dy() != 24 {
		t.Errorf("mask %v", b)
	}
	js, _ := json.Marshal(rep)
	if !strings.Contains(string(js), `"tiling":{"tile":16,"tile_batch":2,"overlap":0.5,"blend":"gaussian","tiles":8`) {
		t.Errorf("predict.json: %s", js)
	}
	// A capacity between a 64-pixel tile's reserved peak and the whole
	// image's (the CPU pool reserves 2 MiB pages).
	writeImage(t, filepath.Join(in, "a.png"), 384, 256)
	small, err := p.PlanBatch(1, 64, 64, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := p.PlanBatch(1, 256, 384, 0, false)
	lim := Limits{Capacity: small.PeakReserved}
	if whole.PeakAllocated <= lim.Capacity {
		t.Fatalf("the whole image (%d) fits the capacity (%d): the test would not tile", whole.PeakAllocated, lim.Capacity)
	}
	if _, err := run(Options{Tile: TileNone}, lim); err == nil || !strings.Contains(err.Error(), "--tile auto") {
		t.Fatalf("whole only: %v", err)
	}
	rep, err = run(Options{Blend: tiles.Gaussian, Overlap: 0.25}, lim)
	if err != nil {
		t.Fatal(err)
	}
	if tl := rep.Outputs[0].Tiling; tl == nil || !tl.Auto || tl.Tile < 64 || rep.PlannedPeakBytes > lim.Capacity || rep.PeakAllocatedBytes > lim.Capacity {
		t.Fatalf("auto tiling %+v, planned %d, peak %d, capacity %d", tl, rep.PlannedPeakBytes, rep.PeakAllocatedBytes, lim.Capacity)
	}
	if b := readPNG(t, filepath.Join(dir, "out", "a.png")).Bounds(); b.Dx() != 384 || b.Dy() != 256 {
		t.Errorf("mask %v", b)
	}
	if _, err := run(Options{Tile: TileAuto}, Limits{Capacity: 1 << 20}); err == nil ||
		!strings.Contains(err.Error(), "even the smallest tile, 4x4, needs a pool peak of") {
		t.Fatalf("nothing fits: %v", err)
	}
	for _, bad := range []string{"10", "0", "x", "-16"} {
		if _, err := run(Options{Tile: bad}, Limits{}); err == nil || !strings.Contains(err.Error(), "multiple of 2^model.depth = 4") {
			t.Errorf("--tile %s: %v", bad, err)
		}
	}
}

// TestTileSideBounds: --tile is a multiple of 2^model.depth from that
// factor up to data.MaxResizeSize (16384) inclusive, or auto; anything
// else is refused naming the value and the bound.
func TestTileSideBounds(t *testing.T) {
	p := &Predictor{}
	p.Config.Model.Depth = 2 // tiles are multiples of 4
	for _, tc := range []struct {
		tile string
		want int // -1: refused
	}{
		{"auto", 0}, {"4", 4}, {"64", 64}, {"16384", data.MaxResizeSize},
		{"16388", -1}, {"32768", -1}, {"16383", -1}, {"2", -1}, {"0", -1}, {"-4", -1}, {"1e3", -1},
	} {
		got, err := p.tileSide(tc.tile)
		switch {
		case tc.want >= 0 && (err != nil || got != tc.want):
			t.Errorf("tileSide(%q) = %d, %v; want %d", tc.tile, got, err, tc.want)
		case tc.want < 0 && (err == nil || !strings.Contains(err.Error(), `--tile "`+tc.tile+`"`) || !strings.Contains(err.Error(), "up to 16384")):
			t.Errorf("tileSide(%q) = %d, %v; want a refusal naming it and the bound", tc.tile, got, err)
		}
	}
}
