package report

// The look every chart shares: palette, font, grid, tick placement and the
// PNG writer.

import (
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/memunet/memunet/outdir"
	stdfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// dpi is every chart's resolution: a chart w x h inches is 96w x 96h pixels.
const dpi = 96

// px is n pixels as a length.
func px(n int) vg.Length { return vg.Length(n) * vg.Inch / dpi }

// Colours: series in palette order (Tableau 10), and the greys.
var (
	palette = []color.Color{
		color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
		color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
		color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	}
	gridColor = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	textGrey  = color.Gray{Y: 0x30}
)

// seriesColor is the i-th series' colour.
func seriesColor(i int) color.Color { return palette[i%len(palette)] }

// faded is c mixed with white: share 0 is c, 1 is white.
func faded(c color.Color, share float64) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8(float64(v>>8) + share*(255-float64(v>>8))) }
	return color.RGBA{mix(r), mix(g), mix(b), 0xff}
}

// The one font.
var (
	sansFace     = font.Font{Typeface: "Liberation", Variant: "Sans"}
	sansBoldFace = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: stdfont.WeightBold}
)

func sans(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: font.From(sansFace, size), Handler: plot.DefaultTextHandler}
}

func sansBold(size vg.Length) text.Style {
	s := sans(size)
	s.Font = font.From(sansBoldFace, size)
	return s
}

// newPlot is a plot in the one font with horizontal grid lines (vertical
// ones too when xGrid) and no title: panels draw their titles and legends
// above the data themselves (panelHeader).
func newPlot(xGrid bool) *plot.Plot {
	p := plot.New()
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = sans(10).Font
		ax.Tick.Label.Font = sans(9).Font
	}
	grid := plotter.NewGrid()
	grid.Horizontal.Color = gridColor
	grid.Vertical.Color = nil
	if xGrid {
		grid.Vertical.Color = gridColor
	}
	p.Add(grid)
	return p
}

// savePNG draws a wPx x hPx chart and writes it to path (outdir.WriteFile:
// whole or not at all, never through a symlink).
func savePNG(path string, wPx, hPx int, drawFn func(draw.Canvas) error) error {
	img := vgimg.NewWith(vgimg.UseWH(px(wPx), px(hPx)), vgimg.UseDPI(dpi))
	if err := drawFn(draw.New(img)); err != nil {
		return err
	}
	return outdir.WriteFile(path, func(w io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
		return err
	})
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

// axisRange is a linear axis from Min to Max with a labelled tick every
// Step (and an unlabelled one half way); a byte axis has its Unit.
type axisRange struct {
	Unit           byteUnit
	Min, Max, Step float64
}

// Ticks implements plot.Ticker.
func (a axisRange) Ticks(min, max float64) []plot.Tick {
	if a.Step <= 0 {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	digits := 0 // decimals that write every multiple of Step exactly
	for digits < 9 {
		scaled := a.Step * math.Pow(10, float64(digits))
		if math.Abs(scaled-math.Round(scaled)) < 1e-6*scaled {
			break
		}
		digits++
	}
	var ticks []plot.Tick
	first := math.Ceil(min/a.Step*2-1e-9) / 2 // in steps, on a half step
	for i := 0; ; i++ {
		k := first + float64(i)/2
		v := k * a.Step
		if v > max+1e-9*a.Step {
			break
		}
		label := ""
		if math.Abs(k-math.Round(k)) < 1e-9 {
			label = trimZeros(strconv.FormatFloat(v, 'f', digits, 64))
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// trimZeros drops a decimal number's trailing zeros (and its point).
func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// set fixes an axis to the range and its ticks (after Add, which widens
// the axis to the data).
func (a axisRange) set(ax *plot.Axis) {
	ax.Min, ax.Max = a.Min, a.Max
	ax.Tick.Marker = a
}

// linearAxis is the axis from 0 for values up to max: about ticks
// intervals of 1, 2, 2.5 or 5 times a power of ten, and headroom (a
// fraction of max) free above the largest value.
func linearAxis(max float64, ticks int, headroom float64) axisRange {
	top, step := niceRange(max, ticks, headroom)
	return axisRange{Max: top, Step: step}
}

// byteAxis is linearAxis in the unit that suits max bytes.
func byteAxis(max float64, ticks int, headroom float64) axisRange {
	u := unitFor(max)
	a := linearAxis(max/u.Bytes, ticks, headroom)
	a.Unit = u
	return a
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

// logAxis is a log-scale axis over positive values from lo to hi: its ends
// on labelled ticks, labels at the densest of every digit, 1-2-5, or the
// powers of ten that gives at most the labels asked for, unlabelled ticks
// at the other digits.
type logAxis struct {
	Min, Max  float64
	mantissas []float64 // the labelled first digits
}

func newLogAxis(lo, hi float64, maxLabels int) logAxis {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		lo, hi = 1, 10
	}
	if hi == lo {
		lo, hi = lo/2, hi*2
	}
	var a logAxis
	for _, m := range [][]float64{{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 5}, {1}} {
		a.mantissas = m
		a.Min, a.Max = a.snap(lo, false), a.snap(hi, true)
		if len(a.labels()) <= maxLabels {
			break
		}
	}
	return a
}

// labels are the axis' labelled values.
func (a logAxis) labels() []string {
	var out []string
	for _, t := range a.Ticks(a.Min, a.Max) {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

// snap is the labelled value nearest v at or below it (or above: up).
func (a logAxis) snap(v float64, up bool) float64 {
	e := math.Floor(math.Log10(v))
	best := math.NaN()
	for _, de := range []float64{-1, 0, 1} {
		for _, m := range a.mantissas {
			c := m * math.Pow(10, e+de)
			ok := c <= v*(1+1e-9)
			if up {
				ok = c >= v*(1-1e-9)
			}
			if ok && (math.IsNaN(best) || up && c < best || !up && c > best) {
				best = c
			}
		}
	}
	return best
}

// Ticks implements plot.Ticker.
func (a logAxis) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max*(1+1e-9); e++ {
		for d := 1.0; d <= 9; d++ {
			v := d * math.Pow(10, e)
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			label := ""
			for _, m := range a.mantissas {
				if m == d {
					label = strconv.FormatFloat(v, 'g', 6, 64)
				}
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	return ticks
}

// set makes ax this log axis.
func (a logAxis) set(ax *plot.Axis) {
	ax.Scale = plot.LogScale{}
	ax.Min, ax.Max = a.Min, a.Max
	ax.Tick.Marker = a
}

// formatValue is a value for a label: 3 significant digits.
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
