package metrics

import "math"

// Validation is a validation's loss and scores (in metrics.jsonl,
// summary.json, eval's report and predict.json under these names).
type Validation struct {
	ValLoss     Loss    `json:"val_loss"` // null in JSON where not finite
	ValPixelAcc float64 `json:"val_pixel_acc"`
	ValMIoU     float64 `json:"val_miou"`
	ValDice     float64 `json:"val_dice"`
	// ValMIoUFG and ValDiceFG are the means over the classes present but
	// the background (data.background; over all of them where it is none):
	// nnU-Net's means. Set by Classes.
	ValMIoUFG float64 `json:"val_miou_fg"`
	ValDiceFG float64 `json:"val_dice_fg"`
	// PerClass is each class's IoU and Dice and pixel counts; the means
	// above are over the classes present (in the target or the prediction).
	PerClass []ClassScore `json:"per_class,omitempty"`
}

// ClassScore is one class's scores. IoU and Dice are nil (null in JSON)
// for a class absent from both the target and the prediction: undefined,
// and left out of the means, not counted as 0 or 1.
type ClassScore struct {
	Class int `json:"class"`
	// Name is the class's data.class_names entry, where it has one.
	Name string   `json:"name,omitempty"`
	IoU  *float64 `json:"iou"`
	Dice *float64 `json:"dice"`
	// TargetPixels and PredictedPixels count the class in the masks and in
	// the predictions (ignored pixels not counted).
	TargetPixels    int64 `json:"target_pixels"`
	PredictedPixels int64 `json:"predicted_pixels"`
}

// Present reports whether the class occurs in the target or the prediction.
func (s ClassScore) Present() bool { return s.IoU != nil }

// Classes gives each class score its name, the k-th of names (none
// beyond them), and sets the means without the background class (-1:
// none, the means over every class present).
func (v *Validation) Classes(names []string, background int) {
	var iou, dice float64
	n := 0
	for k := range v.PerClass {
		if k < len(names) {
			v.PerClass[k].Name = names[k]
		}
		if c := v.PerClass[k]; c.Present() && k != background {
			iou, dice, n = iou+*c.IoU, dice+*c.Dice, n+1
		}
	}
	v.ValMIoUFG, v.ValDiceFG = 0, 0
	if n > 0 {
		v.ValMIoUFG, v.ValDiceFG = iou/float64(n), dice/float64(n)
	}
}

// Score is v's value of a train.monitor score (val_miou, val_dice,
// val_pixel_acc or val_loss).
func (v Validation) Score(monitor string) float64 {
	switch monitor {
	case "val_dice":
		return v.ValDice
	case "val_dice_fg":
		return v.ValDiceFG
	case "val_miou_fg":
		return v.ValMIoUFG
	case "val_pixel_acc":
		return v.ValPixelAcc
	case "val_loss":
		return float64(v.ValLoss)
	}
	return v.ValMIoU
}

// Beats reports whether score a beats best, the best so far (nil: none
// yet), by more than minDelta for monitor (lower is better for val_loss,
// higher for the others). A score that is not finite (an overflowed
// val_loss) never does, so it never becomes a best that JSON cannot hold;
// any finite score beats none.
func Beats(monitor string, a float64, best *float64, minDelta float64) bool {
	switch {
	case math.IsNaN(a) || math.IsInf(a, 0):
		return false
	case best == nil:
		return true
	case monitor == "val_loss":
		return a < *best-minDelta
	}
	return a > *best+minDelta
}
