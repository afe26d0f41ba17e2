package report

// curves.png (a run's loss, validation scores and learning rate over the
// steps) and val-curves.png (several runs' validations side by side).

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Curves is a run's history as curves.png draws it: every step's loss and
// learning rate, every validation's loss and scores. rundir reads it from
// a run's metrics.jsonl.
type Curves struct {
	Steps    []float64
	Loss, LR []float64 // LR is 0 for records rebuilt from a checkpoint's history
	ValSteps []float64
	ValLoss  []float64
	MIoU     []float64
	Dice     []float64
	PixelAcc []float64
}

// The curves' colours, one per quantity wherever it is drawn.
var (
	lossColor  = seriesColor(0)
	valColor   = seriesColor(1)
	miouColor  = seriesColor(2)
	diceColor  = seriesColor(3)
	accColor   = seriesColor(4)
	rateColor  = seriesColor(5)
	rawLossCol = faded(lossColor, 0.6)
)

// Figure sizes in pixels.
const (
	curvesWidthPx        = 900
	curvesHeightPx       = 760 // three panels
	curvesHeightNoRatePx = 620 // without the learning rate's panel
	valCurvesHeightPx    = 620
)

// figure is a chart ready to draw: its heading and its columns of panels.
type figure struct {
	heading heading
	columns [][]panel
	wPx     int
	hPx     int
}

func (f figure) draw(c draw.Canvas) error {
	body := drawHeader(draw.Crop(c, vg.Points(8), -vg.Points(14), vg.Points(6), 0), f.heading)
	drawPanels(body, f.columns, vg.Points(16))
	return nil
}

func (f figure) save(path string) error { return savePNG(path, f.wPx, f.hPx, f.draw) }

// WriteCurves writes c as a PNG at path under title: the training loss
// (each step, and its running mean) and the validation loss on a log
// scale; the validation scores (mIoU, Dice, pixel accuracy, 0 to 1); and,
// when the learning rate changes during the run, the rate.
func WriteCurves(path string, c Curves, title string) error {
	f, err := curvesFigure(c, title)
	if err != nil {
		return err
	}
	return f.save(path)
}

// curvesFigure lays out curves.png.
func curvesFigure(c Curves, title string) (figure, error) {
	if len(c.Steps) == 0 {
		return figure{}, errors.New("no steps to draw")
	}
	last := c.Steps[len(c.Steps)-1]
	x := stepAxis(last)
	f := figure{heading: heading{Title: title}, wPx: curvesWidthPx, hPx: curvesHeightPx}

	// Loss: noisy per step, so the running mean is drawn over it; a log
	// scale keeps the late, small losses apart.
	window := smoothWindow(len(c.Loss))
	lossCurves := []curve{{name: "training loss", x: c.Steps, y: c.Loss, color: rawLossCol, width: 0.8}}
	if window > 1 {
		lossCurves = append(lossCurves, curve{name: fmt.Sprintf("mean of %d steps", window), x: c.Steps,
			y: runningMean(c.Loss, window), color: lossColor, width: 1.6})
	} else {
		lossCurves[0].color, lossCurves[0].width = lossColor, 1.6
	}
	lossCurves = append(lossCurves, curve{name: "validation loss", x: c.ValSteps, y: c.ValLoss, color: valColor, width: 1.6, marks: true})
	loss, err := curvePanel("loss (log scale)", "loss", lossCurves, x, 10)
	if err != nil {
		return figure{}, err
	}
	loss.Weight = 1.3

	scores, err := curvePanel("validation scores", "score", []curve{
		{name: "mIoU", x: c.ValSteps, y: c.MIoU, color: miouColor, width: 1.6, marks: true},
		{name: "Dice", x: c.ValSteps, y: c.Dice, color: diceColor, width: 1.6, marks: true},
		{name: "pixel accuracy", x: c.ValSteps, y: c.PixelAcc, color: accColor, width: 1.6, marks: true}}, x, 0)
	if err != nil {
		return figure{}, err
	}
	axisRange{Max: 1, Step: 0.2}.set(&scores.Plot.Y)
	if len(c.ValSteps) == 0 {
		scores.Legend = []legendItem{{Label: "no validation yet"}}
	}
	panels := []panel{loss, scores}

	if lr, changes := rateOf(c.LR); changes {
		title, logScale := "learning rate", rateInSteps(c.LR)
		if logScale {
			title += " (log scale)"
		}
		logLabels := 0
		if logScale {
			logLabels = 4
		}
		rate, err := curvePanel(title, "lr", []curve{{name: "lr", x: c.Steps, y: c.LR, color: rateColor, width: 1.4}}, x, logLabels)
		if err != nil {
			return figure{}, err
		}
		rate.Legend = nil // the title says it
		if !logScale {
			linearAxis(lr, 4, 0.05).set(&rate.Plot.Y)
		}
		rate.Weight = 0.6
		panels = append(panels, rate)
	} else {
		if lr > 0 {
			f.heading.Caption = append(f.heading.Caption, "learning rate "+formatRate(lr)+" throughout")
		}
		f.hPx = curvesHeightNoRatePx
	}
	panels[len(panels)-1].Plot.X.Label.Text = "optimizer step"
	f.columns = [][]panel{panels}
	return f, nil
}

