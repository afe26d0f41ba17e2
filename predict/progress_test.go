package predict

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/tiles"
)

// TestProgressOfTiles: a tiled predict draws a bar of its tiles on
// Progress (count and ETA), cleared at the end; without Progress it draws
// nothing, and a folder's bar counts its files, not each file's tiles.
func TestProgressOfTiles(t *testing.T) {
	p := tinyPredictor(t, 2)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	writeImage(t, filepath.Join(in, "a.png"), 40, 24)
	var bar bytes.Buffer
	p.Progress = &bar
	if _, err := p.Run(filepath.Join(in, "a.png"), filepath.Join(dir, "out1"), Options{Tile: "16", Overlap: 0.5, Blend: tiles.Gaussian}, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
	s := bar.String()
	if !strings.Contains(s, "tiles") || !strings.Contains(s, "(0/8") || !strings.HasSuffix(s, "\r") {
		t.Errorf("bar %q: want the 8 tiles counted, then cleared", s)
	}
	if p.bar != nil {
		t.Error("the bar is still drawn after Run")
	}

	writeImage(t, filepath.Join(in, "b.png"), 40, 24)
	bar.Reset()
	if _, err := p.Run(in, filepath.Join(dir, "out2"), Options{Tile: "16", Overlap: 0.5, Blend: tiles.Gaussian}, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
	if s := bar.String(); !strings.Contains(s, "files") || !strings.Contains(s, "(0/2") || strings.Contains(s, "tiles") {
		t.Errorf("bar %q: want the 2 files counted, not their tiles", s)
	}

	p.Progress = nil
	bar.Reset()
	if _, err := p.Run(in, filepath.Join(dir, "out3"), Options{Tile: "16"}, Limits{}, nil); err != nil || bar.Len() != 0 {
		t.Errorf("no Progress: %v, %q drawn", err, bar.String())
	}
}

// TestNoteAboveBar: a note written while a bar is drawn clears the bar
// first, so it starts a line of its own rather than following the bar.
func TestNoteAboveBar(t *testing.T) {
	var tty bytes.Buffer
	p := &Predictor{Progress: &tty}
	at, done := p.track(10, "slices")
	at(3)
	bar := tty.Len()
	if bar == 0 {
		t.Fatal("no bar drawn")
	}
	if _, err := (aboveBar{p, &tty}).Write([]byte("predict: a note\n")); err != nil {
		t.Fatal(err)
	}
	if s := tty.String()[bar:]; !strings.HasSuffix(s, "\rpredict: a note\n") {
		t.Errorf("after the bar: %q, want it cleared (ending in \\r) before the note", s)
	}
	done()
	if p.bar != nil {
		t.Error("done left the bar")
	}
}
