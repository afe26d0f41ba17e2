package predict

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/model"
	"github.com/schollz/progressbar/v3"
)

// Predictor is a checkpoint's model in eval mode, on a device of its own
// (its own accounted pool).
type Predictor struct {
	Checkpoint *checkpoint.Checkpoint
	// Config is the checkpoint's configuration: architecture, data and
	// preprocessing.
	Config config.Config
	Device *model.Device
	Net    *model.UNet
	// Batch is the number of images per forward pass.
	Batch int
	// Note, where set, gets what the user should know as it happens: a
	// dataset's summary when it is read.
	Note io.Writer
	// Warn, where set, gets the warnings (an input file skipped for its
	// name); else Run's note does.
	Warn io.Writer
	// Stop, where set, ends a prediction once it is done: Run stops
	// between batches, slices and tiles, removes what it wrote and
	// returns an error wrapping context.Cause(Stop).
	Stop context.Context
	// Flags, where set, are the command's flags but --out and --force
	// (config.GivenFlags): a refused --out then offers the same predict
	// with --force, or into a fresh folder, as commands to paste.
	Flags []string
	// Progress, where set, is where a long loop (the tiles of an image,
	// the slices of a volume, the files of a folder, the samples of a
	// split) draws a bar with its ETA, cleared when it ends; nil: none
	// (rundir.BarWriter says where a command draws one).
	Progress io.Writer
	bar      *progressbar.ProgressBar // the bar drawn now (track)
	// depth is a 3D UNet's dataset samples' slices, stacked in their
	// height (data.Volumes), once Split has opened the dataset; 0 else.
	depth int
	// dataChanged says the checkpoint's data keys were overridden (eval
	// --set data.*): its run's split.json does not apply.
	dataChanged bool
	env         *model.Env
	precision   backend.DType
	held        *heldGC // the collector held to Run's plans (nil outside Run)
	// members are an ensemble's other models, in p's pool (ensemble.go).
	members []*Predictor
}

// NewPredictor builds the checkpoint's model with precision (fp32, fp16 or
// bf16: the storage of activations and weight copies, as in training)
// in a pool of the given capacity (0: unlimited), and loads its weights.
func NewPredictor(ck *checkpoint.Checkpoint, prec backend.DType, capacity int64, batch int) (*Predictor, error) {
	b, err := device.Open(ck.Config.Device)
	if err != nil {
		return nil, err
	}
	// On a GPU, the convolutions as the run's cuda.* keys ask (TF32, the
	// provider: cuDNN where it loads), as training resolves them.
	if s, ok := b.(device.TF32Setter); ok {
		s.SetTF32(ck.Config.CUDA.TF32)
	}
	if err := device.ResolveConv(b, ck.Config.CUDA.Conv, ck.Config.ConvPolicy()); err != nil {
		return nil, err
	}
	p, err := newPredictor(ck.Config, b, prec, capacity, batch)
	if err != nil {
		return nil, err
	}
	p.Checkpoint = ck
	if err := ck.LoadWeights(p.Net); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// newPredictor builds cfg's model on b, without weights.
func newPredictor(cfg config.Config, b backend.Backend, prec backend.DType, capacity int64, batch int) (*Predictor, error) {
	if batch < 1 {
		return nil, fmt.Errorf("batch size %d: must be at least 1", batch)
	}
	p := &Predictor{Config: cfg, Batch: batch, precision: prec}
	p.Device = model.NewDevice(b, memory.Options{Capacity: capacity})
	p.env = &model.Env{Device: p.Device, Precision: prec}
	var err error
	if p.Net, err = model.New(p.Device, cfg.ModelConfig(), cfg.Model.Seed); err != nil {
		return nil, weightsOOM(err)
	}
	if err := p.Net.SetPrecision(prec); err != nil {
		p.Close()
		return nil, weightsOOM(err)
	}
	return p, nil
}

// weightsOOM words a pool too small for the model's weights as the
// capacity that set it.
func weightsOOM(err error) error {
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) || oom.Cause != nil {
		return err
	}
	return fmt.Errorf("predict: a pool of %s (--capacity, else the checkpoint's memory.capacity) cannot hold the model's weights; raise --capacity",
		memory.FormatBytes(oom.Capacity))
}

