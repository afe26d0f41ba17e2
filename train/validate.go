package train

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/model"
)

// Validate evaluates the model on the validation samples in eval mode, in
// batches of train.batch_size; a data.patch run validates each image
// whole, by tiles (evaluateTiled).
func (t *Trainer) Validate() (metrics.Validation, error) {
	// Each rank validates its share of the samples; the sums are reduced.
	idx := t.valIdx
	if w := t.comm.Size(); w > 1 {
		r := t.comm.Rank()
		idx = idx[len(idx)*r/w : len(idx)*(r+1)/w]
	}
	t.Preview = nil
	var keep func(images []float32, masks []uint8, logits *model.Tensor)
	if t.PreviewImages > 0 {
		keep = func(images []float32, masks []uint8, logits *model.Tensor) {
			t.Preview = previewFrom(t.Device.Backend, t.PreviewImages, images, masks, logits)
		}
	}
	env := &model.Env{Device: t.Device, Precision: t.env.Precision}
	var sums evalSums
	var err error
	if t.whole != nil { // a data.patch run: whole images, by tiles
		sums, err = t.evaluateTiled(env, idx)
	} else {
		sums, err = evaluate(env, t.Net, t.Loss, t.data, idx, t.Config.Train.BatchSize, t.masks, keep)
	}
	if err != nil {
		return metrics.Validation{}, t.ExplainOOM(err, "validation")
	}
	if err := sums.reduce(t.comm); err != nil {
		return metrics.Validation{}, err
	}
	conf := &metrics.Confusion{Classes: t.Net.Config.Classes, Counts: sums.counts}
	v := conf.Validation(sums.loss / float64(sums.samples))
	v.Classes(t.Config.Data.ClassNames, int(t.Config.Data.Background))
	return v, nil
}

// evalSums are what evaluate adds up: the confusion counts, the loss
// summed over samples, and the samples.
type evalSums struct {
	counts  []int64
	loss    float64
	samples int
}

// reduce sums every rank's into each (counts stay exact below 2^53).
func (s *evalSums) reduce(c dist.Comm) error {
	if c.Size() == 1 {
		return nil
	}
	buf := make([]float64, len(s.counts)+2)
	for i, n := range s.counts {
		buf[i] = float64(n)
	}
	buf[len(s.counts)], buf[len(s.counts)+1] = s.loss, float64(s.samples)
	if err := c.AllReduceSum64(buf); err != nil {
		return err
	}
	for i := range s.counts {
		s.counts[i] = int64(buf[i])
	}
	s.loss, s.samples = buf[len(s.counts)], int(buf[len(s.counts)+1])
	return nil
}

