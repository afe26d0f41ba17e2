package predict

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"

	"golang.org/x/image/tiff"
)

// tinyPredictor is an untrained fp32 predictor of a 3-class UNet of depth
// 2 (random weights: the tests here are about files and memory, not
// classes), closed at the test's end.
func tinyPredictor(t *testing.T, batch int) *Predictor {
	t.Helper()
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes = 4, 2, 3
	cfg.Data.Size = 16
	p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, batch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// writeImage writes a w x h RGBA PNG of a gradient at path.
func writeImage(t *testing.T, path string, w, h int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

func TestInputSize(t *testing.T) {
	cfg := config.Default() // depth 3: multiples of 8
	for _, tc := range []struct {
		resize       []int
		scale        float64
		h, w, th, tw int
	}{
		{nil, 0, 32, 32, 32, 32},
		{nil, 0, 30, 45, 32, 48},
		{nil, 0, 3, 5, 8, 8},
		{nil, 0.5, 100, 60, 48, 32},
		{[]int{64, 40}, 0, 17, 300, 64, 40},
	} {
		c := cfg
		c.Data.Resize, c.Data.Scale = tc.resize, tc.scale
		if h, w := inputSize(c, tc.h, tc.w); h != tc.th || w != tc.tw {
			t.Errorf("%v scale %v: %dx%d -> %dx%d, want %dx%d", tc.resize, tc.scale, tc.h, tc.w, h, w, tc.th, tc.tw)
		}
	}
}

// TestWriteMaskValues: class maps are written as class indices (palette),
// or in the dataset's values: 8-bit gray when they fit, 16-bit otherwise.
func TestWriteMaskValues(t *testing.T) {
	m := []uint8{0, 1, 1, 0, 2, 1}
	dir := t.TempDir()
	for _, tc := range []struct {
		values []int
		want   []int
	}{
		{nil, []int{0, 1, 1, 0, 2, 1}},
		{[]int{0, 128, 255}, []int{0, 128, 128, 0, 255, 128}},
		{[]int{0, 1000, 65535}, []int{0, 1000, 1000, 0, 65535, 1000}},
	} {
		path := filepath.Join(dir, "m.png")
		if err := writeMask(path, m, 3, 2, tc.values); err != nil {
			t.Fatal(err)
		}
		img := readPNG(t, path)
		var got []int
		for y := 0; y < 2; y++ {
			for x := 0; x < 3; x++ {
				switch p := img.(type) {
				case *image.Paletted:
					got = append(got, int(p.ColorIndexAt(x, y)))
				case *image.Gray:
					got = append(got, int(p.GrayAt(x, y).Y))
				case *image.Gray16:
					got = append(got, int(p.Gray16At(x, y).Y))
				default:
					t.Fatalf("values %v: a %T", tc.values, img)
				}
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("values %v: %v, want %v", tc.values, got, tc.want)
		}
	}
}

// TestPredictRefusesByHostMemory: an image whose batch cannot fit the
// host's available memory is refused before it is decoded, naming the
// figure available; with room it is predicted and the report carries the
// plan.
func TestPredictRefusesByHostMemory(t *testing.T) {
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "big.png"), 512, 384)
	p := tinyPredictor(t, 1)
	var note bytes.Buffer
	_, err := p.Run(in, t.TempDir(), Options{Overlay: true, Tile: TileNone}, Limits{Available: 2 << 20}, &note)
	var se *SizeError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "above the 2.00 MiB this process may use") || se.Need.Total() <= 2<<20 {
		t.Errorf("host limit: %v", err)
	}
	// Without --tile none it tries tiles, and refuses what no tile fits.
	_, err = p.Run(in, t.TempDir(), Options{Overlay: true}, Limits{Available: 2 << 20}, &note)
	if err == nil || !strings.Contains(err.Error(), "even the smallest tile, 4x4, needs about") || !strings.Contains(err.Error(), "above the 1.50 MiB, 3/4 of the memory this process may use") {
		t.Errorf("host limit, by tiles: %v", err)
	}
	rep, err := p.Run(in, t.TempDir(), Options{}, Limits{Available: 1 << 40}, &note)
	if err != nil || rep.PlannedPeakBytes == 0 {
		t.Errorf("with room: %v, planned %+v", err, rep)
	}
}

// TestPredictTIFF: a directory's .tif and .tiff files are inputs, read as
// the datasets read them; each mask has its file's size.
func TestPredictTIFF(t *testing.T) {
	in := t.TempDir()
	for name, size := range map[string][2]int{"a.tif": {16, 16}, "b.tiff": {20, 24}} {
		img := image.NewRGBA(image.Rect(0, 0, size[1], size[0]))
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 5)
		}
		var b bytes.Buffer
		if err := tiff.Encode(&b, img, nil); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	rep, err := tinyPredictor(t, 2).Run(in, out, Options{}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Images != 2 {
		t.Fatalf("%d images", rep.Images)
	}
	if b := readPNG(t, filepath.Join(out, "b.png")).Bounds(); b.Dx() != 24 || b.Dy() != 20 {
		t.Errorf("b.tiff's mask is %v", b)
	}
}
