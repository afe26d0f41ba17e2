package train

import (
	"fmt"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// Predictor is a checkpoint's model in eval mode, allocated from its own
// accounted pool.
type Predictor struct {
	Checkpoint *Checkpoint
	// Config is the checkpoint's configuration: architecture, data and
	// preprocessing.
	Config config.Config
	Pool   *memory.Pool
	Net    *model.UNet
	// Batch is the number of images per forward pass.
	Batch int
	env   *model.Env
}

// NewPredictor builds the checkpoint's model with precision ("fp32", "fp16"
// or "bf16": the storage of activations and weight copies, as in training)
// in a pool of the given capacity (0: unlimited), and loads its weights.
func NewPredictor(ck *Checkpoint, precision string, capacity int64, batch int) (*Predictor, error) {
	if batch < 1 {
		return nil, fmt.Errorf("batch size %d: must be at least 1", batch)
	}
	switch precision {
	case "fp32", "fp16", "bf16":
	default:
		return nil, fmt.Errorf("precision %q: must be fp32, fp16 or bf16", precision)
	}
	p := &Predictor{Checkpoint: ck, Config: ck.Config, Batch: batch}
	p.Pool = memory.NewPool(memory.Options{Capacity: capacity})
	prec := Precision(precision)
	p.env = &model.Env{Pool: p.Pool, Precision: prec}
	var err error
	if p.Net, err = model.New(p.Pool, ck.Config.ModelConfig(), ck.Config.Model.Seed); err != nil {
		return nil, err
	}
	if err := p.Net.SetPrecision(prec); err != nil {
		p.Close()
		return nil, err
	}
	if err := ck.LoadWeights(p.Net); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close returns the model to the pool.
func (p *Predictor) Close() {
	if p.Net != nil {
		p.Net.Free()
		p.Net = nil
	}
}

// InputSize is the (H, W) images are scaled to: the size the model was
// trained on.
func (p *Predictor) InputSize() (h, w int) { return p.Config.ImageSize() }

// logits runs n images (N,C,H,W normalized, planar) through the model.
func (p *Predictor) logits(images []float32, n, h, w int) (*model.Tensor, error) {
	x, err := model.NewTensor(p.Pool, memory.Activations, n, p.Config.Model.InChannels, h, w)
	if err != nil {
		return nil, err
	}
	defer x.Release()
	copy(x.Data(), images)
	return p.Net.Forward(p.env, x)
}

// Predict returns the class of every pixel (N,H,W) of n normalized images
// (N,C,H,W planar): the argmax of the logits, the lowest class on a tie.
func (p *Predictor) Predict(images []float32, n, h, w int) ([]uint8, error) {
	if want := n * p.Config.Model.InChannels * h * w; len(images) != want {
		return nil, fmt.Errorf("predict: %d values for %d images of %dx%dx%d", len(images), n, p.Config.Model.InChannels, h, w)
	}
	if err := p.Net.CheckInput(p.Config.Model.InChannels, h, w); err != nil {
		return nil, err
	}
	logits, err := p.logits(images, n, h, w)
	if err != nil {
		return nil, err
	}
	defer logits.Release()
	return Argmax(logits.Float32(), n, p.Config.Model.Classes, h, w), nil
}

// Argmax is the class of each pixel of logits (N,K,H,W): the first largest.
func Argmax(logits []float32, n, k, h, w int) []uint8 {
	hw := h * w
	out := make([]uint8, n*hw)
	for i := 0; i < n; i++ {
		for px := 0; px < hw; px++ {
			best, arg := logits[(i*k)*hw+px], 0
			for c := 1; c < k; c++ {
				if v := logits[(i*k+c)*hw+px]; v > best {
					best, arg = v, c
				}
			}
			out[i*hw+px] = uint8(arg)
		}
	}
	return out
}

// Split opens the checkpoint's dataset and returns it with the indices of
// its "train" or "val" split, as training used them.
func (p *Predictor) Split(name string) (data.Dataset, []int, error) {
	ds, trainIdx, valIdx, err := openData(p.Config)
	if err != nil {
		return nil, nil, err
	}
	switch name {
	case "val":
		return ds, valIdx, nil
	case "train":
		return ds, trainIdx, nil
	}
	return nil, nil, fmt.Errorf("dataset split %q: want val or train", name)
}

// PredictSplit predicts the samples idx of ds in batches of p.Batch, calls
// fn with each sample's index, predicted classes and target mask, and
// returns the loss and metrics computed as training's validation computes
// them.
func (p *Predictor) PredictSplit(ds data.Dataset, idx []int, fn func(index int, pred, target []uint8) error) (ValRecord, error) {
	h, w := ds.Size()
	c, k := ds.Channels(), p.Config.Model.Classes
	conf := NewConfusion(k)
	var lossSum float64
	for lo := 0; lo < len(idx); lo += p.Batch {
		hi := min(lo+p.Batch, len(idx))
		n := hi - lo
		images := make([]float32, n*c*h*w)
		masks := make([]uint8, n*h*w)
		if err := data.FillBatch(ds, idx[lo:hi], images, masks); err != nil {
			return ValRecord{}, err
		}
		logits, err := p.logits(images, n, h, w)
		if err != nil {
			return ValRecord{}, err
		}
		var ce model.CrossEntropy
		loss, err := ce.Forward(p.env, logits, masks)
		values := logits.Float32()
		logits.Release()
		if err != nil {
			return ValRecord{}, err
		}
		conf.Add(values, masks, n, h, w)
		lossSum += loss * float64(n)
		pred := Argmax(values, n, k, h, w)
		for j := 0; j < n; j++ {
			if err := fn(idx[lo+j], pred[j*h*w:(j+1)*h*w], masks[j*h*w:(j+1)*h*w]); err != nil {
				return ValRecord{}, err
			}
		}
	}
	if len(idx) == 0 {
		return ValRecord{}, fmt.Errorf("the split has no samples")
	}
	return ValRecord{Type: "val", ValLoss: lossSum / float64(len(idx)), ValPixelAcc: conf.PixelAccuracy(),
		ValMIoU: conf.MeanIoU(), ValDice: conf.MeanDice()}, nil
}
