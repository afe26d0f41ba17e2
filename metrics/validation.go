package metrics

import "math"

// Validation is a validation's loss and scores (in metrics.jsonl,
// summary.json, eval's report and predict.json under these names).
type Validation struct {
	ValLoss     Loss    `json:"val_loss"` // null in JSON where not finite
	ValPixelAcc float64 `json:"val_pixel_acc"`
	ValMIoU     float64 `json:"val_miou"`
	ValDice     float64 `json:"val_dice"`
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

// NameClasses gives each class score its name, the k-th of names (none
// beyond them).
func (v *Validation) NameClasses(names []string) {
	for k := range v.PerClass {
		if k < len(names) {
			v.PerClass[k].Name = names[k]
		}
	}
}

// Score is v's value of a train.monitor score (val_miou, val_dice,
// val_pixel_acc or val_loss).
func (v Validation) Score(monitor string) float64 {
	switch monitor {
	case "val_dice":
		return v.ValDice
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
