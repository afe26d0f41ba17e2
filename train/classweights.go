package train

import (
	"fmt"

	"github.com/memunet/memunet/data"
)

// ClassWeights is train.loss.class_weights: auto: each class's inverse
// frequency among the training masks' counted pixels, scaled so that a
// balanced set weighs every class 1 (scikit-learn's "balanced":
// pixels / (classes · pixels of the class)). A class with no training
// pixel takes the largest weight of the others, as the rarest class does.
func ClassWeights(ds data.Dataset, idx []int, classes int) ([]float64, error) {
	H, W := ds.Size()
	image, mask := make([]float32, ds.Channels()*H*W), make([]uint8, H*W)
	counts := make([]int64, classes)
	var total int64
	for _, i := range idx {
		if err := ds.Sample(i, image, mask); err != nil {
			return nil, err
		}
		for _, t := range mask {
			if int(t) < classes {
				counts[t]++
				total++
			}
		}
	}
	if total == 0 {
		return nil, fmt.Errorf("the training masks have no pixel of any class (all %d ignored): give the weights as a list", len(idx)*H*W)
	}
	w := make([]float64, classes)
	largest := 0.0
	for k, n := range counts {
		if n > 0 {
			w[k] = float64(total) / (float64(classes) * float64(n))
			largest = max(largest, w[k])
		}
	}
	for k, n := range counts {
		if n == 0 {
			w[k] = largest
		}
	}
	return w, nil
}
