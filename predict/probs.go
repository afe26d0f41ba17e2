package predict

import (
	"fmt"
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/metrics"
)

// Probabilities returns each pixel's class probabilities, (N,K,H,W) on the
// host: the softmax of the logits of n normalized images (N,C,H,W planar),
// in float64, stored as float32. With flip it is the mean of the images'
// and their left-right mirrors' probabilities, the mirrors' flipped back
// (test-time flip averaging: two forward passes). An ensemble's are the
// mean of its models' (each flip-averaged with flip), added model by
// model in order in float32 and divided by their number.
func (p *Predictor) Probabilities(images []float32, n, h, w int, flip bool) ([]float32, error) {
	if want := n * p.Config.Model.InChannels * h * w; len(images) != want {
		return nil, fmt.Errorf("predict: %d values for %d images of %dx%dx%d", len(images), n, p.Config.Model.InChannels, h, w)
	}
	if err := p.Net.CheckInput(p.Config.Model.InChannels, h, w); err != nil {
		return nil, err
	}
	probs, err := p.flipped(nil, images, n, h, w, flip)
	var q []float32 // each member's in turn, in one buffer (no garbage a member)
	for i, m := range p.members {
		if err != nil {
			break
		}
		if q, err = m.flipped(q, images, n, h, w, flip); err == nil {
			meanInto(probs, q, i == len(p.members)-1, p.Ensemble())
		}
	}
	if err != nil {
		return nil, err
	}
	return probs, nil
}

// flipped is one model's probabilities (Probabilities' of a model
// alone), in dst where they fit it (else a new slice).
func (p *Predictor) flipped(dst, images []float32, n, h, w int, flip bool) ([]float32, error) {
	probs, err := p.softmax(dst, images, n, h, w)
	if err != nil || !flip {
		return probs, err
	}
	mirrored, err := p.softmax(nil, mirror(images, h, w), n, h, w)
	if err != nil {
		return nil, err
	}
	back := mirror(mirrored, h, w)
	for i := range probs {
		probs[i] = (probs[i] + back[i]) / 2
	}
	return probs, nil
}

// softmax runs the model and turns its logits into probabilities, in dst
// where they fit it (hostLogits).
func (p *Predictor) softmax(dst, images []float32, n, h, w int) ([]float32, error) {
	z, err := p.hostLogits(dst, images, n, h, w)
	if err != nil {
		return nil, err
	}
	if err := p.Device.Backend.Sync(); err != nil {
		return nil, err // a device error: no probabilities from garbage
	}
	softmaxPlanes(z, n, p.Config.Model.Classes, h*w)
	return z, nil
}

// softmaxPlanes turns n items of k planes of hw logits (N,K,HW) into
// their probabilities in place: each position's softmax over the planes,
// in float64, stored as float32.
func softmaxPlanes(z []float32, n, k, hw int) {
	for img := range n {
		for px := range hw {
			base := img*k*hw + px
			mx := math.Inf(-1)
			for c := range k {
				mx = max(mx, float64(z[base+c*hw]))
			}
			var sum float64
			for c := range k {
				sum += math.Exp(float64(z[base+c*hw]) - mx)
			}
			for c := range k {
				z[base+c*hw] = float32(math.Exp(float64(z[base+c*hw])-mx) / sum)
			}
		}
	}
}

// mirror is x (planes of h x w) flipped left-right, plane by plane.
func mirror(x []float32, h, w int) []float32 {
	out := make([]float32, len(x))
	for row := 0; row < len(x)/w; row++ {
		src, dst := x[row*w:(row+1)*w], out[row*w:(row+1)*w]
		for j := range w {
			dst[w-1-j] = src[j]
		}
	}
	return out
}

// Argmax is each pixel's most probable class (the first on ties) of probs
// (N,K,H,W).
func Argmax(probs []float32, n, k, h, w int) []uint8 {
	hw := h * w
	out := make([]uint8, n*hw)
	for img := range n {
		for px := range hw {
			base, best := img*k*hw+px, 0
			for c := 1; c < k; c++ {
				if probs[base+c*hw] > probs[base+best*hw] {
					best = c
				}
			}
			out[img*hw+px] = uint8(best)
		}
	}
	return out
}

// PredictSplitProbs is PredictSplit computed from Probabilities (so with
// test-time flip averaging when flip): fn also gets each sample's
// probabilities (K,H,W); the loss is the mean over counted pixels of
// -log(probability of the target class).
func (p *Predictor) PredictSplitProbs(ds data.Dataset, idx []int, flip bool, fn func(index int, pred, target []uint8, probs []float32) error) (metrics.Validation, error) {
	h, w := ds.Size()
	c, k := ds.Channels(), p.Config.Model.Classes
	conf := metrics.NewConfusion(k)
	var lossSum float64
	var counted int64
	for lo := 0; lo < len(idx); lo += p.Batch {
		if err := p.stopped(); err != nil {
			return metrics.Validation{}, err
		}
		hi := min(lo+p.Batch, len(idx))
		n := hi - lo
		images := make([]float32, n*c*h*w)
		masks := make([]uint8, n*h*w)
		if err := data.FillBatch(ds, idx[lo:hi], images, masks); err != nil {
			return metrics.Validation{}, err
		}
		probs, err := p.Probabilities(images, n, h, w, flip)
		if err != nil {
			return metrics.Validation{}, err
		}
		pred := Argmax(probs, n, k, h, w)
		hw := h * w
		for i, t := range masks {
			if t == backend.IgnoreIndex || int(t) >= k {
				continue
			}
			img, px := i/hw, i%hw
			conf.Counts[int(t)*k+int(pred[i])]++
			lossSum -= math.Log(max(float64(probs[img*k*hw+int(t)*hw+px]), 1e-45))
			counted++
		}
		for j := range n {
			if err := fn(idx[lo+j], pred[j*hw:(j+1)*hw], masks[j*hw:(j+1)*hw], probs[j*k*hw:(j+1)*k*hw]); err != nil {
				return metrics.Validation{}, err
			}
		}
	}
	if len(idx) == 0 {
		return metrics.Validation{}, fmt.Errorf("the split has no samples")
	}
	return p.validation(conf, lossSum/float64(max(counted, 1))), nil
}