// rateOf is the largest learning rate and whether the rate changes (a rate
// of 0, rebuilt from a checkpoint, is unknown, not a change).
func rateOf(lr []float64) (top float64, changes bool) {
	first := math.NaN()
	for _, v := range lr {
		if !(v > 0) || math.IsInf(v, 0) {
			continue
		}
		if math.IsNaN(first) {
			first = v
		}
		changes = changes || v != first
		top = max(top, v)
	}
	return top, changes
}

// rateInSteps reports whether the rate falls in a few steps over a decade
// or more (a step or plateau schedule), which a log axis shows; a smooth
// schedule (cosine, warmup) stays linear.
func rateInSteps(lr []float64) bool {
	distinct := map[float64]bool{}
	for _, v := range lr {
		if v > 0 && finite(v) {
			distinct[v] = true
		}
	}
	lo, hi := positiveRange(lr)
	return len(distinct) <= 20 && hi >= 10*lo
}

// formatRate writes a learning rate briefly: 0.003, 1e-05.
func formatRate(v float64) string { return fmt.Sprintf("%.3g", v) }

// stepAxis is the step axis from 0 to last, a labelled tick about every
// tenth of it at a round number.
func stepAxis(last float64) axisRange {
	top, step := niceRange(max(last, 1), 8, 0)
	if step < 1 { // steps are whole
		step = 1
	}
	return axisRange{Max: top, Step: step}
}

// smoothWindow is the running mean's width for n steps: about n/40, none
// under 50 steps.
func smoothWindow(n int) int {
	if n < 50 {
		return 1
	}
	return max(5, n/40)
}

