package predict

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/internal/childtest"
	"github.com/memunet/memunet/runfiles"
)

// planChildEnv carries a case of TestPlannedRSSMatchesPeak to its child:
// "kind|input|out".
const planChildEnv = "MEMUNET_PREDICT_PLAN_CHILD"

// TestPlannedRSSMatchesPeak: predict's plan of the process's resident
// memory (the process as it stood, the pool's peak, the host buffers of
// the largest phase) is within 10% of the peak RSS a child process
// measures of itself, on a 2048x2048 PNG by tiles of 256 and by the
// automatic tile, with an overlay, and on a NIfTI volume, each in a fresh
// process: the collector is held to the plan (heldGC), and the buffers it
// counts are the ones predict holds.
func TestPlannedRSSMatchesPeak(t *testing.T) {
	if v := os.Getenv(planChildEnv); v != "" {
		planChild(t, v)
		return
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "big.png")
	writeNoisePNG(t, img, 2048, 2048)
	vol := filepath.Join(dir, "ct.nii.gz")
	writeVolume(t, vol, 256, 256, 48)
	for _, tc := range []struct{ name, kind, input string }{
		{"tile 256", "256", img},
		{"tile auto", "auto", img},
		{"whole, overlay", "overlay", img},
		{"NIfTI volume", "volume", vol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			_, peak := childtest.PeakRSS(t, "TestPlannedRSSMatchesPeak", planChildEnv, tc.kind+"|"+tc.input+"|"+out, 3*time.Minute)
			b, err := os.ReadFile(filepath.Join(out, runfiles.PredictReport))
			if err != nil {
				t.Fatal(err)
			}
			var rep Report
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			ratio := float64(peak) / float64(rep.PlannedRSSBytes)
			t.Logf("%s: planned %.1f MiB, peak RSS %.1f MiB (%.3f of the plan)", tc.name, mib(rep.PlannedRSSBytes), mib(peak), ratio)
			if rep.PlannedRSSBytes <= 0 || math.Abs(ratio-1) > 0.10 {
				t.Errorf("%s: peak RSS %d is not within 10%% of the planned %d", tc.name, peak, rep.PlannedRSSBytes)
			}
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// planChild predicts one case of TestPlannedRSSMatchesPeak (v is
// "kind|input|out") and reports its own peak.
func planChild(t *testing.T, v string) {
	defer childtest.ReportPeak(t)
	f := strings.SplitN(v, "|", 3)
	kind, input, out := f[0], f[1], f[2]
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes = 4, 2, 3
	opts := Options{Tile: kind, Overlap: 0.25, Blend: "gaussian"}
	switch kind {
	case "overlay":
		opts.Tile, opts.Overlay = "", true
	case "volume":
		opts.Tile = ""
		cfg.Model.InChannels = 1
	}
	p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Run(input, out, opts, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
}

// writeNoisePNG writes an h x w RGB PNG of blocks and noise.
func writeNoisePNG(t *testing.T, path string, h, w int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	seed := uint32(1)
	for i := 0; i < len(img.Pix); i += 4 {
		seed = seed*1664525 + 1013904223
		v := uint8(seed >> 26)
		if (i/4%w/200+i/4/w/300)%3 == 0 {
			v += 150
		}
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = v, v/2, 255-v, 255
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeVolume writes an x x y x z int16 NIfTI-1 volume, gzipped, of
// blocks and noise.
func writeVolume(t *testing.T, path string, x, y, z int) {
	t.Helper()
	le := binary.LittleEndian
	h := make([]byte, 352)
	le.PutUint32(h, 348)
	for i, d := range []int16{3, int16(x), int16(y), int16(z), 1, 1, 1, 1} {
		le.PutUint16(h[40+2*i:], uint16(d))
	}
	le.PutUint16(h[70:], 4)  // datatype int16
	le.PutUint16(h[72:], 16) // bitpix
	for i := range 8 {
		le.PutUint32(h[76+4*i:], math.Float32bits(1)) // pixdim
	}
	le.PutUint32(h[108:], math.Float32bits(352)) // vox_offset
	copy(h[344:], "n+1\x00")
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(h)
	vox := make([]byte, 2*x*y*z)
	seed := uint32(7)
	for k := range x * y * z {
		seed = seed*1664525 + 1013904223
		v := int16(seed >> 24)
		if (k%x/40+k/x/50)%3 == 0 {
			v += 1000
		}
		le.PutUint16(vox[2*k:], uint16(v))
	}
	zw.Write(vox)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
