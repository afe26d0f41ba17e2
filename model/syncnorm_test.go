package model

import (
	"sync"
	"testing"
)

// rendezvous sums the vectors of ranks goroutines, each call returning the
// sum to all: an in-process stand-in for an MPI all-reduce.
type rendezvous struct {
	mu      sync.Mutex
	cond    *sync.Cond
	ranks   int
	arrived int
	round   int
	sum     []float64 // the round under way
	done    []float64 // the last finished round
}

func newRendezvous(ranks int) *rendezvous {
	r := &rendezvous{ranks: ranks}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *rendezvous) SyncSum(buf []float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	round := r.round
	if r.arrived == 0 {
		r.sum = make([]float64, len(buf))
	}
	for i, v := range buf {
		r.sum[i] += v
	}
	r.arrived++
	if r.arrived == r.ranks {
		// The finished round's sum stays in done: a fast rank may start
		// the next round (a new sum) before the others wake to read it.
		r.arrived, r.round, r.done = 0, r.round+1, r.sum
		r.cond.Broadcast()
	} else {
		for r.round == round {
			r.cond.Wait()
		}
	}
	copy(buf, r.done)
	return nil
}

// TestSyncBatchNorm: two ranks with half a batch each and synchronised
// batch norm give the whole batch's BatchNorm: outputs, input gradients,
// the running statistics, and weight and bias gradients whose sum over the
// ranks is the whole batch's (the trainer averages gradients over ranks
// after each rank's loss mean, so it is the mean that matches there).
func TestSyncBatchNorm(t *testing.T) {
	rng := gcRNG(t.Name())
	const n, c, h, w = 4, 3, 5, 7
	xv := gcUniform(rng, n*c*h*w, -2, 2)
	dyv := gcUniform(rng, n*c*h*w, -1, 1)
	gamma, beta := gcUniform(rng, c, 0.5, 1.5), gcUniform(rng, c, -0.5, 0.5)
	setup := func() (*Device, *BatchNorm2d) {
		dev := testDevice()
		bn, err := NewBatchNorm2d(dev, "bn", c)
		if err != nil {
			t.Fatal(err)
		}
		bn.Weight.Write(gamma)
		bn.Bias.Write(beta)
		return dev, bn
	}
	type result struct {
		y, dx, dg, db, rm, rv []float32
	}
	run := func(dev *Device, bn *BatchNorm2d, sync func([]float64) error, lo, hi int) result {
		env := &Env{Device: dev, Training: true, SyncSum: sync}
		per := c * h * w
		x := gcTensor(t, dev, hi-lo, c, h, w, xv[lo*per:hi*per])
		y, err := bn.Forward(env, x)
		if err != nil {
			t.Error(err)
			return result{}
		}
		x.Release()
		dy := gcTensor(t, dev, hi-lo, c, h, w, dyv[lo*per:hi*per])
		dx, err := bn.Backward(env, dy)
		if err != nil {
			t.Error(err)
			return result{}
		}
		r := result{y: y.Read(), dx: dx.Read(), dg: bn.Weight.ReadGrad(), db: bn.Bias.ReadGrad(), rm: bn.RunningMean.Read(), rv: bn.RunningVar.Read()}
		y.Release()
		dx.Release()
		return r
	}
	dev, bn := setup()
	want := run(dev, bn, nil, 0, n)

	rv := newRendezvous(2)
	var got [2]result
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			d, b := setup()
			got[r] = run(d, b, rv.SyncSum, r*n/2, (r+1)*n/2)
		})
	}
	wg.Wait()
	gcClose(t, "y", append(got[0].y, got[1].y...), gc64(want.y), 1e-5)
	gcClose(t, "dx", append(got[0].dx, got[1].dx...), gc64(want.dx), 1e-5)
	for r := range 2 {
		gcClose(t, "running_mean", got[r].rm, gc64(want.rm), 1e-6)
		gcClose(t, "running_var", got[r].rv, gc64(want.rv), 1e-5)
	}
	sum := func(a, b []float32) []float32 {
		out := make([]float32, len(a))
		for i := range a {
			out[i] = a[i] + b[i]
		}
		return out
	}
	gcClose(t, "dweight, summed over ranks", sum(got[0].dg, got[1].dg), gc64(want.dg), 1e-5)
	gcClose(t, "dbias, summed over ranks", sum(got[0].db, got[1].db), gc64(want.db), 1e-5)
}