// stopped is the error that ends a prediction whose Stop is done; nil
// while it goes on.
func (p *Predictor) stopped() error {
	if p.Stop == nil {
		return nil
	}
	return context.Cause(p.Stop) // nil while it is not done
}

// Pool is the device's pool.
func (p *Predictor) Pool() *memory.Pool { return p.Device.Pool }

// Close returns the model (an ensemble's models) to the pool.
func (p *Predictor) Close() {
	for _, m := range p.members {
		m.Close()
	}
	p.members = nil
	if p.Net != nil {
		p.Net.Free()
		p.Net = nil
	}
}

// logits runs n images (N,C,H,W normalized, planar; a split's volumes
// (N,C,D*H,W)) through the model.
// images is nil only in a dry run (PlanBatch), which uploads nothing.
func (p *Predictor) logits(images []float32, n, h, w int) (*model.Tensor, error) {
	d := 0
	if p.Config.Model.Volumes() && p.depth > 0 { // n volumes of d slices stacked in h
		d, h = p.depth, h/p.depth
	}
	x, err := model.NewVolume(p.Device, memory.Activations, backend.Float32, n, p.Config.Model.InChannels, d, h, w)
	if err != nil {
		return nil, err
	}
	defer x.Release()
	if images != nil {
		x.Write(images)
	}
	return p.Net.Forward(p.env, x)
}

// classes is the argmax of logits (N,K,H,W), computed on the device into a
// buffer of N*H*W bytes and downloaded.
func (p *Predictor) classes(logits *model.Tensor) ([]uint8, error) {
	var out []uint8
	err := p.argmax(logits, func(v backend.View) { out = backend.DownloadBytes(p.Device.Backend, v) })
	return out, err
}

// argmax computes logits' classes into a pool buffer and hands it to use
// (nil in a dry run: a plan downloads nothing, so no host buffer of the
// image's size exists before the image is known to fit).
func (p *Predictor) argmax(logits *model.Tensor, use func(backend.View)) error {
	s := logits.Shape() // a volume's (N,K,D*H,W)
	buf, err := p.Pool().Alloc(memory.Activations, int64(s[0]*s[2]*s[3]))
	if err != nil {
		return err
	}
	defer p.Pool().MustFree(buf)
	out := backend.Whole(buf, backend.Uint8)
	p.Device.Backend.Argmax(backend.Shape4{N: s[0], C: s[1], H: s[2], W: s[3]}, out, logits.View())
	if use != nil {
		use(out)
	}
	return p.Device.Backend.Sync() // a device error: no mask from garbage
}

// Predict returns the class of every pixel (N,H,W) of n normalized images
// (N,C,H,W planar): the argmax of the logits, the lowest class on a tie;
// an ensemble's, of its mean probabilities.
func (p *Predictor) Predict(images []float32, n, h, w int) ([]uint8, error) {
	if want := n * p.Config.Model.InChannels * h * w; len(images) != want {
		return nil, fmt.Errorf("predict: %d values for %d images of %dx%dx%d", len(images), n, p.Config.Model.InChannels, h, w)
	}
	if len(p.members) > 0 {
		probs, err := p.Probabilities(images, n, h, w, false)
		if err != nil {
			return nil, err
		}
		return Argmax(probs, n, p.Config.Model.Classes, h, w), nil
	}
	if err := p.Net.CheckInput(p.Config.Model.InChannels, h, w); err != nil {
		return nil, err
	}
	logits, err := p.logits(images, n, h, w)
	if err != nil {
		return nil, err
	}
	defer logits.Release()
	return p.classes(logits)
}

