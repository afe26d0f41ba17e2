package metrics

// Confusion is a classes x classes pixel count: rows are the true class,
// columns the predicted one (backend.Metrics.Confusion counts them). Pixels
// whose target is the ignore index are not counted.
type Confusion struct {
	Classes int
	Counts  []int64
}

// NewConfusion makes an empty matrix.
func NewConfusion(classes int) *Confusion {
	return &Confusion{Classes: classes, Counts: make([]int64, classes*classes)}
}

// PixelAccuracy is correct pixels over counted pixels (0 with none).
func (c *Confusion) PixelAccuracy() float64 {
	var correct, total int64
	for t := 0; t < c.Classes; t++ {
		for p := 0; p < c.Classes; p++ {
			total += c.Counts[t*c.Classes+p]
		}
		correct += c.Counts[t*c.Classes+t]
	}
	if total == 0 {
		return 0
	}
	return float64(correct) / float64(total)
}

// MeanIoU is the mean over classes of TP/(TP+FP+FN), over the classes that
// occur in the target or the prediction (the others have no defined IoU).
func (c *Confusion) MeanIoU() float64 {
	return c.meanOver(func(tp, fp, fn int64) (float64, float64) { return float64(tp), float64(tp + fp + fn) })
}

// MeanDice is the mean over classes of 2TP/(2TP+FP+FN), over the same classes.
func (c *Confusion) MeanDice() float64 {
	return c.meanOver(func(tp, fp, fn int64) (float64, float64) { return float64(2 * tp), float64(2*tp + fp + fn) })
}

func (c *Confusion) meanOver(score func(tp, fp, fn int64) (num, den float64)) float64 {
	var sum float64
	n := 0
	for k := 0; k < c.Classes; k++ {
		num, den := score(c.counts(k))
		if den == 0 {
			continue
		}
		sum += num / den
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// PerClass is every class's IoU, Dice and pixel counts.
func (c *Confusion) PerClass() []ClassScore {
	out := make([]ClassScore, c.Classes)
	for k := range out {
		tp, fp, fn := c.counts(k)
		s := ClassScore{Class: k, TargetPixels: tp + fn, PredictedPixels: tp + fp}
		if tp+fp+fn > 0 {
			iou, dice := float64(tp)/float64(tp+fp+fn), float64(2*tp)/float64(2*tp+fp+fn)
			s.IoU, s.Dice = &iou, &dice
		}
		out[k] = s
	}
	return out
}

// counts are class k's true positives, false positives and false negatives.
func (c *Confusion) counts(k int) (tp, fp, fn int64) {
	tp = c.Counts[k*c.Classes+k]
	for j := 0; j < c.Classes; j++ {
		if j != k {
			fn += c.Counts[k*c.Classes+j]
			fp += c.Counts[j*c.Classes+k]
		}
	}
	return tp, fp, fn
}

// Validation is the scores of the counted pixels, with loss as the loss.
func (c *Confusion) Validation(loss float64) Validation {
	return Validation{ValLoss: Loss(loss), ValPixelAcc: c.PixelAccuracy(), ValMIoU: c.MeanIoU(), ValDice: c.MeanDice(), PerClass: c.PerClass()}
}
