package predict

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
)

// TestPredictVolume: predict on a .nii.gz (written by Python's struct in
// data/testdata) writes a .nii.gz mask volume whose header geometry
// (dims, pixdim, units, qform, sform) is the input's byte for byte, one
// label per voxel; its 7x6 slices, no multiple of 4, go by tiles.
func TestPredictVolume(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes, cfg.Model.InChannels = 4, 2, 3, 1
	p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, name := range []string{"int16.nii.gz", "uint16_be.nii"} {
		in := filepath.Join("..", "data", "testdata", "nifti", name)
		out := t.TempDir()
		var note bytes.Buffer
		rep, err := p.Run(in, out, Options{Blend: "gaussian", Overlap: 0.5}, Limits{}, &note)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Outputs) != 1 || rep.Outputs[0].Mask != name || rep.Outputs[0].Tiling == nil || rep.PlannedPeakBytes == 0 {
			t.Fatalf("outputs %+v", rep.Outputs)
		}
		src, err := data.ReadVolume(in, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := data.ReadVolume(filepath.Join(out, name), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Geometry(), src.Geometry()) || got.Gzip != src.Gzip || got.TypeName() != "uint8" {
			t.Errorf("%s: the mask's geometry or kind differs (gzip %v, %s)", name, got.Gzip, got.TypeName())
		}
		for k := range got.Len() {
			if v := got.At(k); v < 0 || v > 2 {
				t.Fatalf("voxel %d: label %g", k, v)
			}
		}
		if !strings.Contains(note.String(), "its 6x7 slices by") {
			t.Errorf("note: %s", note.String())
		}
	}
	if _, err := p.Run(filepath.Join("..", "data", "testdata", "nifti", "int16.nii.gz"), t.TempDir(), Options{Overlay: true}, Limits{}, nil); err == nil ||
		!strings.Contains(err.Error(), "--overlay and --probs apply to image files") {
		t.Errorf("overlay of a volume: %v", err)
	}
}
