package model

import (
	"sync"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
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
// after each rank's loss mean, so it is the mean that matches there). In
// fp16 and bf16 too, within their rounding.
func TestSyncBatchNorm(t *testing.T) {
	for _, tc := range []struct {
		dt        backend.DType
		tol, grad float64
	}{{backend.Float32, 1e-5, 1e-5}, {backend.Float16, 2e-3, 1e-4}, {backend.BFloat16, 1.6e-2, 1e-4}} {
		t.Run(tc.dt.String(), func(t *testing.T) { checkSyncBatchNorm(t, tc.dt, tc.tol, tc.grad) })
	}
}

func checkSyncBatchNorm(t *testing.T, dt backend.DType, tol, gradTol float64) {
	rng := gcRNG("TestSyncBatchNorm")
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
	// tensor is vals as an (m,c,h,w) tensor of type dt.
	tensor := func(dev *Device, m int, vals []float32) *Tensor {
		x := gcTensor(t, dev, m, c, h, w, vals)
		if dt == backend.Float32 {
			return x
		}
		defer x.Release()
		y, err := NewTensor(dev, memory.Activations, dt, m, c, h, w)
		if err != nil {
			t.Fatal(err)
		}
		dev.Backend.Convert(y.View(), x.View())
		return y
	}
	type result struct {
		y, dx, dg, db, rm, rv []float32
	}
	run := func(dev *Device, bn *BatchNorm2d, sync func([]float64) error, lo, hi int) result {
		env := &Env{Device: dev, Training: true, Precision: dt, SyncSum: sync}
		per := c * h * w
		x := tensor(dev, hi-lo, xv[lo*per:hi*per])
		y, err := bn.Forward(env, x)
		if err != nil {
			t.Error(err)
			return result{}
		}
		x.Release()
		dy := tensor(dev, hi-lo, dyv[lo*per:hi*per])
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
	gcClose(t, "y", append(got[0].y, got[1].y...), gc64(want.y), tol)
	gcClose(t, "dx", append(got[0].dx, got[1].dx...), gc64(want.dx), tol)
	for r := range 2 {
		gcClose(t, "running_mean", got[r].rm, gc64(want.rm), tol/10)
		gcClose(t, "running_var", got[r].rv, gc64(want.rv), tol)
	}
	sum := func(a, b []float32) []float32 {
		out := make([]float32, len(a))
		for i := range a {
			out[i] = a[i] + b[i]
		}
		return out
	}
	gcClose(t, "dweight, summed over ranks", sum(got[0].dg, got[1].dg), gc64(want.dg), gradTol)
	gcClose(t, "dbias, summed over ranks", sum(got[0].db, got[1].db), gc64(want.db), gradTol)
}
