package train

import (
	"math"
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
