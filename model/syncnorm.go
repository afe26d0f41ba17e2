package model

import (
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// Synchronised batch norm (Env.SyncSum): PyTorch's SyncBatchNorm, built
// from the backend's batch-norm operations and a host sum over the ranks.
// Forward: each rank's statistics, summed as (n*mean, n*(var+mean^2), n),
// give the whole batch's; the input is normalized with them (BatchNorm with
// reuse) and the running statistics move towards them on the host.
// Backward: the local gradient (BatchNormBack) is corrected by the
// difference between the whole batch's and this rank's sums of dout and
// dout*xhat, an affine function of x per channel (BatchNormEval with
// crafted parameters, then Add). Weight and bias gradients stay local sums:
// the trainer averages them over the ranks like every gradient.

// hostFloats downloads a Float32 view.
func hostFloats(env *Env, v backend.View) []float32 { return backend.DownloadFloat32(env.Backend, v) }

// syncForward normalizes x into y with the statistics of the whole batch
// over every rank, written into stats (mean[C], invstd[C]); with update the
// running statistics move towards them.
func (l *BatchNorm2d) syncForward(env *Env, a backend.NormArgs, y, x, stats backend.View, update bool) error {
	env.Backend.BatchNorm(a, y, x, stats, false, false) // this rank's statistics
	local := hostFloats(env, stats)
	C, n := l.C, float64(a.N*a.H*a.W)
	sums := make([]float64, 3*C)
	for c := range C {
		mean, invstd := float64(local[c]), float64(local[C+c])
		variance := 1/(invstd*invstd) - l.Eps
		sums[c], sums[C+c], sums[2*C+c] = n*mean, n*(variance+mean*mean), n
	}
	if err := env.SyncSum(sums); err != nil {
		return err
	}
	global := make([]float32, 2*C)
	variances := make([]float64, C)
	for c := range C {
		total := sums[2*C+c]
		mean := sums[c] / total
		variances[c] = max(sums[C+c]/total-mean*mean, 0)
		global[c], global[C+c] = float32(mean), float32(1/math.Sqrt(variances[c]+l.Eps))
	}
	backend.UploadFloat32(env.Backend, stats, global)
	env.Backend.BatchNorm(a, y, x, stats, true, false)
	if update {
		rm, rv := l.RunningMean.Read(), l.RunningVar.Read()
		m := l.Momentum
		for c := range C {
			total := sums[2*C+c]
			unbiased := variances[c] * total / max(total-1, 1)
			rm[c] = float32((1-m)*float64(rm[c]) + m*float64(global[c]))
			rv[c] = float32((1-m)*float64(rv[c]) + m*unbiased)
		}
		l.RunningMean.Write(rm)
		l.RunningVar.Write(rv)
	}
	return nil
}

// syncBackward writes into dx the gradient of the whole batch's
// normalization and adds this rank's weight and bias gradients.
func (l *BatchNorm2d) syncBackward(env *Env, a backend.NormArgs, dx, dy, x backend.View) error {
	C := l.C
	views := make([]backend.View, 0, 6)
	defer func() {
		for _, v := range views {
			env.Pool.MustFree(v.Buf)
		}
	}()
	small := func() (backend.View, error) {
		v, err := allocView(env.Device, memory.Workspace, backend.Float32, C)
		if err == nil {
			views = append(views, v)
		}
		return v, err
	}
	dg, err := small()
	if err != nil {
		return err
	}
	db, err := small()
	if err != nil {
		return err
	}
	env.Backend.Fill(dg, 0)
	env.Backend.Fill(db, 0)
	env.Backend.BatchNormBack(a, dx, dg, db, dy, x, l.stats) // dx with this rank's sums
	env.Backend.Add(l.Weight.GradView(), l.Weight.GradView(), dg)
	env.Backend.Add(l.Bias.GradView(), l.Bias.GradView(), db)
	sumDYX, sumDY := hostFloats(env, dg), hostFloats(env, db)
	n := float64(a.N * a.H * a.W)
	sums := make([]float64, 3*C)
	for c := range C {
		sums[c], sums[C+c], sums[2*C+c] = float64(sumDY[c]), float64(sumDYX[c]), n
	}
	local := append([]float64(nil), sums...)
	if err := env.SyncSum(sums); err != nil {
		return err
	}
	// dx_all - dx_local = g*invstd*(da + db*xhat), xhat = (x-mean)*invstd,
	// with da, db the local minus the whole batch's means of dout and
	// dout*xhat: per channel B*x + A.
	st, gamma := hostFloats(env, l.stats), l.Weight.Read()
	A, B := make([]float32, C), make([]float32, C)
	for c := range C {
		mean, invstd, g := float64(st[c]), float64(st[C+c]), float64(gamma[c])
		da := local[c]/n - sums[c]/sums[2*C+c]
		dbx := local[C+c]/n - sums[C+c]/sums[2*C+c]
		B[c] = float32(g * invstd * invstd * dbx)
		A[c] = float32(g * invstd * (da - dbx*mean*invstd))
	}
	zero, one := make([]float32, C), make([]float32, C)
	for c := range one {
		one[c] = float32(1 - l.Eps) // BatchNormEval divides by sqrt(var + eps): 1
	}
	eval := backend.NormArgs{Shape4: a.Shape4, Eps: l.Eps}
	for _, p := range []struct {
		dst  *backend.View
		vals []float32
	}{{&eval.Gamma, B}, {&eval.Beta, A}, {&eval.RunningMean, zero}, {&eval.RunningVar, one}} {
		v, err := small()
		if err != nil {
			return err
		}
		backend.UploadFloat32(env.Backend, v, p.vals)
		*p.dst = v
	}
	corr, err := allocView(env.Device, memory.Workspace, backend.Float32, dx.Len)
	if err != nil {
		return err
	}
	views = append(views, corr)
	env.Backend.BatchNormEval(eval, corr, x)
	env.Backend.Add(dx, dx, corr)
	return nil
}
