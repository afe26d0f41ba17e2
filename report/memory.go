package report

// memory.png: compare's peak pool bytes per variant beside each process's
// peak RSS.

import (
	"errors"
	"image/color"
	"math"
	"strings"

	"github.com/memunet/memunet/memory"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// memory.png's size in pixels.
const (
	memoryWidthPx  = 900
	memoryHeightPx = 600
)

// memory.png's own colours beside the palette (which colours the
// categories).
var (
	reservedFill = color.RGBA{0xd9, 0xd9, 0xd9, 0xff}
	reservedLine = color.RGBA{0x80, 0x80, 0x80, 0xff}
	rssFill      = color.RGBA{0x6b, 0x8b, 0xa4, 0xff}
	deviceFill   = color.RGBA{0x76, 0xb9, 0x00, 0xff} // NVIDIA green
)

// memoryLayout is what memory.png shows: the pool panel has memunet's
// variants (peak allocated by category and peak reserved), the RSS panel
// every row that ran, plain gorgonia included (and a GPU run's device
// memory in use), each on its own axis so that gorgonia's larger RSS and
// the device's context do not flatten the pool bars.
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
	return float64(max(r.PeakAllocatedBytes, r.PeakReservedBytes, cats))
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
		rssMax = math.Max(rssMax, float64(max(r.PeakRSSBytes, r.DeviceUsedPeakBytes)))
	}
	if len(l.RSS) == 0 {
		return l, errors.New("no variant ran")
	}
	l.PoolAxis = byteAxis(poolMax, 8, 0.1)
	l.RSSAxis = byteAxis(rssMax, 8, 0.1)
	return l, nil
}

// valueLabels writes each value above its bar, a bar offset by dx; a bar
// of 0 (a row without that measure) has none.
func valueLabels(vals plotter.Values, dx vg.Length) (*plotter.Labels, error) {
	xys := make(plotter.XYs, len(vals))
	strs := make([]string, len(vals))
	for i, v := range vals {
		xys[i] = plotter.XY{X: float64(i), Y: v}
		if v > 0 {
			strs[i] = formatValue(v)
		}
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: strs})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		st := sans(8)
		st.Color = textGrey
		st.XAlign, st.YAlign = draw.XCenter, draw.YBottom
		l.TextStyle[i] = st
	}
	l.Offset = vg.Point{X: dx, Y: vg.Points(2)}
	return l, nil
}

// barWidth is the width of each of perGroup bars side by side in groups
// categories across a data area of width w.
func barWidth(w vg.Length, groups, perGroup int) vg.Length {
	b := w / vg.Length(max(groups, 1)) * 0.72 / vg.Length(perGroup)
	return min(b, vg.Points(30))
}

// barSeries is a row of bars offset by DX from their group's centre.
type barSeries struct {
	vals plotter.Values
	dx   vg.Length
}

// bytePlot is a bar panel's plot over the byte axis y.
func bytePlot(y axisRange) *plot.Plot {
	p := newPlot(false)
	p.Y.Label.Text = "bytes (" + y.Unit.Name + ")"
	return p
}

