package train

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/model"
	"math"
)

// bucketBytes bounds one gradient all-reduce (config key dist.bucket_mb;
// 0: everything in one call): Open MPI allocates a temporary of a whole
// message per call, so 124 MB in one call took 16x longer than in 8 MB
// buckets on a 2-core machine (issue 18's measurement).
func (t *Trainer) bucketBytes() int {
	if mb := t.Config.Dist.BucketMB; mb > 0 {
		return mb << 20
	}
	return math.MaxInt
}

// Comm is the trainer's communicator (dist.Single unless it was built with
// NewTrainer with a Placement's Comm).
func (t *Trainer) Comm() dist.Comm { return t.comm }

// syncFromRankZero copies rank 0's parameters to every rank: all of them
// (trainable and BatchNorm's running statistics) the first time, then the
// buffers before every step, as PyTorch's DistributedDataParallel does
// (broadcast_buffers): per-rank batch statistics, rank 0's running ones.
func (t *Trainer) syncFromRankZero() error {
	if t.comm.Size() == 1 {
		return nil
	}
	var params []*model.Param
	for _, p := range t.Net.Params() {
		if !t.synced || !p.Trainable {
			params = append(params, p)
		}
	}
	if err := t.bucketed(params, (*model.Param).View, func(buf []float32) error { return t.comm.Broadcast(buf, 0) }); err != nil {
		return err
	}
	if !t.synced {
		t.Net.SyncWorkingWeights()
	}
	t.synced = true
	return nil
}

// allReduceGradients replaces every rank's gradients of the optimizer's
// parameters by their mean over the ranks, in buckets of at most
// BucketBytes, once per optimizer step (after accumulation).
func (t *Trainer) allReduceGradients() error {
	if t.comm.Size() == 1 {
		return nil
	}
	inv := 1 / float32(t.comm.Size())
	return t.bucketed(t.Opt.Params(), (*model.Param).GradView, func(buf []float32) error {
		if err := t.comm.AllReduceSum(buf); err != nil {
			return err
		}
		for i := range buf {
			buf[i] *= inv
		}
		return nil
	})
}

// bucketed downloads the views of params into host buckets of at most
// BucketBytes, runs f on each bucket and uploads the result back.
func (t *Trainer) bucketed(params []*model.Param, view func(*model.Param) backend.View, f func([]float32) error) error {
	b := t.Device.Backend
	for len(params) > 0 {
		n, size := 0, 0
		for n < len(params) && (n == 0 || 4*(size+params[n].Len()) <= t.bucketBytes()) {
			size += params[n].Len()
			n++
		}
		if cap(t.bucket) < size {
			t.bucket = make([]float32, size)
		}
		buf := t.bucket[:size]
		off := 0
		for _, p := range params[:n] {
			backend.DownloadFloat32Into(b, buf[off:off+p.Len()], view(p))
			off += p.Len()
		}
		if err := f(buf); err != nil {
			return err
		}
		off = 0
		for _, p := range params[:n] {
			backend.UploadFloat32(b, view(p), buf[off:off+p.Len()])
			off += p.Len()
		}
		params = params[n:]
	}
	return nil
}
