package main

// The charts of memunet compare: memory.png (peak pool bytes per variant
// beside each process's peak RSS) and timeline.png (pool bytes through one
// optimizer step). The ranges, units and texts are computed by small
// functions apart from the drawing so that tests can check them.

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/rundir"
	stdfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Both charts are chartWidthPx x chartHeightPx pixels at chartDPI.
const (
	chartWidthPx  = 900
	chartHeightPx = 600
	chartDPI      = 96
)

// chartSettings are what compare ran with; every chart states them under
// its title.
type chartSettings struct {
	Config      string // the config file's name
	Base, Depth int    // model.base, model.depth
	Params      int    // trainable parameters; 0 when no variant reported them
	H, W        int    // image size
	// MicroBatch and Accumulate are the configuration's; each variant's own
	// split is written under its bars and in the timeline's legend.
	MicroBatch, Accumulate int
	Steps                  int // optimizer steps per variant
}

// newChartSettings gathers the settings from compare's configuration, its
// --steps and the rows (the parameter count comes from the variants' runs).
func newChartSettings(configPath string, cfg config.Config, steps int, rows []CompareRow) chartSettings {
	h, w := cfg.ImageSize()
	v := cfg.Variant()
	s := chartSettings{Config: filepath.Base(configPath), Base: cfg.Model.Base, Depth: cfg.Model.Depth,
		H: h, W: w, MicroBatch: v.MicroBatch, Accumulate: v.Accumulate, Steps: steps}
	for _, r := range rows {
		if r.Params > 0 {
			s.Params = r.Params
			break
		}
	}
	return s
}

// parts are the settings as short phrases, joined by " · " in a caption
// (and wrapped between phrases when the line is too long).
func (s chartSettings) parts() []string {
	model := fmt.Sprintf("UNet base %d, depth %d", s.Base, s.Depth)
	if s.Params > 0 {
		model += ", " + groupDigits(s.Params) + " params"
	}
	out := []string{
		model,
		fmt.Sprintf("%d×%d images", s.H, s.W),
		fmt.Sprintf("micro-batch %d × accumulation %d = effective batch %d", s.MicroBatch, s.Accumulate, s.MicroBatch*s.Accumulate),
		fmt.Sprintf("%d steps per variant", s.Steps),
	}
	if s.Config != "" && s.Config != "." {
		out = append(out, s.Config)
	}
	return out
}

func (s chartSettings) String() string { return strings.Join(s.parts(), " · ") }

// groupDigits writes n with thousands separators: 1234567 is 1,234,567.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// variantBrief is a variant's settings in a few characters: "2×4 fp16",
// with ", ckpt all" when it checkpoints.
func variantBrief(v config.Variant) string {
	s := fmt.Sprintf("%d×%d %s", v.MicroBatch, v.Accumulate, v.Precision)
	if c := v.Checkpoint.String(); c != "" && c != "none" {
		s += ", ckpt " + c
	}
	return s
}

// heading is a chart's title and caption lines.
type heading struct {
	Title   string
	Caption []string // phrases; see drawHeader
	Notes   []string // phrases under the caption, joined by "; "
}

// Text is the heading as one string (for tests and logs).
func (h heading) Text() string {
	return strings.Join([]string{h.Title, strings.Join(h.Caption, " · "), strings.Join(h.Notes, "; ")}, "\n")
}

func memoryHeading(s chartSettings, rows []CompareRow) heading {
	return heading{Title: "Peak memory per variant", Caption: s.parts(), Notes: failedNotes(rows)}
}

// failedNotes say which rows failed (and so are missing from a chart).
func failedNotes(rows []CompareRow) []string {
	var out []string
	for _, r := range rows {
		if r.Error != "" {
			msg := r.Error
			if len(msg) > 60 {
				msg = msg[:57] + "..."
			}
			out = append(out, r.Name+" failed: "+msg)
		}
	}
	return out
}

func timelineHeading(s chartSettings, step int) heading {
	title := "Pool allocated bytes through one optimizer step"
	if step > 0 {
		title += fmt.Sprintf(" (step %d)", step)
	}
	return heading{Title: title, Caption: s.parts()}
}