// runningMean is, at each i, the mean of the w values ending there (of
// those there are, before the w-th); non-finite values are left out.
func runningMean(v []float64, w int) []float64 {
	out := make([]float64, 0, len(v))
	sum, n := 0.0, 0
	for i, x := range v {
		if finite(x) {
			sum, n = sum+x, n+1
		}
		if i >= w {
			if old := v[i-w]; finite(old) {
				sum, n = sum-old, n-1
			}
		}
		if n == 0 {
			out = append(out, math.NaN())
			continue
		}
		out = append(out, sum/float64(n))
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// positiveRange is the smallest and largest positive finite values of vs
// (0, 0 if none).
func positiveRange(vs ...[]float64) (lo, hi float64) {
	for _, v := range vs {
		for _, x := range v {
			if x > 0 && finite(x) {
				if lo == 0 || x < lo {
					lo = x
				}
				hi = max(hi, x)
			}
		}
	}
	return lo, hi
}

// curve is one line of a panel; marks draws its points (validations are
// few).
type curve struct {
	name  string
	x, y  []float64
	color color.Color
	width float64 // points
	marks bool
}

// points are the curve's drawable points: finite, and positive on a log
// axis.
func (c curve) points(positive bool) plotter.XYs {
	pts := make(plotter.XYs, 0, len(c.x))
	for i := range min(len(c.x), len(c.y)) {
		if finite(c.x[i]) && finite(c.y[i]) && (!positive || c.y[i] > 0) {
			pts = append(pts, plotter.XY{X: c.x[i], Y: c.y[i]})
		}
	}
	return pts
}

// curvePanel is a panel of curves over the step axis x, its legend naming
// each curve that has points. With logLabels > 0 the y axis is a log axis
// around the positive values (the others left out) with at most that many
// labels; otherwise the caller sets it.
func curvePanel(title, ylabel string, curves []curve, x axisRange, logLabels int) (panel, error) {
	logY := logLabels > 0
	p := newPlot(true)
	p.Y.Label.Text = ylabel
	pnl := panel{Title: title, Plot: p, Weight: 1}
	var ys [][]float64
	for _, c := range curves {
		ys = append(ys, c.y)
		pts := c.points(logY)
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return pnl, err
		}
		line.Color, line.Width = c.color, vg.Points(c.width)
		p.Add(line)
		item := legendItem{Label: c.name, Thumb: line}
		if c.marks {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return pnl, err
			}
			sc.Color, sc.Radius, sc.Shape = c.color, vg.Points(2.5), draw.CircleGlyph{}
			p.Add(sc)
			item.Thumb = lineAndMark{line, sc}
		}
		pnl.Legend = append(pnl.Legend, item)
	}
	x.set(&p.X)
	if lo, hi := positiveRange(ys...); logY && hi > 0 {
		newLogAxis(lo, hi, logLabels).set(&p.Y)
	}
	return pnl, nil
}

// lineAndMark is a legend thumbnail of a line with its marks.
type lineAndMark struct {
	line *plotter.Line
	mark *plotter.Scatter
}

func (t lineAndMark) Thumbnail(c *draw.Canvas) {
	t.line.Thumbnail(c)
	t.mark.Thumbnail(c)
}

// WriteValidations writes several runs' validation curves (val mIoU and
// val loss over the steps) together as a PNG, one colour per run named in
// names.
func WriteValidations(path string, names []string, runs []Curves) error {
	f, err := validationsFigure(names, runs)
	if err != nil {
		return err
	}
	return f.save(path)
}

// validationsFigure lays out val-curves.png: the runs' legend in the
// heading, shared by both panels.
func validationsFigure(names []string, runs []Curves) (figure, error) {
	var miou, loss []curve
	last := 0.0
	for i, c := range runs {
		col := seriesColor(i)
		miou = append(miou, curve{name: names[i], x: c.ValSteps, y: c.MIoU, color: col, width: 1.6, marks: true})
		loss = append(loss, curve{name: names[i], x: c.ValSteps, y: c.ValLoss, color: col, width: 1.6, marks: true})
		if n := len(c.ValSteps); n > 0 {
			last = max(last, slices.Max(c.ValSteps))
		}
	}
	if last == 0 {
		return figure{}, errors.New("no run has a validation to draw")
	}
	x := stepAxis(last)
	top, err := curvePanel("validation mIoU", "mIoU", miou, x, 0)
	if err != nil {
		return figure{}, err
	}
	axisRange{Max: 1, Step: 0.2}.set(&top.Plot.Y)
	bottom, err := curvePanel("validation loss (log scale)", "loss", loss, x, 8)
	if err != nil {
		return figure{}, err
	}
	bottom.Plot.X.Label.Text = "optimizer step"
	h := heading{Title: "Validation curves", Legend: top.Legend}
	for i, c := range runs {
		if len(c.ValSteps) == 0 {
			h.Notes = append(h.Notes, names[i]+": no validation")
		}
	}
	top.Legend, bottom.Legend = nil, nil
	return figure{heading: h, columns: [][]panel{{top, bottom}}, wPx: curvesWidthPx, hPx: valCurvesHeightPx}, nil
}

var _ plot.Thumbnailer = lineAndMark{}
