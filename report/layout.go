package report

// A chart's frame: the heading (title, caption, notes, legend) above its
// panels, and panels stacked with their titles and legends above the data
// and their data areas lined up.

import (
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// heading is a chart's title, caption, notes and legend.
type heading struct {
	Title   string
	Caption []string // phrases, joined by " · " and wrapped between them
	Notes   []string // phrases under the caption, joined by "; "
	Legend  []legendItem
}

// Text is the heading as one string (for tests and logs).
func (h heading) Text() string {
	return strings.Join([]string{h.Title, strings.Join(h.Caption, " · "), strings.Join(h.Notes, "; ")}, "\n")
}

// legendItem is an entry of a legend row.
type legendItem struct {
	Label string
	Thumb plot.Thumbnailer // nil: text only
}

// legendLabels are the items' labels (for tests).
func legendLabels(items []legendItem) []string {
	out := make([]string, len(items))
	for i, e := range items {
		out[i] = e.Label
	}
	return out
}

// drawHeader draws h centred at the top of c and returns the rest of c.
func drawHeader(c draw.Canvas, h heading) draw.Canvas {
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
	capStyle.Color = textGrey
	for _, s := range wrapPhrases(capStyle, h.Caption, " · ", width) {
		line(capStyle, s)
	}
	for _, s := range wrapPhrases(capStyle, h.Notes, "; ", width) {
		line(capStyle, s)
	}
	y -= vg.Points(4)
	y = drawLegend(c, c.Min.X, width, y, h.Legend, true)
	c.Max.Y = y - vg.Points(4)
	return c
}

// legendStyle is the legends' text.
func legendStyle() text.Style {
	sty := sans(9.5)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	return sty
}

const (
	swatchW   = vg.Length(16) // a legend entry's thumbnail
	swatchGap = vg.Length(4)  // between thumbnail and label
	entryGap  = vg.Length(14) // between entries
)

// legendRows splits items into rows no wider than width, each row's width
// beside it.
func legendRows(items []legendItem, width vg.Length) ([][]legendItem, []vg.Length) {
	sty := legendStyle()
	var rows [][]legendItem
	var rowW []vg.Length
	for _, e := range items {
		w := sty.Width(e.Label)
		if e.Thumb != nil {
			w += swatchW + swatchGap
		}
		if n := len(rows); n > 0 && rowW[n-1]+entryGap+w <= width {
			rows[n-1] = append(rows[n-1], e)
			rowW[n-1] += entryGap + w
			continue
		}
		rows = append(rows, []legendItem{e})
		rowW = append(rowW, w)
	}
	return rows, rowW
}

// legendRowHeight is the height of a legend row.
func legendRowHeight() vg.Length { return legendStyle().Height("Mg") + vg.Points(4) }

// drawLegend draws items in rows from y down, across width from x
// (centred, or from x), and returns the y below them.
func drawLegend(c draw.Canvas, x0, width, y vg.Length, items []legendItem, centre bool) vg.Length {
	sty := legendStyle()
	rowH := legendRowHeight()
	rows, rowW := legendRows(items, width)
	for i, row := range rows {
		x := x0
		if centre {
			x += (width - rowW[i]) / 2
		}
		mid := y - rowH/2
		for _, e := range row {
			if e.Thumb != nil {
				icon := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
					Min: vg.Point{X: x, Y: mid - vg.Points(5)}, Max: vg.Point{X: x + swatchW, Y: mid + vg.Points(5)}}}
				e.Thumb.Thumbnail(&icon)
				x += swatchW + swatchGap
			}
			c.FillText(sty, vg.Point{X: x, Y: mid}, e.Label)
			x += sty.Width(e.Label) + entryGap
		}
		y -= rowH
	}
	return y
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

// panel is a plot with its title and legend drawn above its data area,
// outside it. Weight is its share of the height of its column.
type panel struct {
	Title  string
	Legend []legendItem
	Plot   *plot.Plot
	Weight float64
	hidden bool // keeps its place in a grid, draws nothing
}

// panelTitleStyle is a panel's title.
func panelTitleStyle() text.Style {
	sty := sansBold(10.5)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	return sty
}

// headerHeight is what p's title and legend take above its data, across
// width: the title, then the legend's entries on its line as far as they
// fit and in rows below it.
func (p panel) headerHeight(width vg.Length) vg.Length {
	if p.Title == "" && len(p.Legend) == 0 {
		return 0
	}
	_, rest := p.splitLegend(width)
	rows, _ := legendRows(rest, width)
	return legendRowHeight()*vg.Length(1+len(rows)) + vg.Points(2)
}

// splitLegend is the legend entries that fit on the title's line, and the
// rest.
func (p panel) splitLegend(width vg.Length) (first, rest []legendItem) {
	titleW := panelTitleStyle().Width(p.Title) + 2*entryGap
	rows, rowW := legendRows(p.Legend, width-titleW)
	if len(rows) == 0 || rowW[0] > width-titleW {
		return nil, p.Legend
	}
	return rows[0], p.Legend[len(rows[0]):]
}

// drawPanels draws columns of panels into c: each column takes an equal
// share of the width (gap between them), each panel its Weight of its
// column's height (gap between them), and in every column the data areas
// start at one x, so that the axes line up.
func drawPanels(c draw.Canvas, columns [][]panel, gap vg.Length) {
	width := (c.Max.X - c.Min.X - gap*vg.Length(len(columns)-1)) / vg.Length(max(len(columns), 1))
	for i, col := range columns {
		cc := c
		cc.Min.X = c.Min.X + vg.Length(i)*(width+gap)
		cc.Max.X = cc.Min.X + width
		drawColumn(cc, col, gap)
	}
}

// drawColumn stacks panels in c.
func drawColumn(c draw.Canvas, panels []panel, gap vg.Length) {
	total := 0.0
	for _, p := range panels {
		total += max(p.Weight, 0.01)
	}
	height := c.Max.Y - c.Min.Y - gap*vg.Length(len(panels)-1)
	// Each plot's canvas, below its header.
	canvases := make([]draw.Canvas, len(panels))
	top := c.Max.Y
	for i, p := range panels {
		h := height * vg.Length(max(p.Weight, 0.01)/total)
		pc := c
		pc.Max.Y, pc.Min.Y = top, top-h
		canvases[i] = pc
		top -= h + gap
	}
	// Line the data areas up: the widest y axis sets the left edge (its
	// width does not depend on the height).
	var left vg.Length
	for i, p := range panels {
		if !p.hidden {
			left = max(left, p.Plot.DataCanvas(canvases[i]).Min.X-canvases[i].Min.X)
		}
	}
	for i, p := range panels {
		if p.hidden {
			continue
		}
		pc := canvases[i]
		dataLeft := pc.Min.X + left
		width := pc.Max.X - dataLeft
		y := pc.Max.Y
		if p.Title != "" || len(p.Legend) > 0 {
			first, rest := p.splitLegend(width)
			mid := y - legendRowHeight()/2
			sty := panelTitleStyle()
			c.FillText(sty, vg.Point{X: dataLeft, Y: mid}, p.Title)
			x := dataLeft + sty.Width(p.Title) + 2*entryGap
			drawLegend(c, x, width, y, first, false)
			drawLegend(c, dataLeft, width, y-legendRowHeight(), rest, false)
			pc.Max.Y -= p.headerHeight(width)
		}
		own := p.Plot.DataCanvas(pc).Min.X - pc.Min.X
		pc.Min.X += left - own
		p.Plot.Draw(pc)
	}
}
