package train

import (
	"slices"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/model"
)

// Preview is the first validation images of a Validate with their masks
// and the model's classes, for pictures of what the model does
// (TensorBoard). Its slices are the host's, its own.
type Preview struct {
	N, C, H, W int
	Images     []float32 // (N,C,H,W), normalized as the model sees them
	Masks      []uint8   // (N,H,W) class per pixel, or data.Ignore
	Classes    []uint8   // (N,H,W) the argmax of the logits, the lowest class on a tie
}

// previewFrom is the Preview of the first n images of validation's first
// batch: images and masks as staged on the host, the logits downloaded and
// their argmax taken on the host, so that it allocates nothing in the pool
// (an arena's plan of validation stays exact).
func previewFrom(b backend.Backend, n int, images []float32, masks []uint8, logits *model.Tensor) *Preview {
	n = min(n, logits.N)
	c, k, h, w := len(images)/(logits.N*logits.H*logits.W), logits.C, logits.H, logits.W
	plane := h * w
	p := &Preview{N: n, C: c, H: h, W: w,
		Images: slices.Clone(images[:n*c*plane]), Masks: slices.Clone(masks[:n*plane]), Classes: make([]uint8, n*plane)}
	scores := backend.DownloadFloat32(b, logits.Images(0, n))
	for i := range n {
		for q := range plane {
			best := 0
			for j := 1; j < k; j++ {
				if scores[(i*k+j)*plane+q] > scores[(i*k+best)*plane+q] {
					best = j
				}
			}
			p.Classes[i*plane+q] = uint8(best)
		}
	}
	return p
}