// Split opens the checkpoint's dataset and returns it with the indices of
// its "train", "val" or "test" split, as training made them (test: a
// folder set's test/ subfolder).
func (p *Predictor) Split(name string) (data.Dataset, []int, error) {
	ctx := p.Stop
	if ctx == nil {
		ctx = context.Background()
	}
	set, fresh, err := data.OpenCachedContext(ctx, p.Config.DataConfig()) // a signal stops the scan
	if err != nil {
		return nil, nil, err
	}
	if fresh && p.Config.Data.Source != data.SourceSynthetic && p.Note != nil {
		fmt.Fprintln(p.Note, set.Report.Recap(p.Config.Invocation.Command("data check"))) // training gave the mask_values hint
	}
	if p.Config.Model.Volumes() {
		p.depth = data.DepthOf(set.Data)
	}
	switch name {
	case "val":
		return set.Data, set.Val, nil
	case "train":
		return set.Data, set.Train, nil
	case "test":
		if len(set.Test) == 0 {
			return nil, nil, fmt.Errorf("the dataset has no test split: a folder set's test samples are in data.path/test/images and test/masks")
		}
		return set.Data, set.Test, nil
	}
	return nil, nil, fmt.Errorf("dataset split %q: want train, val or test", name)
}

// PredictSplit predicts the samples idx of ds in batches of p.Batch, calls
// fn with each sample's index, predicted classes and target mask, and
// returns the loss and metrics computed as training's validation computes
// them.
func (p *Predictor) PredictSplit(ds data.Dataset, idx []int, fn func(index int, pred, target []uint8) error) (metrics.Validation, error) {
	h, w := ds.Size()
	c, k := ds.Channels(), p.Config.Model.Classes
	conf := metrics.NewConfusion(k)
	var lossSum float64
	at, done := p.track(len(idx), "samples")
	defer done()
	for lo := 0; lo < len(idx); lo += p.Batch {
		at(lo)
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
		loss, pred, err := p.scoreBatch(images, masks, n, h, w, conf)
		if err != nil {
			return metrics.Validation{}, err
		}
		lossSum += loss * float64(n)
		for j := 0; j < n; j++ {
			if err := fn(idx[lo+j], pred[j*h*w:(j+1)*h*w], masks[j*h*w:(j+1)*h*w]); err != nil {
				return metrics.Validation{}, err
			}
		}
	}
	if len(idx) == 0 {
		return metrics.Validation{}, fmt.Errorf("the split has no samples")
	}
	return p.validation(conf, lossSum/float64(len(idx))), nil
}

// scoreBatch predicts n images, adds them to conf against masks (uploaded
// to the device for the loss and the counts) and returns the batch's loss
// and the predicted classes.
func (p *Predictor) scoreBatch(images []float32, masks []uint8, n, h, w int, conf *metrics.Confusion) (float64, []uint8, error) {
	logits, err := p.logits(images, n, h, w)
	if err != nil {
		return 0, nil, err
	}
	defer logits.Release()
	buf, err := p.Pool().Alloc(memory.Activations, int64(len(masks)))
	if err != nil {
		return 0, nil, err
	}
	defer p.Pool().MustFree(buf)
	target := backend.Whole(buf, backend.Uint8)
	p.Device.Backend.Upload(target, masks)
	var ce model.CrossEntropy
	loss, err := ce.Forward(p.env, logits, target)
	if err != nil {
		return 0, nil, err
	}
	p.Device.Backend.Confusion(backend.Shape4{N: n, C: conf.Classes, H: h, W: w}, conf.Counts, logits.View(), target)
	pred, err := p.classes(logits)
	return loss, pred, err
}

// validation is conf's scores with loss, each class named by
// data.class_names.
func (p *Predictor) validation(conf *metrics.Confusion, loss float64) metrics.Validation {
	v := conf.Validation(loss)
	v.Classes(p.Config.Data.ClassNames, int(p.Config.Data.Background))
	return v
}
