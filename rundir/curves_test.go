package rundir

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
	f, err := os.Open(filepath.Join(dir, CurvesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 864 || b.Dy() != 768 {
		t.Errorf("curves.png is %v", b)
	}
	var empty Curves
	if err := empty.Draw(filepath.Join(t.TempDir(), "x.png"), "none"); err == nil {
		t.Error("curves of no steps drawn")
	}
}
