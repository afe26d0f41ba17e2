package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLongOutputNames: names of 244 and 250 bytes, legal on every file
// system memunet writes to (255 at most), are written: predict's masks of
// inputs so named (their temporary names once passed 255 bytes and
// failed with "file name too long"), and an export to such a file.
func TestLongOutputNames(t *testing.T) {
	runDir, _ := trainTiny(t)
	in, out := t.TempDir(), t.TempDir()
	names := []string{strings.Repeat("a", 240) + ".png", strings.Repeat("b", 246) + ".png"}
	for i, name := range names {
		writeShapes(t, filepath.Join(in, name), i, 16, 16)
	}
	runOK(t, "predict", "--checkpoint", runDir, "--input", in, "--out", out)
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("the %d-byte mask: %v", len(name), err)
		}
	}
	model := filepath.Join(t.TempDir(), strings.Repeat("m", 238)+".safetensors")
	runOK(t, "export", "--checkpoint", runDir, "--out", model)
	if _, err := os.Stat(model); err != nil {
		t.Errorf("the %d-byte export: %v", len(filepath.Base(model)), err)
	}
}