// barPlot adds series of bars side by side (each offset by its dx) with
// their values above them, in fills, and names the groups.
func barPlot(p *plot.Plot, series []barSeries, width vg.Length, fills []color.Color, names []string) ([]*plotter.BarChart, error) {
	var bars []*plotter.BarChart
	for i, s := range series {
		b, err := plotter.NewBarChart(s.vals, width)
		if err != nil {
			return nil, err
		}
		b.Color, b.LineStyle.Width, b.Offset = fills[i], 0, s.dx
		p.Add(b)
		lab, err := valueLabels(s.vals, s.dx)
		if err != nil {
			return nil, err
		}
		p.Add(lab)
		bars = append(bars, b)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	return bars, nil
}

// memoryPlots builds memory.png's panels; poolW and rssW are their widths.
// The device's own count (a GPU run), which includes the context, sits
// beside the RSS, the other outside view, not among the pool's bars.
func memoryPlots(l memoryLayout, poolW, rssW vg.Length) (pool, rss *panel, legend []legendItem, err error) {
	if len(l.Pool) > 0 {
		p := bytePlot(l.PoolAxis)
		pool = &panel{Title: "memunet pool: peak allocated and peak reserved", Plot: p, Weight: 1}
		u := l.PoolAxis.Unit.Bytes
		width := barWidth(poolW-vg.Points(60), len(l.Pool), 2)
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
			bars.Color = seriesColor(i)
			bars.LineStyle.Width = 0
			bars.Offset = -width / 2
			if below != nil {
				bars.StackOn(below)
			}
			p.Add(bars)
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
		lab, err := valueLabels(alloc, -width/2)
		if err != nil {
			return nil, nil, nil, err
		}
		p.Add(lab)
		res, err := barPlot(p, []barSeries{{reserved, width / 2}}, width, []color.Color{reservedFill}, names)
		if err != nil {
			return nil, nil, nil, err
		}
		res[0].LineStyle.Color, res[0].LineStyle.Width = reservedLine, vg.Points(0.6)
		legend = append(legend, legendItem{"peak reserved (cached blocks included)", res[0]})
		if len(l.NoPool) > 0 {
			p.X.Label.Text = strings.Join(l.NoPool, ", ") + ": no pool, only its RSS (right)"
		}
		l.PoolAxis.set(&p.Y)
	}

	device := deviceColumns(l.RSS)
	title, perGroup := "process peak RSS", 1
	if device {
		title, perGroup = "peak RSS; device memory in use", 2
	}
	p := bytePlot(l.RSSAxis)
	rss = &panel{Title: title, Plot: p, Weight: 1}
	u := l.RSSAxis.Unit.Bytes
	vals := make(plotter.Values, len(l.RSS))
	used := make(plotter.Values, len(l.RSS))
	names := make([]string, len(l.RSS))
	for j, r := range l.RSS {
		vals[j], used[j] = float64(r.PeakRSSBytes)/u, float64(r.DeviceUsedPeakBytes)/u
		names[j] = r.Name
		if j%2 == 1 && len(l.RSS) > 4 {
			names[j] = "\n" + r.Name // staggered so that the names have room
		}
	}
	width := barWidth(rssW-vg.Points(50), len(l.RSS), perGroup) * 0.8
	series, fills := []barSeries{{vals, 0}}, []color.Color{rssFill}
	if device {
		series = []barSeries{{vals, -width / 2}, {used, width / 2}}
		fills = append(fills, deviceFill)
	}
	bars, err := barPlot(p, series, width, fills, names)
	if err != nil {
		return nil, nil, nil, err
	}
	p.X.Label.Text = "each variant in a process of its own"
	l.RSSAxis.set(&p.Y)
	legend = append(legend, legendItem{"process peak RSS", bars[0]})
	if device {
		legend = append(legend, legendItem{"device memory in use (cuMemGetInfo: context included)", bars[1]})
	}
	return pool, rss, legend, nil
}

// memoryHeading is memory.png's heading (without its legend).
func memoryHeading(s CompareSetup, rows []CompareRow) heading {
	return heading{Title: "Peak memory per variant", Caption: s.parts(), Notes: failedNotes(rows)}
}

// MemoryChart draws memory.png at path: on the left, per memunet variant,
// its pool's peak allocated bytes stacked by category beside its peak
// reserved bytes; on the right every process's peak RSS (plain gorgonia
// has only this), on its own axis.
func MemoryChart(path string, rows []CompareRow, s CompareSetup) error {
	l, err := layoutMemory(rows)
	if err != nil {
		return err
	}
	return savePNG(path, memoryWidthPx, memoryHeightPx, func(c draw.Canvas) error {
		body := draw.Crop(c, vg.Points(6), -vg.Points(8), vg.Points(4), 0)
		gap := vg.Points(14)
		poolW := (body.Max.X - body.Min.X - gap) * 0.6
		if len(l.Pool) == 0 {
			poolW = 0
		}
		rssW := body.Max.X - body.Min.X - poolW
		if poolW > 0 {
			rssW -= gap
		}
		pool, rss, legend, err := memoryPlots(l, poolW, rssW)
		if err != nil {
			return err
		}
		h := memoryHeading(s, rows)
		h.Legend = legend
		body = drawHeader(body, h)
		if pool != nil {
			drawColumn(draw.Crop(body, 0, -(rssW+gap), 0, 0), []panel{*pool}, 0)
		}
		drawColumn(draw.Crop(body, body.Max.X-body.Min.X-rssW, 0, 0, 0), []panel{*rss}, 0)
		return nil
	})
}
