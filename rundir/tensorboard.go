package rundir

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/tensorboard"
	"github.com/memunet/memunet/train"
)

const (
	// tbPreviewImages is how many validation images TensorBoard shows.
	tbPreviewImages = 4
	// tbPictureHeight is the least height a validation picture is scaled
	// up to (whole multiples, nearest), so that tiny images stay visible.
	tbPictureHeight = 128
)

// tbObserver writes a run's steps and validations into RUN/tb as
// TensorBoard scalars, under tags named after metrics.jsonl's keys, and
// each validation's preview as pictures (output.tensorboard, rank 0). It
// never stops the run: a failure is one warning (package tensorboard).
type tbObserver struct {
	w *tensorboard.Writer
	// preview is the validation just observed's train.Preview, or nil.
	preview func() *train.Preview
}

// newTBObserver opens dir for a run that continues after step from (0: a
// new run); warn receives the one warning a failure gives.
func newTBObserver(dir string, from int, warn func(string), preview func() *train.Preview) *tbObserver {
	return &tbObserver{w: tensorboard.Open(dir, int64(from), warn), preview: preview}
}

// observeStep records an optimizer step's loss, learning rate, loss scale,
// time and memory (device_used where the device reports it, comm_ms in a
// data-parallel run, grad_norm where it clips).
func (o *tbObserver) observeStep(rec StepRecord, _ train.StepResult) error {
	s := []tensorboard.Scalar{
		{Tag: "train/loss", Value: rec.Loss},
		{Tag: "train/lr", Value: rec.LR},
		{Tag: "train/loss_scale", Value: rec.LossScale},
		{Tag: "train/step_ms", Value: rec.StepMS},
		{Tag: "memory/allocated_bytes", Value: float64(rec.AllocatedBytes)},
		{Tag: "memory/reserved_bytes", Value: float64(rec.ReservedBytes)},
		{Tag: "memory/peak_allocated_bytes", Value: float64(rec.PeakAllocatedBytes)},
		{Tag: "memory/peak_reserved_bytes", Value: float64(rec.PeakReservedBytes)},
	}
	if rec.DeviceUsedBytes > 0 {
		s = append(s, tensorboard.Scalar{Tag: "memory/device_used_bytes", Value: float64(rec.DeviceUsedBytes)})
	}
	if rec.CommMS > 0 {
		s = append(s, tensorboard.Scalar{Tag: "train/comm_ms", Value: rec.CommMS})
	}
	if rec.GradNorm != nil {
		s = append(s, tensorboard.Scalar{Tag: "train/grad_norm", Value: *rec.GradNorm})
	}
	o.w.Scalars(int64(rec.Step), s)
	return nil
}

// observeValidation records a validation's scores, each present class's
// IoU and Dice, and, with a preview, its pictures.
func (o *tbObserver) observeValidation(rec checkpoint.ValRecord) error {
	s := []tensorboard.Scalar{
		{Tag: "val/loss", Value: float64(rec.ValLoss)},
		{Tag: "val/miou", Value: rec.ValMIoU},
		{Tag: "val/dice", Value: rec.ValDice},
		{Tag: "val/pixel_acc", Value: rec.ValPixelAcc},
	}
	for _, c := range rec.PerClass {
		if c.Present() {
			s = append(s, tensorboard.Scalar{Tag: fmt.Sprintf("val/iou/class_%d", c.Class), Value: *c.IoU},
				tensorboard.Scalar{Tag: fmt.Sprintf("val/dice/class_%d", c.Class), Value: *c.Dice})
		}
	}
	o.w.Scalars(int64(rec.Step), s)
	if preview := o.preview(); preview != nil {
		var images []tensorboard.Image
		for i := range preview.N {
			images = append(images, tensorboard.Image{Tag: fmt.Sprintf("val/prediction/%d", i), Image: previewPicture(preview, i)})
		}
		o.w.Images(int64(rec.Step), images)
	}
	return nil
}

func (o *tbObserver) observeEnd(*Summary) error { return nil }

// Close flushes and closes the event file (a failure was warned about).
func (o *tbObserver) Close() error {
	o.w.Close()
	return nil
}

// previewPicture is preview image i beside its mask and the predicted
// classes (data.ClassColor; data.Ignore white), separated by a gray
// gutter. The image is shown with each channel stretched over its own
// range (it is normalized with the run's data.mean and data.std): gray
// from channel 0 below 3 channels, else channels 0..2 as RGB.
func previewPicture(p *train.Preview, i int) *image.RGBA {
	const gap = 2
	plane := p.H * p.W
	scale := max(1, min(8, (tbPictureHeight+p.H-1)/p.H))
	h, w := p.H*scale, p.W*scale
	out := image.NewRGBA(image.Rect(0, 0, 3*w+2*gap, h))
	for k := 0; k < len(out.Pix); k += 4 {
		out.Pix[k], out.Pix[k+1], out.Pix[k+2], out.Pix[k+3] = 128, 128, 128, 255
	}
	shown := min(p.C, 3)
	if shown < 3 {
		shown = 1
	}
	var lo, span [3]float32
	for c := range shown {
		ch := p.Images[(i*p.C+c)*plane : (i*p.C+c+1)*plane]
		mn, mx := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range ch {
			mn, mx = min(mn, v), max(mx, v)
		}
		lo[c], span[c] = mn, max(mx-mn, 1e-12)
	}
	level := func(c, q int) uint8 {
		v := (p.Images[(i*p.C+c)*plane+q] - lo[c]) / span[c]
		return uint8(math.Round(float64(min(max(v, 0), 1)) * 255))
	}
	masks, classes := p.Masks[i*plane:(i+1)*plane], p.Classes[i*plane:(i+1)*plane]
	for y := range h {
		for x := range w {
			q := (y/scale)*p.W + x/scale
			px := color.RGBA{A: 255}
			if shown == 3 {
				px.R, px.G, px.B = level(0, q), level(1, q), level(2, q)
			} else {
				g := level(0, q)
				px.R, px.G, px.B = g, g, g
			}
			out.SetRGBA(x, y, px)
			out.SetRGBA(w+gap+x, y, data.ClassColor(masks[q]))
			out.SetRGBA(2*(w+gap)+x, y, data.ClassColor(classes[q]))
		}
	}
	return out
}
