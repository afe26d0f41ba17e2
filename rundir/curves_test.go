package rundir

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/runfiles"
)

// TestCurves: a run draws curves.png from its metrics (every step's loss and
// rate, every validation's scores), a resumed run's curves hold the earlier
// steps too, and a cosine schedule's rates are what was drawn.
func TestCurves(t *testing.T) {
	cfg := resumeConfig("cosine")
	cfg.Train.Steps = 3
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	cfg.Train.Steps = 6
	mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: "auto"}, nil)

	c, err := ReadCurves(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Steps, []float64{1, 2, 3, 4, 5, 6}) || len(c.Loss) != 6 {
		t.Errorf("steps %v", c.Steps)
	}
	// validations: 2 (scheduled), 3 (the first run's end), 4, 6
	if !slices.Equal(c.ValSteps, []float64{2, 3, 4, 6}) || len(c.MIoU) != 4 {
		t.Errorf("validation steps %v", c.ValSteps)
	}
	s := cfg.LRSchedule(6)
	for i, lr := range c.LR {
		if want := s.At(i, s.Start()); lr != want {
			t.Errorf("step %d: lr %v, schedule %v", i+1, lr, want)
		}
	}
	f, err := os.Open(filepath.Join(dir, runfiles.Curves))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 {
		t.Errorf("curves.png is %v", b)
	}
}

// TestReadCurvesPartialFile: a metrics.jsonl read while its run writes it
// (the last line half written) gives the complete records; a record of a
// step seen before replaces it; a broken line elsewhere is an error naming
// the file and line.
func TestReadCurvesPartialFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const lines = `{"type":"step","step":1,"loss":2,"lr":0.1}
{"type":"step","step":2,"loss":1.5,"lr":0.1}
{"type":"val","step":2,"val_loss":1.4,"val_miou":0.3}
{"type":"val","step":2,"val_loss":1.3,"val_miou":0.4}
`
	write(lines + `{"type":"step","step":3,"lo`)
	c, err := ReadCurves(path)
	if err != nil {
		t.Fatalf("a half-written last line: %v", err)
	}
	if !slices.Equal(c.Steps, []float64{1, 2}) || !slices.Equal(c.ValSteps, []float64{2}) || c.MIoU[0] != 0.4 {
		t.Errorf("steps %v, validations %v (mIoU %v); want [1 2], one at 2 with 0.4", c.Steps, c.ValSteps, c.MIoU)
	}
	write(`{"type":"step","st` + "\n" + lines)
	if _, err := ReadCurves(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a broken first line: %v", err)
	}
}
