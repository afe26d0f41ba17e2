//go:build cudaemu

package emu_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda/emu"
)

// TestReductionsSameBitsAtAnyGrid: the norms' statistics and gradients,
// a bias gradient and the losses' sums (cross-entropy, LossSums), summed over several chunks of every channel or
// group by many blocks, are the same bits whether one block sums every
// chunk or 3, 7 or 1024 blocks share them, with other block orders, in
// fp32 and in bf16. One pair of neighbours in 16 is +A and -A, A about
// 2^40: they cancel, but what each absorbed of the small values summed
// with it (float64 at 2^40 keeps 2^-12) stays, so that sums in another
// order, or cut into other chunks, give other bits.
func TestReductionsSameBitsAtAnyGrid(t *testing.T) {
	type result [][]byte
	run := func(grid int, dt backend.DType) result {
		gpu, err := emu.Backend(1 << 30)
		if err != nil {
			t.Fatal(err)
		}
		gpu.SetReduceGrid(grid)
		e := newConvEnv(gpu)
		rng := rand.New(rand.NewPCG(3, uint64(dt)))
		random := func(n int, scale float64) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32((rng.Float64()*2 - 1) * scale)
			}
			for i := 0; i+1 < n; i += 2 {
				if rng.IntN(16) == 0 {
					x[i] = float32((1 + rng.Float64()) * 0x1p40)
					x[i+1] = -x[i]
				}
			}
			return x
		}
		var out result
		keep := func(vs ...backend.View) {
			for _, v := range vs {
				out = append(out, backend.DownloadBytes(gpu, v))
			}
		}
		// Batch norm: 3 channels of 4 x 64 x 64 values, 4 chunks each.
		sh := backend.Shape4{N: 4, C: 3, H: 64, W: 64}
		a := backend.NormArgs{Shape4: sh, Eps: 1e-5, Momentum: 0.1,
			Gamma: e.view(t, backend.Float32, random(sh.C, 1)), Beta: e.view(t, backend.Float32, random(sh.C, 1)),
			RunningMean: e.view(t, backend.Float32, random(sh.C, 1)), RunningVar: e.view(t, backend.Float32, random(sh.C, 1))}
		in, dout := e.view(t, dt, random(sh.Len(), 3)), e.view(t, dt, random(sh.Len(), 1))
		stats, y := e.view(t, backend.Float32, make([]float32, a.StatsLen(false))), e.view(t, dt, make([]float32, sh.Len()))
		gpu.BatchNorm(a, y, in, stats, false, true)
		dgamma, dbeta := e.view(t, backend.Float32, random(sh.C, 1)), e.view(t, backend.Float32, random(sh.C, 1))
		din := e.view(t, dt, make([]float32, sh.Len()))
		gpu.BatchNormBack(a, din, dgamma, dbeta, dout, in, stats)
		keep(y, stats, a.RunningMean, a.RunningVar, din, dgamma, dbeta)
		// Group norm: 2 groups of 4 channels, 4 chunks each.
		gs := backend.Shape4{N: 2, C: 8, H: 64, W: 64}
		g := backend.NormArgs{Shape4: gs, Groups: 2, Eps: 1e-5,
			Gamma: e.view(t, backend.Float32, random(gs.C, 1)), Beta: e.view(t, backend.Float32, random(gs.C, 1))}
		in, dout = e.view(t, dt, random(gs.Len(), 3)), e.view(t, dt, random(gs.Len(), 1))
		stats, y = e.view(t, backend.Float32, make([]float32, g.StatsLen(true))), e.view(t, dt, make([]float32, gs.Len()))
		gpu.GroupNorm(g, y, in, stats, false)
		dgamma, dbeta = e.view(t, backend.Float32, random(gs.C, 1)), e.view(t, backend.Float32, random(gs.C, 1))
		din = e.view(t, dt, make([]float32, gs.Len()))
		gpu.GroupNormBack(g, din, dgamma, dbeta, dout, in, stats)
		keep(y, stats, din, dgamma, dbeta)
		// A bias gradient over 2 x 96 x 96 pixels (3 chunks).
		cs := backend.ConvShape{N: 2, C: 1, H: 96, W: 96, OC: 2, K: 1, DT: dt}
		dbias := e.view(t, backend.Float32, random(cs.OC, 1))
		gpu.ConvBack(cs, backend.View{}, backend.View{}, dbias, e.view(t, dt, random(cs.OutSize(), 1)),
			e.view(t, dt, random(cs.InSize(), 1)), e.view(t, dt, random(cs.WeightSize(), 1)),
			e.view(t, backend.Float32, make([]float32, gpu.ConvWorkspace(cs))))
		keep(dbias)
		// The losses: cross-entropy and the four sums of each of 5 classes
		// over 2 x 80 x 80 pixels (2 chunks), some ignored.
		ls := backend.Shape4{N: 2, C: 5, H: 80, W: 80}
		logits := e.view(t, dt, random(ls.Len(), 4))
		classes := make([]byte, ls.N*ls.H*ls.W)
		for i := range classes {
			classes[i] = byte(rng.IntN(ls.C))
			if i%7 == 0 {
				classes[i] = backend.IgnoreIndex
			}
		}
		target := e.bytes(t, classes)
		ce, count, err := gpu.CrossEntropy(ls, logits, target)
		sums := make([]float64, 4*ls.C)
		if err == nil {
			err = gpu.LossSums(ls, logits, target, 2, sums)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, float64Bytes(append([]float64{ce, float64(count)}, sums...)))
		if err := gpu.Sync(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	names := []string{"bn out", "bn stats", "running mean", "running var", "bn din", "bn dgamma", "bn dbeta",
		"gn out", "gn stats", "gn din", "gn dgamma", "gn dbeta", "dbias", "loss sums"}
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		want := run(1, dt)
		for _, grid := range []int{3, 7, 1024} {
			got := run(grid, dt)
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("%s, %d blocks: %s differs from one block's", dt, grid, names[i])
				}
			}
		}
		if !t.Failed() {
			t.Logf("%s: %d results the same bits at 1, 3, 7 and 1024 blocks", dt, len(want))
		}
	}
}

// float64Bytes is vs's bytes.
func float64Bytes(vs []float64) []byte {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}
