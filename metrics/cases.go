package metrics

// Ignore is the target value no score counts (data.Ignore).
const Ignore uint8 = 255

// CaseScore is one case's scores, as nnU-Net reports them: a 2D image or
// a volume (all of its slices), per class.
type CaseScore struct {
	Case    string      `json:"case"`
	Classes []CaseClass `json:"classes"`
	// MeanDice is the mean Dice over the classes present in the case (in
	// its reference or its prediction); MeanDiceFG the same without the
	// background class. Null where none is.
	MeanDice   *float64 `json:"mean_dice"`
	MeanDiceFG *float64 `json:"mean_dice_fg"`
}

// CaseClass is one class's scores in a case. Dice and IoU are null where
// the class is in neither the reference nor the prediction, HD95 where it
// is missing from either (undefined).
type CaseClass struct {
	Class      int      `json:"class"`
	Dice       *float64 `json:"dice"`
	IoU        *float64 `json:"iou"`
	HD95       *float64 `json:"hd95"`
	RefVoxels  int64    `json:"reference_voxels"`
	PredVoxels int64    `json:"predicted_voxels"`
}

// ScoreCase scores pred against ref, both classes per voxel of a volume
// of dims (x fastest; dims[2] 1 for an image) with the voxels' spacing
// (HD95 in its units): per class Dice, IoU and HD95, voxels whose ref is
// Ignore left out of every score; background is the class MeanDiceFG
// leaves out (-1: none).
func ScoreCase(name string, pred, ref []uint8, dims [3]int, spacing [3]float64, classes, background int) CaseScore {
	p := make([]uint8, len(pred))
	copy(p, pred)
	for k, r := range ref {
		if r == Ignore {
			p[k] = Ignore // neither a class nor its surface
		}
	}
	cs := CaseScore{Case: name}
	var sum, sumFG float64
	var n, nFG int
	for c := range classes {
		cc := CaseClass{Class: c}
		var inter int64
		for k, r := range ref {
			if r == uint8(c) {
				cc.RefVoxels++
				if p[k] == r {
					inter++
				}
			}
			if p[k] == uint8(c) {
				cc.PredVoxels++
			}
		}
		if union := cc.RefVoxels + cc.PredVoxels - inter; union > 0 {
			dice := 2 * float64(inter) / float64(cc.RefVoxels+cc.PredVoxels)
			iou := float64(inter) / float64(union)
			cc.Dice, cc.IoU = &dice, &iou
			sum, n = sum+dice, n+1
			if c != background {
				sumFG, nFG = sumFG+dice, nFG+1
			}
		}
		if d, ok := HD95(p, ref, uint8(c), dims, spacing); ok {
			cc.HD95 = &d
		}
		cs.Classes = append(cs.Classes, cc)
	}
	cs.MeanDice, cs.MeanDiceFG = mean(sum, n), mean(sumFG, nFG)
	return cs
}

func mean(sum float64, n int) *float64 {
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}

// ClassMean is a class's scores averaged over the cases where each is
// defined, with how many cases that is.
type ClassMean struct {
	Class     int      `json:"class"`
	Dice      *float64 `json:"dice"`
	IoU       *float64 `json:"iou"`
	HD95      *float64 `json:"hd95"`
	DiceCases int      `json:"dice_cases"`
	HD95Cases int      `json:"hd95_cases"`
}

// CaseMeans is the mean over cases of each class's scores, and of the
// cases' MeanDice and MeanDiceFG (nnU-Net's "mean over cases, with and
// without background").
func CaseMeans(cases []CaseScore, classes int) (perClass []ClassMean, meanDice, meanDiceFG *float64) {
	for c := range classes {
		cm := ClassMean{Class: c}
		var dice, iou, hd float64
		for _, cs := range cases {
			cc := cs.Classes[c]
			if cc.Dice != nil {
				dice, iou, cm.DiceCases = dice+*cc.Dice, iou+*cc.IoU, cm.DiceCases+1
			}
			if cc.HD95 != nil {
				hd, cm.HD95Cases = hd+*cc.HD95, cm.HD95Cases+1
			}
		}
		cm.Dice, cm.IoU, cm.HD95 = mean(dice, cm.DiceCases), mean(iou, cm.DiceCases), mean(hd, cm.HD95Cases)
		perClass = append(perClass, cm)
	}
	var all, fg float64
	var n, nFG int
	for _, cs := range cases {
		if cs.MeanDice != nil {
			all, n = all+*cs.MeanDice, n+1
		}
		if cs.MeanDiceFG != nil {
			fg, nFG = fg+*cs.MeanDiceFG, nFG+1
		}
	}
	return perClass, mean(all, n), mean(fg, nFG)
}
