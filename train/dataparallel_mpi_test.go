//go:build mpi

package train

import (
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/dist"
)

// TestDataParallelMatchesOneProcess runs under mpirun -np 2 (.ci/run):
// with GroupNorm (independent of the batch), and with BatchNorm
// synchronised over the ranks (dist.sync_batchnorm), the ranks' averaged
// gradients of batch b each equal one process's of batch 2b made of the
// same samples, within float32 reduction order; after three steps every
// rank holds the same weights; validation's confusion counts summed over
// the ranks' shares are the whole set's, exactly.
func TestDataParallelMatchesOneProcess(t *testing.T) {
	comm, err := dist.Open()
	if err != nil {
		t.Fatal(err)
	}
	if comm.Size() < 2 {
		t.Skip("run with mpirun -np 2")
	}
	defer comm.Close()
	for _, norm := range []string{"group", "sync batch", "sync batch bf16"} {
		t.Run(norm, func(t *testing.T) { checkDataParallel(t, comm, norm) })
	}
}

// checkDataParallel is one case of TestDataParallelMatchesOneProcess. In
// bf16, with every level recomputed, the ranks' activations may round
// differently from one process's, so loss and gradients are held to bf16's
// precision; the weights still agree bit for bit over the ranks.
func checkDataParallel(t *testing.T, comm dist.Comm, norm string) {
	n := comm.Size()
	c := tinyConfig()
	c.Model.Norm, c.Model.Groups = "group", 2
	lossTol, gradTol := 1e-5, 1e-3
	switch norm {
	case "sync batch bf16":
		c.Train.Precision, c.Model.Checkpoint = backend.BFloat16, config.Checkpoint{All: true}
		lossTol, gradTol = 1e-3, 1e-2
		fallthrough
	case "sync batch":
		c.Model.Norm, c.Dist.SyncBatchNorm = "batch", true
	}
	c.Train.BatchSize, c.Train.Steps = 2, 3
	c.Data.Count = 40
	dp, err := NewTrainer(c, Placement{Comm: comm})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	one := c
	one.Train.BatchSize = 2 * n
	ref := testTrainer(t, one)

	grads := func(tr *Trainer) map[string][]float32 {
		out := map[string][]float32{}
		for _, p := range tr.Opt.Params() {
			out[p.Name] = p.ReadGrad()
		}
		return out
	}
	var got, want map[string][]float32
	dp.AfterBackward = func() { got = grads(dp) }
	ref.AfterBackward = func() { want = grads(ref) }
	for step := range 3 {
		dres, err := dp.Step()
		if err != nil {
			t.Fatal(err)
		}
		rres, err := ref.Step()
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(dres.Loss-rres.Loss) > lossTol*(1+math.Abs(rres.Loss)) {
			t.Errorf("rank %d step %d: mean loss %v, one process %v", comm.Rank(), step+1, dres.Loss, rres.Loss)
		}
		worst := 0.0
		for name, w := range want {
			for i := range w {
				d := math.Abs(float64(got[name][i]-w[i])) / (1e-3 + math.Abs(float64(w[i])))
				worst = max(worst, d)
			}
		}
		if worst > gradTol {
			t.Errorf("rank %d step %d: averaged gradients differ from one process's by %.3g (relative)", comm.Rank(), step+1, worst)
		}
		t.Logf("rank %d step %d: loss %.6f vs %.6f, worst gradient difference %.3g", comm.Rank(), step+1, dres.Loss, rres.Loss, worst)
	}
	// Every rank holds rank 0's weights, bit for bit.
	for _, p := range dp.Net.Params() {
		w := p.Read()
		mine := append([]float32(nil), w...)
		if err := comm.Broadcast(w, 0); err != nil {
			t.Fatal(err)
		}
		for i := range w {
			if math.Float32bits(w[i]) != math.Float32bits(mine[i]) {
				// Errorf, not Fatalf: every rank must go on to the same
				// collectives, or the other would wait for ever.
				t.Errorf("rank %d: %s[%d] differs from rank 0's", comm.Rank(), p.Name, i)
				break
			}
		}
	}
	dv, err := dp.Validate()
	if err != nil {
		t.Fatal(err)
	}
	// The one process's validation of the data-parallel weights.
	for _, p := range ref.Net.Params() {
		for _, q := range dp.Net.Params() {
			if q.Name == p.Name {
				p.Write(q.Read())
			}
		}
	}
	ref.Net.SyncWorkingWeights()
	rv, err := ref.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if dv.ValMIoU != rv.ValMIoU || dv.ValPixelAcc != rv.ValPixelAcc || math.Abs(float64(dv.ValLoss-rv.ValLoss)) > 1e-5*(1+float64(rv.ValLoss)) {
		t.Errorf("rank %d: validation %+v over the ranks' shares, %+v in one process", comm.Rank(), dv, rv)
	}
}