// evaluate runs the model in eval mode over idx in batches of batch and
// returns loss and metrics. Targets go into masks (a Uint8 view of at least
// batch*H*W values on the model's device: the training batch's), so
// validation allocates nothing but each batch's images and what the layers
// allocate.
//
// Each batch is a pool phase of its own (PhaseValidation; the last one,
// when smaller, PhaseValidationTail): it frees what it allocates, so an
// arena's plan holds one batch, whatever the number of samples. On a
// virtual pool (a plan) the full batches after one that left the pool as
// it found it (no segment or page taken or given back: the same free
// blocks) would repeat it allocation for allocation, so they are counted
// (Pool.CountRepeats), not run: planning costs the same at any number of
// validation samples, and its statistics are still a run's to the byte.
//
// keep, if set, sees the first batch's host images and masks and its
// logits (nothing on a virtual pool).
func evaluate(env *model.Env, net *model.UNet, lossCfg model.LossConfig, ds data.Dataset, idx []int, batch int, masks backend.View,
	keep func(images []float32, masks []uint8, logits *model.Tensor)) (evalSums, error) {
	H, W := ds.Size()
	K := net.Config.Classes
	counts := make([]int64, K*K)
	var lossSum float64
	var hostImages []float32
	var hostMasks []uint8
	if !env.Pool.Virtual() {
		hostImages, hostMasks = make([]float32, batch*ds.Channels()*H*W), make([]uint8, batch*H*W)
	}
	full := len(idx) / batch * batch // the samples in full batches
	for lo := 0; lo < len(idx); lo += batch {
		hi := min(lo+batch, len(idx))
		n := hi - lo
		phase := PhaseValidation
		if n < batch {
			phase = PhaseValidationTail
		}
		before := env.Pool.Stats()
		if lo > 0 {
			keep = nil
		}
		loss, err := evaluateBatch(env, net, lossCfg, ds, idx[lo:hi], masks.Slice(0, n*H*W), phase, counts, hostImages, hostMasks, keep)
		if err != nil {
			return evalSums{}, err
		}
		lossSum += loss * float64(n)
		if after := env.Pool.Stats(); env.Pool.Virtual() && n == batch && sameBlocks(before, after) && lo+batch < full {
			env.Pool.CountRepeats(before, after, int64((full-lo)/batch-1))
			lo = full - batch // on to the tail
		}
	}
	// The counts came back from the device: an error it reported (a GPU
	// fault) leaves them unreliable.
	if err := env.Backend.Sync(); err != nil {
		return evalSums{}, err
	}
	return evalSums{counts: counts, loss: lossSum, samples: len(idx)}, nil
}

// PhaseValidationTail is the pool phase of validation's last batch where
// it is smaller than the others (see evaluate).
const PhaseValidationTail = "validation tail"

// evaluateBatch runs the samples idx as one batch in the pool phase named,
// adds their confusion counts to counts and returns their mean loss.
// target is the batch's masks on the device; hostImages and hostMasks are
// staging for a batch (nil on a virtual pool); keep, if set, sees them and
// the logits.
func evaluateBatch(env *model.Env, net *model.UNet, lossCfg model.LossConfig, ds data.Dataset, idx []int, target backend.View,
	phase string, counts []int64, hostImages []float32, hostMasks []uint8, keep func(images []float32, masks []uint8, logits *model.Tensor)) (float64, error) {
	env.Pool.BeginPhase(phase)
	defer env.Pool.EndPhase()
	H, W := ds.Size()
	n := len(idx)
	images, err := newInput(env.Device, net.Config.Arch, ds, n)
	if err != nil {
		return 0, err
	}
	if !env.Pool.Virtual() { // a planned validation has no memory to fill
		if err = data.FillBatch(ds, idx, hostImages[:images.Len()], hostMasks[:n*H*W]); err == nil {
			images.Write(hostImages[:images.Len()])
			env.Backend.Upload(target, hostMasks[:n*H*W])
		}
	}
	var logits *model.Tensor
	if err == nil {
		logits, err = net.Forward(env, images)
	}
	images.Release()
	if err != nil {
		return 0, err
	}
	if keep != nil && hostImages != nil {
		keep(hostImages[:n*ds.Channels()*H*W], hostMasks[:n*H*W], logits)
	}
	l := model.Loss{Config: lossCfg}
	loss, err := l.Forward(env, logits, target)
	if err == nil {
		env.Backend.Confusion(backend.Shape4{N: n, C: net.Config.Classes, H: H, W: W}, counts, logits.View(), target)
	}
	logits.Release()
	return loss, err
}

// sameBlocks reports that nothing but buffers changed in a pool between
// two of its statistics: no segment or page taken or given back, so once
// every buffer allocated between them is freed its free blocks are as
// they were (freed neighbours merge).
func sameBlocks(a, b memory.Stats) bool {
	return a.SegmentAllocs == b.SegmentAllocs && a.PagesMapped == b.PagesMapped && a.PagesUnmapped == b.PagesUnmapped &&
		a.CacheFlushes == b.CacheFlushes && a.Reserved.Current == b.Reserved.Current
}
