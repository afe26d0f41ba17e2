package rundir

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memunet/memunet/checkpoint"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// CurvesFile is the run's training curves, drawn at every validation and at
// the end.
const CurvesFile = "curves.png"

// Curves is a run's history as curves.png draws it: every step's loss and
// learning rate, every validation's loss and scores.
type Curves struct {
	Steps    []float64
	Loss, LR []float64 // LR is 0 for records rebuilt from a checkpoint's history
	ValSteps []float64
	ValLoss  []float64
	MIoU     []float64
	Dice     []float64
	PixelAcc []float64
}

func (c *Curves) addStep(r StepRecord) {
	c.Steps, c.Loss, c.LR = append(c.Steps, float64(r.Step)), append(c.Loss, r.Loss), append(c.LR, r.LR)
}

func (c *Curves) addVal(r checkpoint.ValRecord) {
	c.ValSteps = append(c.ValSteps, float64(r.Step))
	c.ValLoss, c.MIoU = append(c.ValLoss, r.ValLoss), append(c.MIoU, r.ValMIoU)
	c.Dice, c.PixelAcc = append(c.Dice, r.ValDice), append(c.PixelAcc, r.ValPixelAcc)
}

// ReadCurves reads a run's metrics.jsonl.
func ReadCurves(path string) (Curves, error) {
	var c Curves
	raw, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<26)
	for line := 1; sc.Scan(); line++ {
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &kind); err != nil {
			return c, fmt.Errorf("%s: line %d: %v", path, line, err)
		}
		switch kind.Type {
		case "step":
			var r StepRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return c, fmt.Errorf("%s: line %d: %v", path, line, err)
			}
			c.addStep(r)
		case "val":
			var r checkpoint.ValRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return c, fmt.Errorf("%s: line %d: %v", path, line, err)
			}
			c.addVal(r)
		}
	}
	return c, sc.Err()
}

// Curve colours (Tableau 10).
var (
	curveLoss  = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	curveVal   = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	curveMIoU  = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	curveDice  = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	curveAcc   = color.RGBA{0x94, 0x67, 0xbd, 0xff}
	curveRate  = color.RGBA{0x8c, 0x56, 0x4b, 0xff}
	curveGrid  = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	curvesSize = [2]vg.Length{9 * vg.Inch, 8 * vg.Inch}
)

// Draw writes the curves as a PNG: the training and validation loss, the
// validation scores (mIoU, Dice, pixel accuracy, from 0 to 1) and the
// learning rate, over the steps, under title.
func (c Curves) Draw(path, title string) error {
	if len(c.Steps) == 0 {
		return errors.New("no steps to draw")
	}
	loss, err := curvePanel(title+"\nloss", "loss", []curve{{"training loss", c.Steps, c.Loss, curveLoss, false},
		{"validation loss", c.ValSteps, c.ValLoss, curveVal, true}})
	if err != nil {
		return err
	}
	scores, err := curvePanel("validation scores", "score", []curve{{"mIoU", c.ValSteps, c.MIoU, curveMIoU, true},
		{"Dice", c.ValSteps, c.Dice, curveDice, true}, {"pixel accuracy", c.ValSteps, c.PixelAcc, curveAcc, true}})
	if err != nil {
		return err
	}
	scores.Y.Min, scores.Y.Max = 0, 1
	scores.Legend.Top = false // scores rise towards 1: the legend goes below them
	rate, err := curvePanel("learning rate", "lr", []curve{{"lr", c.Steps, c.LR, curveRate, false}})
	if err != nil {
		return err
	}
	rate.Y.Min = 0
	rate.X.Label.Text = "optimizer step"
	for _, p := range []*plot.Plot{loss, scores, rate} { // one step axis for all three
		p.X.Min, p.X.Max = 0, c.Steps[len(c.Steps)-1]
	}
	img := vgimg.NewWith(vgimg.UseWH(curvesSize[0], curvesSize[1]), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(10)}
	plots := [][]*plot.Plot{{loss}, {scores}, {rate}}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return errors.Join(err, f.Close())
}

// curve is one line of a panel; marks draws its points (validations are few).
type curve struct {
	name  string
	x, y  []float64
	color color.Color
	marks bool
}

func curvePanel(title, ylabel string, curves []curve) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	grid := plotter.NewGrid()
	grid.Horizontal.Color, grid.Vertical.Color = curveGrid, curveGrid
	p.Add(grid)
	p.Legend.Top = true
	for _, c := range curves {
		if len(c.x) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(c.x))
		for i := range c.x {
			pts[i].X, pts[i].Y = c.x[i], c.y[i]
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Color, line.Width = c.color, vg.Points(1.2)
		p.Add(line)
		p.Legend.Add(c.name, line)
		if c.marks {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.Color, sc.Radius = c.color, vg.Points(2.5)
			p.Add(sc)
		}
	}
	return p, nil
}

// DrawValidations writes several runs' validation curves (val mIoU and val
// loss over the steps) together as a PNG, one colour per run.
func DrawValidations(path string, names []string, runs []Curves) error {
	palette := []color.Color{curveLoss, curveVal, curveMIoU, curveDice, curveAcc, curveRate,
		color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff}}
	var miou, loss []curve
	last := 0.0
	for i, c := range runs {
		col := palette[i%len(palette)]
		miou = append(miou, curve{names[i], c.ValSteps, c.MIoU, col, true})
		loss = append(loss, curve{names[i], c.ValSteps, c.ValLoss, col, true})
		if n := len(c.ValSteps); n > 0 {
			last = max(last, c.ValSteps[n-1])
		}
	}
	if last == 0 {
		return errors.New("no run has a validation to draw")
	}
	top, err := curvePanel("validation mIoU", "mIoU", miou)
	if err != nil {
		return err
	}
	top.Y.Min, top.Y.Max = 0, 1
	top.Legend.Top = false
	bottom, err := curvePanel("validation loss", "loss", loss)
	if err != nil {
		return err
	}
	bottom.X.Label.Text = "optimizer step"
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Min, p.X.Max = 0, last
	}
	img := vgimg.NewWith(vgimg.UseWH(curvesSize[0], 6*vg.Inch), vgimg.UseDPI(96))
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(10)}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, draw.New(img))
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return errors.Join(err, f.Close())
}
