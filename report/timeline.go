package report

// timeline.json (every allocation and free of a run's last step, and the
// phases of that step) and compare's timeline.png drawn from it.

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// TimelinePoint is one allocation or free in timeline.json.
type TimelinePoint struct {
	TimeMS         float64 `json:"t_ms"`            // since the step's first event
	Phase          string  `json:"phase,omitempty"` // forward, backward, optimizer
	Category       string  `json:"category"`
	DeltaBytes     int64   `json:"delta_bytes"`
	AllocatedBytes int64   `json:"allocated_bytes"`
	ReservedBytes  int64   `json:"reserved_bytes"`
}

// TimelineSpan is a stretch of the step spent in one phase.
type TimelineSpan struct {
	Phase   string  `json:"phase"`
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`
}

// Timeline is timeline.json: every allocation and free of one optimizer
// step (the last one run) and the phases it went through, in order (a
// micro-batch's forward and backward once per micro-batch, then the
// optimizer).
type Timeline struct {
	Step   int             `json:"step"`
	Points []TimelinePoint `json:"points"`
	Phases []TimelineSpan  `json:"phases,omitempty"`
}

// TimelineOf is the timeline of step from the pool's events: its
// allocations and frees become points and its phase marks (Delta 0,
// memory.Pool.TimelinePhase) spans, times from the first event.
func TimelineOf(step int, events []memory.Event) Timeline {
	tl := Timeline{Step: step, Points: []TimelinePoint{}}
	if len(events) == 0 {
		return tl
	}
	t0 := events[0].At
	ms := func(e memory.Event) float64 { return float64(e.At-t0) / 1e6 }
	open := false
	for _, e := range events {
		if e.Delta != 0 {
			tl.Points = append(tl.Points, TimelinePoint{TimeMS: ms(e), Phase: e.Phase, Category: e.Category.String(),
				DeltaBytes: e.Delta, AllocatedBytes: e.Allocated, ReservedBytes: e.Reserved})
			continue
		}
		if open {
			tl.Phases[len(tl.Phases)-1].EndMS = ms(e)
		}
		open = e.Phase != ""
		if open {
			tl.Phases = append(tl.Phases, TimelineSpan{Phase: e.Phase, StartMS: ms(e), EndMS: ms(e)})
		}
	}
	if open {
		tl.Phases[len(tl.Phases)-1].EndMS = ms(events[len(events)-1])
	}
	return tl
}

// endMS is the time the timeline covers: to its last point or span end.
func (tl Timeline) endMS() float64 {
	end := 0.0
	if n := len(tl.Points); n > 0 {
		end = tl.Points[n-1].TimeMS
	}
	if n := len(tl.Phases); n > 0 {
		end = max(end, tl.Phases[n-1].EndMS)
	}
	return end
}

// phaseColors are the phases' bands in timeline.png.
var phaseColors = map[string]color.Color{
	"forward":   faded(seriesColor(0), 0.78),
	"backward":  faded(seriesColor(1), 0.72),
	"optimizer": faded(seriesColor(2), 0.7),
}

// phaseOrder is the phases as the legend lists them.
var phaseOrder = []string{"forward", "backward", "optimizer"}

// allocatedColor and peakColor draw every panel's line and its peak.
var (
	allocatedColor = color.RGBA{0x26, 0x32, 0x3c, 0xff}
	peakColor      = seriesColor(3)
)

// timelineSeries is one variant's panel in timeline.png.
type timelineSeries struct {
	Name    string
	Variant config.Variant
	Step    int
	Events  int
	// Points are (ms since the step began, allocated bytes); the first is
	// the state before the first event, at 0.
	Points    plotter.XYs
	Spans     []TimelineSpan
	EndMS     float64
	Peak      int64
	PeakMS    float64
	PeakPhase string
}

// timelineData turns the timelines of rows that have one into series, with
// their shared byte axis from 0 (room above for the peak's label).
func timelineData(rows []CompareRow, timelines map[string]Timeline) (series []timelineSeries, y axisRange) {
	var top float64
	for _, r := range rows {
		tl, ok := timelines[r.Name]
		if !ok || len(tl.Points) == 0 {
			continue
		}
		first := tl.Points[0]
		s := timelineSeries{Name: r.Name, Variant: r.Variant, Step: tl.Step, Events: len(tl.Points), Spans: tl.Phases,
			EndMS: tl.endMS(), Points: make(plotter.XYs, 0, len(tl.Points)+1)}
		start := first.AllocatedBytes - first.DeltaBytes
		s.Points = append(s.Points, plotter.XY{X: 0, Y: float64(start)})
		s.Peak = max(0, start)
		for _, pt := range tl.Points {
			s.Points = append(s.Points, plotter.XY{X: pt.TimeMS, Y: float64(pt.AllocatedBytes)})
			if pt.AllocatedBytes > s.Peak {
				s.Peak, s.PeakMS, s.PeakPhase = pt.AllocatedBytes, pt.TimeMS, pt.Phase
			}
		}
		top = math.Max(top, float64(s.Peak))
		series = append(series, s)
	}
	return series, byteAxis(top, 4, 0.22)
}

// timeAxis is a panel's time axis: 0 to the step's end. Each variant has
// its own (a step's time is measured once and varies from run to run); the
// panel's title says how long it took.
func (s timelineSeries) timeAxis() axisRange {
	a := linearAxis(s.EndMS, 6, 0)
	if s.EndMS > 0 {
		a.Max = s.EndMS // round ticks, no empty stretch after the step
	}
	return a
}

// timelineGrid is how many columns and rows of panels n series take.
func timelineGrid(n int) (cols, rows int) {
	cols = 1
	if n > 3 {
		cols = 2
	}
	return cols, (n + cols - 1) / cols
}

// timeline.png's width, and its height: the heading and a band of this
// height per row of panels, at least timelineMinHeightPx.
const (
	timelineWidthPx     = 900
	timelineRowPx       = 165
	timelineHeaderPx    = 120
	timelineMinHeightPx = 600
)

func timelineHeightPx(rows int) int {
	return max(timelineMinHeightPx, timelineHeaderPx+rows*timelineRowPx)
}

// bands shades each phase's stretch of time across a panel's height.
type bands []TimelineSpan

func (b bands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, s := range b {
		col, ok := phaseColors[s.Phase]
		if !ok {
			continue
		}
		x0, x1 := trX(s.StartMS), trX(s.EndMS)
		c.SetColor(col)
		c.Fill(vg.Rectangle{Min: vg.Point{X: x0, Y: c.Min.Y}, Max: vg.Point{X: max(x1, x0+vg.Points(0.5)), Y: c.Max.Y}}.Path())
	}
}

// swatch is a legend thumbnail filled with one colour.
type swatch struct{ color color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	c.SetColor(s.color)
	c.Fill(c.Rectangle.Path())
}

// timelinePanel is one series' panel over the shared byte axis y.
func timelinePanel(s timelineSeries, y axisRange) (panel, error) {
	x := s.timeAxis()
	p := newPlot(true)
	p.Add(bands(s.Spans))
	pts := make(plotter.XYs, len(s.Points))
	for i, pt := range s.Points {
		pts[i] = plotter.XY{X: pt.X, Y: pt.Y / y.Unit.Bytes}
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return panel{}, err
	}
	line.StepStyle = plotter.PostStep // the bytes hold until the next event
	line.Color, line.Width = allocatedColor, vg.Points(1)
	p.Add(line)
	peakPt := plotter.XYs{{X: s.PeakMS, Y: float64(s.Peak) / y.Unit.Bytes}}
	dot, err := plotter.NewScatter(peakPt)
	if err != nil {
		return panel{}, err
	}
	dot.Color, dot.Radius, dot.Shape = peakColor, vg.Points(3.5), draw.CircleGlyph{}
	p.Add(dot)
	text := "peak " + memory.FormatBytes(s.Peak)
	if s.PeakPhase != "" {
		text += " in " + s.PeakPhase
	}
	label, err := plotter.NewLabels(plotter.XYLabels{XYs: peakPt, Labels: []string{text}})
	if err != nil {
		return panel{}, err
	}
	sty := sansBold(8.5)
	sty.Color = peakColor
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YBottom
	switch {
	case s.PeakMS > 0.8*x.Max:
		sty.XAlign = draw.XRight
	case s.PeakMS < 0.2*x.Max:
		sty.XAlign = draw.XLeft
	}
	label.TextStyle[0] = sty
	label.Offset = vg.Point{Y: vg.Points(5)}
	p.Add(label)
	p.Y.Label.Text = y.Unit.Name
	y.set(&p.Y)
	x.set(&p.X)
	title := fmt.Sprintf("%s (%s): this step took %.1f ms", s.Name, variantBrief(s.Variant), s.EndMS)
	return panel{Title: title, Plot: p, Weight: 1}, nil
}

// timelineHeading is timeline.png's heading for the step drawn.
func timelineHeading(s CompareSetup, step int) heading {
	title := "Pool allocated bytes through one optimizer step"
	if step > 0 {
		title += fmt.Sprintf(" (step %d)", step)
	}
	return heading{Title: title, Caption: s.parts()}
}

// timelineLegend names the bands, the line and the peak.
func timelineLegend(series []timelineSeries) []legendItem {
	var items []legendItem
	seen := map[string]bool{}
	for _, s := range series {
		for _, sp := range s.Spans {
			seen[sp.Phase] = true
		}
	}
	for _, ph := range phaseOrder {
		if seen[ph] {
			items = append(items, legendItem{ph, swatch{phaseColors[ph]}})
		}
	}
	line, _ := plotter.NewLine(plotter.XYs{{}, {X: 1}})
	line.Color, line.Width = allocatedColor, vg.Points(1.2)
	dot, _ := plotter.NewScatter(plotter.XYs{{}})
	dot.Color, dot.Radius, dot.Shape = peakColor, vg.Points(3.5), draw.CircleGlyph{}
	return append(items, legendItem{"pool allocated bytes", line}, legendItem{"the step's peak", dot})
}

// timelineColumns lays the series' panels out in the grid, row by row,
// the time axis named under each column's last.
func timelineColumns(series []timelineSeries, y axisRange) ([][]panel, error) {
	cols, rows := timelineGrid(len(series))
	columns := make([][]panel, cols)
	for i, s := range series {
		p, err := timelinePanel(s, y)
		if err != nil {
			return nil, err
		}
		columns[i%cols] = append(columns[i%cols], p)
	}
	for c := range columns {
		if n := len(columns[c]); n > 0 {
			columns[c][n-1].Plot.X.Label.Text = "time in the step (ms)"
		}
		for len(columns[c]) < rows { // an empty place keeps the rows level
			columns[c] = append(columns[c], panel{Plot: newPlot(false), Weight: 1, hidden: true})
		}
	}
	return columns, nil
}

// TimelineChart draws timeline.png at path: a panel per variant with a
// timeline (rows' timelines by name), the pool's allocated bytes through
// its last optimizer step over time, shaded by phase (forward, backward,
// optimizer), its peak marked; all panels on the same byte axis, each over
// its own step's time.
func TimelineChart(path string, rows []CompareRow, timelines map[string]Timeline, s CompareSetup) error {
	series, y := timelineData(rows, timelines)
	step := 0
	for _, sr := range series {
		step = max(step, sr.Step)
	}
	h := timelineHeading(s, step)
	var noPool []string
	for _, r := range rows {
		if _, ok := timelines[r.Name]; !ok && r.Error == "" {
			if r.Pool {
				h.Notes = append(h.Notes, r.Name+": no timeline")
			} else {
				noPool = append(noPool, r.Name)
			}
		}
	}
	if len(noPool) > 0 {
		h.Notes = append(h.Notes, strings.Join(noPool, ", ")+": no pool, no timeline")
	}
	h.Notes = append(h.Notes, failedNotes(rows)...)
	if len(series) == 0 {
		h.Notes = append(h.Notes, "no variant recorded a timeline")
	} else {
		h.Legend = timelineLegend(series)
	}
	columns, err := timelineColumns(series, y)
	if err != nil {
		return err
	}
	_, gridRows := timelineGrid(len(series))
	return savePNG(path, timelineWidthPx, timelineHeightPx(gridRows), func(c draw.Canvas) error {
		body := drawHeader(draw.Crop(c, vg.Points(6), -vg.Points(12), vg.Points(4), 0), h)
		drawPanels(body, columns, vg.Points(14))
		return nil
	})
}
