package data

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// TestReadImageInfo: the header's size, depth and what ReadImageDeep will
// hold, for an 8-bit RGBA PNG (decoded and kept in place: 4 bytes a pixel)
// and a 16-bit gray one (2 decoded, 8 converted beside them, 8 kept).
func TestReadImageInfo(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name            string
		img             image.Image
		depth           int
		decode, picture int64
	}{
		{"rgba.png", image.NewRGBA(image.Rect(0, 0, 5, 3)), 8, 4 * 15, 4 * 15},
		{"gray16.png", image.NewGray16(image.Rect(0, 0, 5, 3)), 16, (2 + 8) * 15, 8 * 15},
	} {
		p := filepath.Join(dir, tc.name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, tc.img); err != nil {
			t.Fatal(err)
		}
		f.Close()
		info, err := ReadImageInfo(p)
		want := ImageInfo{H: 3, W: 5, Depth: tc.depth, Decode: tc.decode, Picture: tc.picture}
		if err != nil || info != want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, info, err, want)
		}
		if pic, err := ReadImageDeep(p, 3); err != nil || pic.Bounds().Dx() != 5 {
			t.Errorf("%s: ReadImageDeep %v", tc.name, err)
		}
	}
	if _, err := ReadImageInfo(filepath.Join(dir, "missing.png")); err == nil {
		t.Error("a missing file: no error")
	}
}
