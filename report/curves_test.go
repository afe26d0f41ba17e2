package report

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/runfiles"
	"gonum.org/v1/plot"
)

// trainingCurves is n steps of a loss falling from 2 towards 0.01 with
// noise, a validation every n/4 steps, and the rate lr(step).
func trainingCurves(n int, lr func(int) float64) Curves {
	var c Curves
	for i := 1; i <= n; i++ {
		c.Steps = append(c.Steps, float64(i))
		c.Loss = append(c.Loss, 0.01+2*math.Exp(-float64(i)/float64(n)*5)*(1+0.3*math.Sin(float64(i))))
		c.LR = append(c.LR, lr(i))
		if i%(n/4) == 0 {
			c.ValSteps = append(c.ValSteps, float64(i))
			c.ValLoss = append(c.ValLoss, c.Loss[i-1]*1.1)
			c.MIoU, c.Dice, c.PixelAcc = append(c.MIoU, 0.2*float64(i)/float64(n)+0.7), append(c.Dice, 0.8), append(c.PixelAcc, 0.95)
		}
	}
	return c
}

// TestCurvesFigure: curves.png's loss is on a log axis, every legend sits
// above its panel's data, not in it, the step axis has round labelled
// ticks all along, and the learning rate's panel is there only when the
// rate changes (a constant rate is said in the caption).
func TestCurvesFigure(t *testing.T) {
	constant := trainingCurves(800, func(int) float64 { return 0.003 })
	cosine := trainingCurves(800, func(i int) float64 { return 0.0015 * (1 + math.Cos(math.Pi*float64(i)/800)) })
	step := trainingCurves(800, func(i int) float64 { return 0.01 * math.Pow(0.1, float64(i/300)) })
	for _, c := range []struct {
		name    string
		curves  Curves
		panels  int
		caption string
		rateLog bool // a step schedule's rate on a log axis, a smooth one linear
	}{{"constant", constant, 2, "learning rate 0.003 throughout", false}, {"cosine", cosine, 3, "", false}, {"step", step, 3, "", true}} {
		f, err := curvesFigure(c.curves, "run")
		if err != nil {
			t.Fatal(err)
		}
		panels := f.columns[0]
		if len(f.columns) != 1 || len(panels) != c.panels {
			t.Fatalf("%s: %d columns, %d panels; want one column of %d", c.name, len(f.columns), len(panels), c.panels)
		}
		if got := strings.Join(f.heading.Caption, " · "); got != c.caption {
			t.Errorf("%s: caption %q, want %q", c.name, got, c.caption)
		}
		loss, scores := panels[0].Plot, panels[1].Plot
		if _, ok := loss.Y.Scale.(plot.LogScale); !ok {
			t.Errorf("%s: loss axis scale %T, want log", c.name, loss.Y.Scale)
		}
		if lo, hi := positiveRange(c.curves.Loss, c.curves.ValLoss); loss.Y.Min > lo || loss.Y.Max < hi {
			t.Errorf("%s: loss axis [%v, %v] cuts the losses [%v, %v]", c.name, loss.Y.Min, loss.Y.Max, lo, hi)
		}
		if len(labelled(loss.Y.Tick.Marker.Ticks(loss.Y.Min, loss.Y.Max))) < 3 {
			t.Errorf("%s: loss axis labels %v", c.name, labelled(loss.Y.Tick.Marker.Ticks(loss.Y.Min, loss.Y.Max)))
		}
		if scores.Y.Min != 0 || scores.Y.Max != 1 {
			t.Errorf("%s: scores from %v to %v, want 0 to 1", c.name, scores.Y.Min, scores.Y.Max)
		}
		if c.panels == 3 {
			_, log := panels[2].Plot.Y.Scale.(plot.LogScale)
			if log != c.rateLog {
				t.Errorf("%s: rate on a log axis %v, want %v", c.name, log, c.rateLog)
			}
		}
		wantLegends := [][]string{{"training loss", "mean of 20 steps", "validation loss"}, {"mIoU", "Dice", "pixel accuracy"}, nil}
		for i, p := range panels {
			if legendInData(p.Plot) {
				t.Errorf("%s: panel %q has a legend over its data", c.name, p.Title)
			}
			if got := legendLabels(p.Legend); !slices.Equal(got, wantLegends[i]) {
				t.Errorf("%s: panel %q legend %q, want %q", c.name, p.Title, got, wantLegends[i])
			}
			x := p.Plot.X
			if x.Min != 0 || x.Max != 800 {
				t.Errorf("%s: panel %q steps from %v to %v", c.name, p.Title, x.Min, x.Max)
			}
			if got := labelled(x.Tick.Marker.Ticks(x.Min, x.Max)); len(got) < 5 || got[1] != "100" {
				t.Errorf("%s: step labels %v, want one every 100", c.name, got)
			}
		}
	}
	// A short run's steps are whole numbers.
	if got := labelled(stepAxis(4).Ticks(0, 4)); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		t.Errorf("4 steps labelled %q", got)
	}
	if f, _ := curvesFigure(constant, "run"); f.hPx >= curvesHeightPx {
		t.Errorf("without the rate's panel the figure keeps its height %d", f.hPx)
	}
	// The rate rebuilt from a checkpoint (0) is unknown, not a change.
	rebuilt := constant
	rebuilt.LR = slices.Clone(rebuilt.LR)
	for i := range 100 {
		rebuilt.LR[i] = 0
	}
	if f, _ := curvesFigure(rebuilt, "run"); len(f.columns[0]) != 2 {
		t.Errorf("rates rebuilt as 0: %d panels, want no rate panel", len(f.columns[0]))
	}
}

