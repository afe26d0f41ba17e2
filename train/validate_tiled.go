package train

import (
	"image"
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/tiles"
)

// validationTile is the tiles' side when a data.patch run validates by
// tiles: predict.tile, else the patch's shorter side.
func (t *Trainer) validationTile() int {
	if t.Config.Predict.Tile > 0 {
		return t.Config.Predict.Tile
	}
	p := t.Config.Data.Patch
	return min(p[0], p[1])
}

// evaluateTiled validates a data.patch run: each image of idx whole, at
// full resolution, by tiles (package tiles: predict.tile, else the
// patch's side; predict.overlap and predict.blend), train.batch_size
// tiles a pass, every pass full (the last filled with repeats) so that
// each allocates alike. The blended logits give the confusion counts and
// the loss, the cross-entropy per counted pixel (ignored ones left out);
// evalSums.samples counts those pixels.
//
// On a virtual pool (a plan) it runs one pass: every pass of a real
// validation repeats its allocations.
func (t *Trainer) evaluateTiled(env *model.Env, idx []int) (evalSums, error) {
	cfg := t.Config
	k, c := t.Net.Config.Classes, t.Net.Config.InChannels
	side, batch := t.validationTile(), cfg.Train.BatchSize
	sums := evalSums{counts: make([]int64, k*k)}
	if env.Pool.Virtual() {
		_, err := t.tilePass(env, nil, batch, side)
		return sums, err
	}
	a, b, err := data.NormCoefficients(cfg.Data.Mean, cfg.Data.Std, c)
	if err != nil {
		return sums, err
	}
	weights := tiles.Weights(side, cfg.Predict.Blend)
	tt := side * side
	input := make([]float32, batch*c*tt)
	for _, i := range idx {
		pic, mask, err := wholeImage(t.whole, i)
		if err != nil {
			return sums, err
		}
		h, w := pic.Bounds().Dy(), pic.Bounds().Dx()
		l, err := tiles.New(h, w, side, cfg.Predict.Overlap)
		if err != nil {
			return sums, err
		}
		blend := tiles.NewBlender(l, k, weights, batch)
		score := func(y int, planes []float32) error {
			for x, target := range mask.Pix[y*mask.Stride : y*mask.Stride+w] {
				if target == backend.IgnoreIndex || int(target) >= k {
					continue
				}
				best, top := 0, math.Inf(-1)
				for cl := range k {
					if z := float64(planes[cl*w+x]); z > top {
						best, top = cl, z
					}
				}
				var sum float64
				for cl := range k {
					sum += math.Exp(float64(planes[cl*w+x]) - top)
				}
				sums.loss += top + math.Log(sum) - float64(planes[int(target)*w+x])
				sums.counts[int(target)*k+best]++
				sums.samples++
			}
			return nil
		}
		for first := 0; first < l.Count(); first += batch {
			n := min(batch, l.Count()-first)
			for j := range batch {
				y0, x0 := l.Origin(first + min(j, n-1))
				data.Window(pic, c, y0, x0, side, side, a, b, true, input[j*c*tt:(j+1)*c*tt])
			}
			out, err := t.tilePass(env, input, batch, side)
			if err != nil {
				return sums, err
			}
			for j := range n {
				if err := blend.Add(first+j, out[j*k*tt:(j+1)*k*tt]); err != nil {
					return sums, err
				}
			}
			if err := blend.Emit(score); err != nil {
				return sums, err
			}
		}
	}
	return sums, nil
}

// tilePass runs batch tiles (host values, nil in a plan) through the
// model in eval mode as a pool phase of its own, and returns their
// logits on the host (nil in a plan).
func (t *Trainer) tilePass(env *model.Env, host []float32, batch, side int) ([]float32, error) {
	env.Pool.BeginPhase(PhaseValidation)
	defer env.Pool.EndPhase()
	images, err := model.NewTensor(env.Device, memory.Activations, backend.Float32, batch, t.Net.Config.InChannels, side, side)
	if err != nil {
		return nil, err
	}
	if host != nil {
		images.Write(host)
	}
	logits, err := t.Net.Forward(env, images)
	images.Release()
	if err != nil {
		return nil, err
	}
	defer logits.Release()
	if env.Pool.Virtual() {
		return nil, nil
	}
	return backend.DownloadFloat32(env.Backend, logits.View()), nil
}

// wholeImage is sample i of src at 16 bits where it has them, and its
// classes.
func wholeImage(src data.ImageSource, i int) (image.Image, *image.Gray, error) {
	if d, ok := src.(data.DeepImager); ok {
		return d.DeepImage(i)
	}
	return src.Image(i)
}