// byteUnit is how an axis shows bytes: values are divided by Bytes.
type byteUnit struct {
	Name  string
	Bytes float64
}

// unitFor picks KiB, MiB or GiB so that an axis up to maxBytes has short
// tick labels.
func unitFor(maxBytes float64) byteUnit {
	switch {
	case maxBytes >= 4<<30:
		return byteUnit{"GiB", 1 << 30}
	case maxBytes >= 1<<20:
		return byteUnit{"MiB", 1 << 20}
	default:
		return byteUnit{"KiB", 1 << 10}
	}
}

// axisRange is a value axis in Unit from Min (always 0) to Max, with a
// labelled tick every Step.
type axisRange struct {
	Unit           byteUnit
	Min, Max, Step float64
}

// Ticks implements plot.Ticker: a labelled tick every Step, an unlabelled
// one half way.
func (a axisRange) Ticks(min, max float64) []plot.Tick {
	if a.Step <= 0 {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	var ticks []plot.Tick
	n := int(math.Round((max - min) / a.Step))
	digits := 0 // decimals that write every multiple of Step exactly
	for digits < 9 {
		scaled := a.Step * math.Pow(10, float64(digits))
		if math.Abs(scaled-math.Round(scaled)) < 1e-6*scaled {
			break
		}
		digits++
	}
	for i := 0; i <= 2*n; i++ {
		v := min + float64(i)*a.Step/2
		label := ""
		if i%2 == 0 {
			label = strconv.FormatFloat(v, 'f', digits, 64)
			if strings.Contains(label, ".") {
				label = strings.TrimRight(strings.TrimRight(label, "0"), ".")
			}
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// byteAxis is the axis from 0 for values up to max bytes: about ticks
// intervals of 1, 2, 2.5 or 5 times a power of ten, and headroom (a
// fraction of max) free above the largest value for the labels on bars.
func byteAxis(max float64, ticks int, headroom float64) axisRange {
	u := unitFor(max)
	top, step := niceRange(max/u.Bytes, ticks, headroom)
	return axisRange{Unit: u, Max: top, Step: step}
}

// niceRange is the top and step of an axis from 0 that holds maxVal with
// headroom to spare, in about ticks steps of a round size.
func niceRange(maxVal float64, ticks int, headroom float64) (top, step float64) {
	if !(maxVal > 0) || math.IsInf(maxVal, 0) {
		return 1, 0.2
	}
	want := maxVal * (1 + headroom)
	raw := want / float64(max(ticks, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw*(1-1e-9) {
			step = m * mag
			break
		}
	}
	top = math.Ceil(want/step*(1-1e-9)) * step
	return top, step
}

// memoryLayout is what memory.png shows: the pool panel has memunet's
// variants (peak allocated by category and peak reserved), the RSS panel
// every row that ran, plain gorgonia included, each on its own axis so
// that gorgonia's larger RSS does not flatten the pool bars.
type memoryLayout struct {
	Pool     []CompareRow
	RSS      []CompareRow
	PoolAxis axisRange
	RSSAxis  axisRange
	// NoPool names the rows that ran but have no pool (gorgonia).
	NoPool []string
}

// poolPeak is the tallest of a row's pool bars in bytes.
func poolPeak(r CompareRow) float64 {
	var cats int64
	for _, v := range r.PeakByCategory {
		cats += v
	}
	return float64(max(r.PeakAllocatedBytes, r.PeakReservedBytes, r.DeviceUsedPeakBytes, cats))
}

func layoutMemory(rows []CompareRow) (memoryLayout, error) {
	var l memoryLayout
	var poolMax, rssMax float64
	for _, r := range rows {
		if r.Error != "" {
			continue
		}
		if r.Pool {
			l.Pool = append(l.Pool, r)
			poolMax = math.Max(poolMax, poolPeak(r))
		} else {
			l.NoPool = append(l.NoPool, r.Name)
		}
		l.RSS = append(l.RSS, r)
		rssMax = math.Max(rssMax, float64(r.PeakRSSBytes))
	}
	if len(l.RSS) == 0 {
		return l, errors.New("no variant ran")
	}
	l.PoolAxis = byteAxis(poolMax, 8, 0.1)
	l.RSSAxis = byteAxis(rssMax, 8, 0.1)
	return l, nil
}

// Colours: the categories' and the variants' (Tableau 10).
var (
	chartPalette = []color.Color{
		color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
		color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
		color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	}
	reservedFill = color.RGBA{0xd9, 0xd9, 0xd9, 0xff}
	reservedLine = color.RGBA{0x80, 0x80, 0x80, 0xff}
	rssFill      = color.RGBA{0x6b, 0x8b, 0xa4, 0xff}
	deviceFill   = color.RGBA{0x76, 0xb9, 0x00, 0xff} // NVIDIA green
	gridColor    = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
)

func chartColor(i int) color.Color { return chartPalette[i%len(chartPalette)] }

func sans(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size),
		Handler: plot.DefaultTextHandler}
}

func sansBold(size vg.Length) text.Style {
	s := sans(size)
	s.Font = font.From(font.Font{Typeface: "Liberation", Variant: "Sans", Weight: stdfont.WeightBold}, size)
	return s
}

// newPanel is a plot in sans-serif with grid lines (vertical ones too when
// xGrid) and the value axis y from 0.
func newPanel(title string, y axisRange, xGrid bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle = sansBold(11)
	p.Title.TextStyle.XAlign, p.Title.TextStyle.YAlign = draw.XCenter, draw.YTop
	p.Title.Padding = vg.Points(6)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = sans(10).Font
		ax.Tick.Label.Font = sans(9).Font
	}
	p.Y.Label.Text = "bytes (" + y.Unit.Name + ")"
	p.Y.Tick.Marker = y
	grid := plotter.NewGrid()
	grid.Horizontal.Color = gridColor
	grid.Vertical.Color = nil
	if xGrid {
		grid.Vertical.Color = gridColor
	}
	p.Add(grid)
	return p
}

// setY fixes a panel's value axis (after Add, which widens it to the data).
func setY(p *plot.Plot, y axisRange) { p.Y.Min, p.Y.Max = y.Min, y.Max }

// formatValue is a bar's value for its label: 3 significant digits.
func formatValue(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// valueLabels writes each value above its bar, a bar offset by dx.
func valueLabels(vals plotter.Values, dx vg.Length) (*plotter.Labels, error) {
	xys := make(plotter.XYs, len(vals))
	strs := make([]string, len(vals))
	for i, v := range vals {
		xys[i] = plotter.XY{X: float64(i), Y: v}
		strs[i] = formatValue(v)
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: strs})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		st := sans(8)
		st.Color = color.Gray{Y: 0x30}
		st.XAlign, st.YAlign = draw.XCenter, draw.YBottom
		l.TextStyle[i] = st
	}
	l.Offset = vg.Point{X: dx, Y: vg.Points(2)}
	return l, nil
}

// legendItem is an entry of a chart's legend row.
type legendItem struct {
	Label string
	Thumb plot.Thumbnailer // nil: text only
}

// barWidth is the width of each of perGroup bars side by side in groups
// categories across a data area of width w.
func barWidth(w vg.Length, groups, perGroup int) vg.Length {
	b := w / vg.Length(max(groups, 1)) * 0.72 / vg.Length(perGroup)
	return min(b, vg.Points(30))
}

// memoryPlots builds memory.png's panels; poolW and rssW are their widths.
func memoryPlots(l memoryLayout, poolW, rssW vg.Length) (pool, rss *plot.Plot, legend []legendItem, err error) {
	if len(l.Pool) > 0 {
		device := deviceColumns(l.Pool) // a GPU run: a third bar, the device's own count
		title, perGroup := "memunet pool: peak allocated and peak reserved", 2
		if device {
			title, perGroup = "memunet pool: peak allocated and reserved; device memory in use", 3
		}
		pool = newPanel(title, l.PoolAxis, false)
		u := l.PoolAxis.Unit.Bytes
		width := barWidth(poolW-vg.Points(60), len(l.Pool), perGroup)
		// bar offsets: allocated left of centre, reserved right (device further right)
		allocDX, resDX := -width/2, width/2
		if device {
			allocDX, resDX = -width, 0
		}
		var below *plotter.BarChart
		for i, cat := range memory.Categories() {
			vals := make(plotter.Values, len(l.Pool))
			for j, r := range l.Pool {
				vals[j] = float64(r.PeakByCategory[cat.String()]) / u
			}
			bars, err := plotter.NewBarChart(vals, width)
			if err != nil {
				return nil, nil, nil, err
			}
			bars.Color = chartColor(i)
			bars.LineStyle.Width = 0
			bars.Offset = allocDX
			if below != nil {
				bars.StackOn(below)
			}
			pool.Add(bars)
			legend = append(legend, legendItem{"allocated: " + cat.String(), bars})
			below = bars
		}
		alloc := make(plotter.Values, len(l.Pool))
		reserved := make(plotter.Values, len(l.Pool))
		names := make([]string, len(l.Pool))
		for j, r := range l.Pool {
			alloc[j] = float64(r.PeakAllocatedBytes) / u
			reserved[j] = float64(r.PeakReservedBytes) / u
			names[j] = r.Name + "\n" + strings.Replace(variantBrief(r.Variant), ", ", "\n", 1)
		}
		res, err := plotter.NewBarChart(reserved, width)
		if err != nil {
			return nil, nil, nil, err
		}
		res.Color = reservedFill
		res.LineStyle.Color, res.LineStyle.Width = reservedLine, vg.Points(0.6)
		res.Offset = resDX
		pool.Add(res)
		legend = append(legend, legendItem{"peak reserved (cached blocks included)", res})
		labels := []struct {
			v  plotter.Values
			dx vg.Length
		}{{alloc, allocDX}, {reserved, resDX}}
		if device {
			used := make(plotter.Values, len(l.Pool))
			for j, r := range l.Pool {
				used[j] = float64(r.DeviceUsedPeakBytes) / u
			}
			dev, err := plotter.NewBarChart(used, width)
			if err != nil {
				return nil, nil, nil, err
			}
			dev.Color, dev.LineStyle.Width = deviceFill, 0
			dev.Offset = width
			pool.Add(dev)
			legend = append(legend, legendItem{"device memory in use (cuMemGetInfo: context included)", dev})
			labels = append(labels, struct {
				v  plotter.Values
				dx vg.Length
			}{used, width})
		}
		for _, lv := range labels {
			lab, err := valueLabels(lv.v, lv.dx)
			if err != nil {
				return nil, nil, nil, err
			}
			pool.Add(lab)
		}
		pool.NominalX(names...)
		pool.X.Min, pool.X.Max = -0.5, float64(len(l.Pool))-0.5
		if len(l.NoPool) > 0 {
			pool.X.Label.Text = strings.Join(l.NoPool, ", ") + ": no pool, only its RSS (right)"
		}
		setY(pool, l.PoolAxis)
	}

	rss = newPanel("process peak RSS", l.RSSAxis, false)
	u := l.RSSAxis.Unit.Bytes
	vals := make(plotter.Values, len(l.RSS))
	names := make([]string, len(l.RSS))
	for j, r := range l.RSS {
		vals[j] = float64(r.PeakRSSBytes) / u
		names[j] = r.Name
		if j%2 == 1 && len(l.RSS) > 4 {
			names[j] = "\n" + r.Name // staggered so that the names have room
		}
	}
	bars, err := plotter.NewBarChart(vals, barWidth(rssW-vg.Points(50), len(l.RSS), 1)*0.8)
	if err != nil {
		return nil, nil, nil, err
	}
	bars.Color = rssFill
	bars.LineStyle.Width = 0
	rss.Add(bars)
	lab, err := valueLabels(vals, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	rss.Add(lab)
	rss.NominalX(names...)
	rss.X.Min, rss.X.Max = -0.5, float64(len(l.RSS))-0.5
	rss.X.Label.Text = "each variant in a process of its own"
	setY(rss, l.RSSAxis)
	legend = append(legend, legendItem{"process peak RSS", bars})
	return pool, rss, legend, nil
}

// memoryChart draws memory.png: on the left, per memunet variant, its pool's
// peak allocated bytes stacked by category beside its peak reserved bytes;
// on the right every process's peak RSS (plain gorgonia has only this), on
// its own axis.
func memoryChart(path string, rows []CompareRow, s chartSettings) error {
	l, err := layoutMemory(rows)
	if err != nil {
		return err
	}
	return saveChart(path, func(c draw.Canvas) error {
		body := draw.Crop(c, vg.Points(6), -vg.Points(8), vg.Points(4), 0)
		poolW := (body.Max.X - body.Min.X) * 0.6
		if len(l.Pool) == 0 {
			poolW = 0
		}
		rssW := body.Max.X - body.Min.X - poolW
		pool, rss, legend, err := memoryPlots(l, poolW, rssW)
		if err != nil {
			return err
		}
		body = drawHeader(body, memoryHeading(s, rows), legend)
		if pool != nil {
			pool.Draw(draw.Crop(body, 0, -rssW, 0, 0))
		}
		rss.Draw(draw.Crop(body, poolW+vg.Points(10), 0, 0, 0))
		return nil
	})
}

// timelineSeries is one variant's line in timeline.png.
type timelineSeries struct {
	Name    string
	Variant config.Variant
	Step    int
	Events  int
	Peak    int64
	// Points are (% of the step's allocations and frees done, allocated
	// bytes); the first is the state before the step's first event.
	Points plotter.XYs
}

// timelineData turns the timelines into lines over the fraction of the
// step's events (variants differ in their number of events: accumulation
// repeats forward and backward) and the y axis, from 0.
func timelineData(rows []CompareRow, timelines map[string]rundir.Timeline) ([]timelineSeries, axisRange) {
	var out []timelineSeries
	var top float64
	for _, r := range rows {
		tl, ok := timelines[r.Name]
		if !ok || len(tl.Points) == 0 {
			continue
		}
		n := len(tl.Points)
		s := timelineSeries{Name: r.Name, Variant: r.Variant, Step: tl.Step, Events: n, Points: make(plotter.XYs, n+1)}
		first := tl.Points[0]
		s.Points[0] = plotter.XY{X: 0, Y: float64(first.AllocatedBytes - first.DeltaBytes)}
		s.Peak = max(0, first.AllocatedBytes-first.DeltaBytes)
		for i, pt := range tl.Points {
			s.Points[i+1] = plotter.XY{X: 100 * float64(i+1) / float64(n), Y: float64(pt.AllocatedBytes)}
			s.Peak = max(s.Peak, pt.AllocatedBytes)
		}
		top = math.Max(top, float64(s.Peak))
		out = append(out, s)
	}
	return out, byteAxis(top, 8, 0.05)
}

// sameLineAs is the name of the first of earlier whose points are s's, or "".
func sameLineAs(earlier []timelineSeries, s timelineSeries) string {
	for _, e := range earlier {
		if slices.Equal(e.Points, s.Points) {
			return e.Name
		}
	}
	return ""
}

// timelineChart draws timeline.png: the pool's allocated bytes through the
// last optimizer step of each variant, over the share of the step's
// allocations and frees done so that steps of different lengths line up.
func timelineChart(path string, rows []CompareRow, timelines map[string]rundir.Timeline, s chartSettings) error {
	series, y := timelineData(rows, timelines)
	p := newPanel("", y, true)
	p.Y.Label.Text = "pool allocated (" + y.Unit.Name + ")"
	p.X.Label.Text = "allocations and frees done (% of the step's events)"
	p.X.Min, p.X.Max = 0, 100
	p.X.Tick.Marker = axisRange{Max: 100, Step: 10}
	var legend []legendItem
	step := 0
	for i, sr := range series {
		pts := make(plotter.XYs, len(sr.Points))
		for j, pt := range sr.Points {
			pts[j] = plotter.XY{X: pt.X, Y: pt.Y / y.Unit.Bytes}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = chartColor(i)
		line.Width = vg.Points(1.3)
		label := fmt.Sprintf("%s (%s): peak %s, %d events", sr.Name, variantBrief(sr.Variant), memory.FormatBytes(sr.Peak), sr.Events)
		if same := sameLineAs(series[:i], sr); same != "" {
			// Dashed over the earlier line it would hide.
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(6)}
			label += ", same as " + same
		}
		p.Add(line)
		legend = append(legend, legendItem{label, line})
		step = max(step, sr.Step)
	}
	setY(p, y)
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
		h.Notes = append(h.Notes, strings.Join(noPool, ", ")+": no pool, no line")
	}
	h.Notes = append(h.Notes, failedNotes(rows)...)
	return saveChart(path, func(c draw.Canvas) error {
		body := drawHeader(draw.Crop(c, vg.Points(6), -vg.Points(12), vg.Points(4), 0), h, legend)
		p.Draw(body)
		return nil
	})
}

// saveChart draws a chartWidthPx x chartHeightPx PNG.
func saveChart(path string, drawFn func(draw.Canvas) error) error {
	px := func(n int) vg.Length { return vg.Length(n) * vg.Inch / chartDPI }
	img := vgimg.NewWith(vgimg.UseWH(px(chartWidthPx), px(chartHeightPx)), vgimg.UseDPI(chartDPI))
	if err := drawFn(draw.New(img)); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return errors.Join(err, f.Close())
}

// drawHeader draws h (the title; the caption's phrases joined by " · "
// and the notes' by "; ", wrapped between phrases) and the legend's entries in rows,
// centred at the top of c, and returns the rest of c.
func drawHeader(c draw.Canvas, h heading, legend []legendItem) draw.Canvas {
	width := c.Max.X - c.Min.X
	y := c.Max.Y - vg.Points(6)
	line := func(sty text.Style, s string) {
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
		c.FillText(sty, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: y}, s)
		y -= sty.Height(s) + vg.Points(2)
	}
	line(sansBold(13), h.Title)
	y -= vg.Points(2)
	capStyle := sans(10)
	capStyle.Color = color.Gray{Y: 0x30}
	for _, s := range wrapPhrases(capStyle, h.Caption, " · ", width) {
		line(capStyle, s)
	}
	for _, s := range wrapPhrases(capStyle, h.Notes, "; ", width) {
		line(capStyle, s)
	}
	y -= vg.Points(4)

	sty := sans(9.5)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	swatch, gap, pad := vg.Points(16), vg.Points(4), vg.Points(14)
	rowH := sty.Height("Mg") + vg.Points(4)
	entryW := func(e legendItem) vg.Length {
		w := sty.Width(e.Label)
		if e.Thumb != nil {
			w += swatch + gap
		}
		return w
	}
	var rows [][]legendItem
	var rowW []vg.Length
	for _, e := range legend {
		w := entryW(e)
		if n := len(rows); n > 0 && rowW[n-1]+pad+w <= width {
			rows[n-1] = append(rows[n-1], e)
			rowW[n-1] += pad + w
			continue
		}
		rows = append(rows, []legendItem{e})
		rowW = append(rowW, w)
	}
	for i, row := range rows {
		x := c.Min.X + (width-rowW[i])/2
		mid := y - rowH/2
		for _, e := range row {
			if e.Thumb != nil {
				icon := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
					Min: vg.Point{X: x, Y: mid - vg.Points(5)}, Max: vg.Point{X: x + swatch, Y: mid + vg.Points(5)}}}
				e.Thumb.Thumbnail(&icon)
				x += swatch + gap
			}
			c.FillText(sty, vg.Point{X: x, Y: mid}, e.Label)
			x += sty.Width(e.Label) + pad
		}
		y -= rowH
	}
	c.Max.Y = y - vg.Points(4)
	return c
}

// wrapPhrases joins phrases with sep into lines no wider than width
// (a phrase wider than width gets a line of its own).
func wrapPhrases(sty text.Style, phrases []string, sep string, width vg.Length) []string {
	var lines []string
	cur := ""
	for _, ph := range phrases {
		if cur == "" {
			cur = ph
			continue
		}
		if sty.Width(cur+sep+ph) <= width {
			cur += sep + ph
			continue
		}
		lines = append(lines, cur)
		cur = ph
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}