// TestCurvesOddValues: values a log axis cannot show (0, NaN, Inf) are
// left out, no validation yet is said, and no steps is an error.
func TestCurvesOddValues(t *testing.T) {
	c := trainingCurves(60, func(int) float64 { return 0.1 })
	c.Loss[3], c.Loss[4], c.Loss[5] = 0, math.NaN(), math.Inf(1)
	c.ValSteps, c.ValLoss, c.MIoU, c.Dice, c.PixelAcc = nil, nil, nil, nil, nil
	path := filepath.Join(t.TempDir(), "curves.png")
	if err := WriteCurves(path, c, "odd"); err != nil {
		t.Fatal(err)
	}
	readChart(t, path, curvesWidthPx, curvesHeightNoRatePx)
	f, _ := curvesFigure(c, "odd")
	if got := legendLabels(f.columns[0][1].Legend); !slices.Equal(got, []string{"no validation yet"}) {
		t.Errorf("scores legend without validations: %q", got)
	}
	if err := WriteCurves(path, Curves{}, "none"); err == nil {
		t.Error("curves of no steps drawn")
	}
	if m := runningMean([]float64{1, 3, math.NaN(), 5}, 2); !slices.Equal(m[:2], []float64{1, 2}) || m[2] != 3 || m[3] != 5 {
		t.Errorf("runningMean = %v, want [1 2 3 5]", m)
	}
}

// TestValidationsFigure: val-curves.png names every run once, above both
// panels, the loss on a log axis; a run without validations is noted; no
// validation at all is an error.
func TestValidationsFigure(t *testing.T) {
	a := trainingCurves(400, func(int) float64 { return 0.003 })
	b := trainingCurves(800, func(int) float64 { return 0.01 })
	f, err := validationsFigure([]string{"a", "b", "c"}, []Curves{a, b, {}})
	if err != nil {
		t.Fatal(err)
	}
	if got := legendLabels(f.heading.Legend); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("legend %q, want the runs with validations", got)
	}
	if !strings.Contains(f.heading.Text(), "c: no validation") {
		t.Errorf("heading %q lacks the run without validations", f.heading.Text())
	}
	panels := f.columns[0]
	if len(panels) != 2 || len(panels[0].Legend)+len(panels[1].Legend) != 0 {
		t.Fatalf("%d panels with their own legends", len(panels))
	}
	if _, ok := panels[1].Plot.Y.Scale.(plot.LogScale); !ok {
		t.Errorf("val loss scale %T, want log", panels[1].Plot.Y.Scale)
	}
	if x := panels[0].Plot.X; x.Max != 800 {
		t.Errorf("steps to %v, want 800", x.Max)
	}
	path := filepath.Join(t.TempDir(), "val-curves.png")
	if err := WriteValidations(path, []string{"a", "b"}, []Curves{a, b}); err != nil {
		t.Fatal(err)
	}
	readChart(t, path, curvesWidthPx, valCurvesHeightPx)
	if _, err := validationsFigure([]string{"c"}, []Curves{{Steps: []float64{1}}}); err == nil {
		t.Error("no validation at all: no error")
	}
}

// TestLogAxis: the ends sit on labelled values around the data, the
// labels are the densest of every digit, 1-2-5 or powers of ten that keeps
// within the labels asked for.
func TestLogAxis(t *testing.T) {
	for _, c := range []struct {
		lo, hi    float64
		maxLabels int
		min, max  float64
		labels    []string
	}{
		{0.0072, 2.1, 10, 0.005, 5, []string{"0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5"}},
		{0.0072, 2.1, 5, 0.001, 10, []string{"0.001", "0.01", "0.1", "1", "10"}},
		{0.13, 0.45, 10, 0.1, 0.5, []string{"0.1", "0.2", "0.3", "0.4", "0.5"}},
		{1e-5, 3, 10, 1e-5, 10, []string{"1e-05", "0.0001", "0.001", "0.01", "0.1", "1", "10"}},
		{0.2, 0.2, 10, 0.1, 0.4, []string{"0.1", "0.2", "0.3", "0.4"}},
	} {
		a := newLogAxis(c.lo, c.hi, c.maxLabels)
		if math.Abs(a.Min-c.min) > 1e-12 || math.Abs(a.Max-c.max) > 1e-12 {
			t.Errorf("newLogAxis(%v, %v, %d): [%v, %v], want [%v, %v]", c.lo, c.hi, c.maxLabels, a.Min, a.Max, c.min, c.max)
		}
		if got := a.labels(); !slices.Equal(got, c.labels) {
			t.Errorf("newLogAxis(%v, %v, %d) labels %q, want %q", c.lo, c.hi, c.maxLabels, got, c.labels)
		}
	}
}

// TestWriteReplacesSymlink: a symlink planted where a chart or compare's
// file goes is replaced by the file; what it pointed at is untouched.
func TestWriteReplacesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	names := append([]string{"curves.png", "val-curves.png"}, runfiles.CompareFiles()...)
	for _, n := range names {
		if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	c := trainingCurves(40, func(int) float64 { return 0.01 })
	if err := WriteCurves(filepath.Join(dir, "curves.png"), c, "run"); err != nil {
		t.Fatal(err)
	}
	if err := WriteValidations(filepath.Join(dir, "val-curves.png"), []string{"run"}, []Curves{c}); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompare(dir, syntheticRows(), syntheticTimelines(), syntheticSettings()); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		st, err := os.Lstat(filepath.Join(dir, n))
		if err != nil || !st.Mode().IsRegular() || st.Size() < 100 {
			t.Errorf("%s: %v, %v; want a regular file", n, st.Mode(), err)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep me" {
		t.Errorf("the symlinks' target now holds %q (%v)", b, err)
	}
}
