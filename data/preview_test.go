package data

import (
	"bytes"
	"image/png"
	"os"
	"testing"
)

func TestPreviewGrid(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 8, Size: 32})
	g, err := PreviewGrid(s, []int{0, 1, 2, 3, 4, 5, 6, 7}, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if b := g.Bounds(); b.Dx() != 4*(2*64+2)+2 || b.Dy() != 2*(64+2)+2 {
		t.Fatalf("grid is %v", b)
	}
	if _, err := PreviewGrid(s, []int{8}, 4, 1); err == nil {
		t.Fatal("PreviewGrid of an out-of-range index: no error")
	}
	if _, err := PreviewGrid(s, []int{0}, 0, 1); err == nil {
		t.Fatal("PreviewGrid with cols 0: no error")
	}
}

// TestPreview: data preview's picture holds the samples asked, four to a
// row at about 96 pixels a cell's image, and shows each epoch's own flips.
func TestPreview(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 8, Size: 16})
	idx := []int{3, 1, 4, 0, 5}
	cfg := LoaderConfig{Seed: 7, Flip: true}
	first, err := Preview(s, idx, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b := first.Bounds(); b.Dx() != 4*(2*96+2)+2 || b.Dy() != 2*(96+2)+2 {
		t.Fatalf("preview of 5 samples of 16x16 is %v", b)
	}
	again, _ := Preview(s, idx, cfg, 0)
	second, _ := Preview(s, idx, cfg, 1)
	if !bytes.Equal(first.Pix, again.Pix) || bytes.Equal(first.Pix, second.Pix) {
		t.Error("a preview is not its epoch's: the same epoch drew differently, or another epoch the same")
	}
	if _, err := Preview(s, []int{8}, cfg, 0); err == nil {
		t.Error("a preview of an out-of-range sample: no error")
	}
}

// TestWritePreview writes a preview PNG of the default synthetic set to the
// path in MEMUNET_PREVIEW, for looking at; it is skipped otherwise.
//
//	MEMUNET_PREVIEW=/tmp/synth_preview.png go test -run WritePreview ./data/
func TestWritePreview(t *testing.T) {
	path := os.Getenv("MEMUNET_PREVIEW")
	if path == "" {
		t.Skip("set MEMUNET_PREVIEW=file.png to write a preview")
	}
	s := mustSynthetic(t, SyntheticConfig{})
	g, err := PreviewGrid(s, []int{0, 1, 2, 3, 4, 5, 6, 7}, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, g); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
