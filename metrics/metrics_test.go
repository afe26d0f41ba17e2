package metrics

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

func TestConfusionMetrics(t *testing.T) {
	// 1 image, 2x3 pixels, 3 classes; logits pick the class with the largest value.
	pred := []int{0, 1, 2, 2, 1, 0}
	target := []uint8{0, 1, 1, 2, 255, 0}
	logits := make([]float32, 3*6)
	for p, k := range pred {
		logits[k*6+p] = 1
	}
	c := NewConfusion(3)
	countOnCPU(t, c, logits, target, 1, 2, 3)
	// counted pixels: (0,0) (1,1) (1,2) (2,2) (0,0); the 255 pixel is ignored.
	if got := c.PixelAccuracy(); got != 4.0/5 {
		t.Errorf("pixel accuracy %v, want 0.8", got)
	}
	// IoU: class0 2/2, class1 1/2 (tp1, fn1), class2 1/2 (tp1, fp1).
	if got, want := c.MeanIoU(), (1+0.5+0.5)/3; math.Abs(got-want) > 1e-12 {
		t.Errorf("mIoU %v, want %v", got, want)
	}
	// Dice: class0 1, class1 2/3, class2 2/3.
	if got, want := c.MeanDice(), (1+2.0/3+2.0/3)/3; math.Abs(got-want) > 1e-12 {
		t.Errorf("Dice %v, want %v", got, want)
	}
	// A class absent from target and prediction does not count.
	c4 := NewConfusion(4)
	countOnCPU(t, c4, append(logits, make([]float32, 6)...), target, 1, 2, 3)
	if c4.MeanIoU() != c.MeanIoU() {
		t.Errorf("absent class changed mIoU: %v vs %v", c4.MeanIoU(), c.MeanIoU())
	}
	if NewConfusion(2).MeanIoU() != 0 || NewConfusion(2).PixelAccuracy() != 0 {
		t.Error("empty confusion should give 0")
	}
}

// countOnCPU adds host logits (n,K,h,w) and targets to c with the CPU
// backend's Confusion.
func countOnCPU(t *testing.T, c *Confusion, logits []float32, target []uint8, n, h, w int) {
	t.Helper()
	dev := model.NewDevice(cpu.New(), memory.Options{})
	z, err := model.NewTensor(dev, memory.Activations, backend.Float32, n, c.Classes, h, w)
	if err != nil {
		t.Fatal(err)
	}
	z.Write(logits)
	buf, err := dev.Pool.Alloc(memory.Activations, int64(len(target)))
	if err != nil {
		t.Fatal(err)
	}
	tv := backend.Whole(buf, backend.Uint8)
	dev.Backend.Upload(tv, target)
	dev.Backend.Confusion(backend.Shape4{N: n, C: c.Classes, H: h, W: w}, c.Counts, z.View(), tv)
}

// TestPerClassScores: each class's IoU and Dice from the confusion counts;
// a class in neither the target nor the prediction has none (and is left
// out of the means), one only predicted scores 0.
func TestPerClassScores(t *testing.T) {
	// rows: true class 0..3; columns: predicted. Class 2 is never true and
	// never predicted; class 3 is only predicted.
	c := &Confusion{Classes: 4, Counts: []int64{
		8, 1, 0, 1,
		2, 6, 0, 0,
		0, 0, 0, 0,
		0, 0, 0, 0,
	}}
	got := c.PerClass()
	want := []struct {
		iou, dice      float64
		present        bool
		target, predic int64
	}{
		{8.0 / 12, 16.0 / 20, true, 10, 10},
		{6.0 / 9, 12.0 / 15, true, 8, 7},
		{0, 0, false, 0, 0},
		{0, 0, true, 0, 1},
	}
	for k, w := range want {
		s := got[k]
		if s.Class != k || s.Present() != w.present || s.TargetPixels != w.target || s.PredictedPixels != w.predic {
			t.Errorf("class %d: %+v", k, s)
			continue
		}
		if w.present && (math.Abs(*s.IoU-w.iou) > 1e-12 || math.Abs(*s.Dice-w.dice) > 1e-12) {
			t.Errorf("class %d: IoU %v Dice %v, want %v %v", k, *s.IoU, *s.Dice, w.iou, w.dice)
		}
	}
	v := c.Validation(0.5)
	if wantMean := (8.0/12 + 6.0/9 + 0) / 3; math.Abs(v.ValMIoU-wantMean) > 1e-12 {
		t.Errorf("mean IoU %v, want %v over the 3 present classes", v.ValMIoU, wantMean)
	}
	v.Classes([]string{"sky", "road"}, 0)
	if v.PerClass[0].Name != "sky" || v.PerClass[1].Name != "road" || v.PerClass[2].Name != "" {
		t.Errorf("names %+v", v.PerClass)
	}
	// Without the background (class 0): classes 1 and 3 present; class 2
	// absent and left out; with none, every present class.
	if want := (6.0/9 + 0) / 2; math.Abs(v.ValMIoUFG-want) > 1e-12 || math.Abs(v.ValDiceFG-(12.0/15)/2) > 1e-12 {
		t.Errorf("means without background: IoU %v, Dice %v; want %v, %v", v.ValMIoUFG, v.ValDiceFG, want, (12.0/15)/2)
	}
	if v.Classes(nil, 1); math.Abs(v.ValDiceFG-(16.0/20)/2) > 1e-12 {
		t.Errorf("background 1: Dice %v, want %v", v.ValDiceFG, (16.0/20)/2)
	}
	if v.Classes(nil, -1); math.Abs(v.ValMIoUFG-v.ValMIoU) > 1e-12 {
		t.Errorf("no background: %v, want the mean over all present %v", v.ValMIoUFG, v.ValMIoU)
	}
	js, err := json.Marshal(v.PerClass[2])
	if err != nil || !strings.Contains(string(js), `"iou":null`) || !strings.Contains(string(js), `"dice":null`) {
		t.Errorf("an absent class in JSON: %s, %v", js, err)
	}
}

// TestBetter: lower is better for val_loss, higher for the other scores,
// and only by more than minDelta.
func TestBetter(t *testing.T) {
	v := Validation{ValLoss: 0.3, ValPixelAcc: 0.9, ValMIoU: 0.7, ValDice: 0.8}
	for _, tc := range []struct {
		monitor string
		score   float64
		a, b, d float64
		better  bool
	}{
		{"val_miou", 0.7, 0.7, 0.6, 0, true},
		{"val_miou", 0.7, 0.6, 0.7, 0, false},
		{"val_miou", 0.7, 0.65, 0.6, 0.1, false},
		{"val_dice", 0.8, 0.8, 0.8, 0, false},
		{"val_pixel_acc", 0.9, 0.9, 0.1, 0, true},
		{"val_loss", 0.3, 0.2, 0.3, 0, true},
		{"val_loss", 0.3, 0.3, 0.2, 0, false},
		{"val_loss", 0.3, 0.25, 0.3, 0.1, false},
	} {
		if got := v.Score(tc.monitor); got != tc.score {
			t.Errorf("Score(%s) = %v, want %v", tc.monitor, got, tc.score)
		}
		if got := Beats(tc.monitor, tc.a, &tc.b, tc.d); got != tc.better {
			t.Errorf("Beats(%s, %v, %v, %v) = %v", tc.monitor, tc.a, tc.b, tc.d, got)
		}
	}
}
