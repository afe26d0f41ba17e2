package cpu

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// Adam updates one parameter, in parallel over chunks of a large one: each
// element is independent, so the split does not change a bit.
func (c CPU) Adam(a backend.AdamStep, w, g, m, v backend.View) {
	ws, gs, ms, vs := f32(w), f32(g), f32(m), f32(v)
	if len(gs) != len(ws) || len(ms) != len(ws) || len(vs) != len(ws) {
		panic(fmt.Sprintf("backend/cpu: adam on %v, %v, %v, %v", w, g, m, v))
	}
	noEntry(a.Entry)
	c.team.For(len(ws), 1<<15, func(lo, hi int) {
		kernels.Adam(a, ws[lo:hi], gs[lo:hi], ms[lo:hi], vs[lo:hi])
	})
}

// UnscaleCheck multiplies every g of gs by inv and reports whether all of
// them is finite, in parallel over chunks of a large g.
func (c CPU) UnscaleCheck(gs []backend.View, inv float32) bool {
	finite := true
	for _, g := range gs {
		finite = c.unscaleCheck(g, inv) && finite
	}
	return finite
}

func (c CPU) unscaleCheck(g backend.View, inv float32) bool {
	xs := f32(g)
	var bad atomic.Bool
	c.team.For(len(xs), 1<<15, func(lo, hi int) {
		chunk := xs[lo:hi]
		if inv != 1 { // only the check where the scale is 1: nothing to write
			for i := range chunk {
				chunk[i] *= inv
			}
		}
		if !allFinite(chunk) {
			bad.Store(true)
		}
	})
	return !bad.Load()
}

// allFinite reports whether every value of xs is finite: v-v is +0 for a
// finite v and NaN for ±Inf and NaN, and sums of +0 stay +0 while a NaN
// stays NaN. Eight sums apart keep the adds from waiting on each other
// (a branch per value, as before, ran at a quarter of the speed).
func allFinite(xs []float32) bool {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(xs); i += 8 {
		x := xs[i : i+8 : i+8]
		s0 += x[0] - x[0]
		s1 += x[1] - x[1]
		s2 += x[2] - x[2]
		s3 += x[3] - x[3]
		s4 += x[4] - x[4]
		s5 += x[5] - x[5]
		s6 += x[6] - x[6]
		s7 += x[7] - x[7]
	}
	for ; i < len(xs); i++ {
		s0 += xs[i] - xs[i]
	}
	return (s0+s1)+(s2+s3)+(s4+s5)+(s6+s7) == 0
}

// SGD updates one parameter serially.
func (CPU) SGD(a backend.SGDStep, w, g, buf backend.View) {
	ws, gs, bs := f32(w), f32(g), f32(buf)
	if len(gs) != len(ws) || (a.Momentum != 0 && len(bs) != len(ws)) {
		panic(fmt.Sprintf("backend/cpu: sgd on %v, %v, %v", w, g, buf))
	}
	noEntry(a.Entry)
	for j := range ws {
		d := gs[j]
		if a.WeightDecay != 0 {
			d += a.WeightDecay * ws[j]
		}
		if a.Momentum != 0 {
			if a.First {
				bs[j] = d
			} else {
				bs[j] = a.Momentum*bs[j] + (1-a.Dampening)*d
			}
			if a.Nesterov {
				d += a.Momentum * bs[j]
			} else {
				d = bs[j]
			}
		}
		ws[j] -= a.LR * d
	}
}

// RMSprop updates one parameter serially.
func (CPU) RMSprop(a backend.RMSpropStep, w, g, sq, buf backend.View) {
	ws, gs, ss, bs := f32(w), f32(g), f32(sq), f32(buf)
	if len(gs) != len(ws) || len(ss) != len(ws) || (a.Momentum != 0 && len(bs) != len(ws)) {
		panic(fmt.Sprintf("backend/cpu: rmsprop on %v, %v, %v, %v", w, g, sq, buf))
	}
	noEntry(a.Entry)
	for j := range ws {
		d := gs[j]
		if a.WeightDecay != 0 {
			d += a.WeightDecay * ws[j]
		}
		ss[j] = a.Alpha*ss[j] + a.OneMinusAlpha*d*d
		avg := float32(math.Sqrt(float64(ss[j]))) + a.Eps
		if a.Momentum != 0 {
			bs[j] = a.Momentum*bs[j] + d/avg
			ws[j] -= a.LR * bs[j]
		} else {
			ws[j] -= a.LR * d / avg
		}
	}
}

// SumSquares sums each view's blocks of backend.SumSquaresBlock values in
// parallel and adds the blocks' sums in order: the same bits for any
// number of threads, and as Composed's.
func (c CPU) SumSquares(gs []backend.View) float64 {
	const block = backend.SumSquaresBlock
	var partial []float64
	total := 0.0
	for _, g := range gs {
		xs := f32(g)
		nb := (len(xs) + block - 1) / block
		if cap(partial) < nb {
			partial = make([]float64, nb)
		}
		partial = partial[:nb]
		c.team.For(nb, 2, func(lo, hi int) {
			for b := lo; b < hi; b++ {
				partial[b] = backend.SumSquaresOf(xs[b*block : min((b+1)*block, len(xs))])
			}
		})
		for _, s := range partial {
			total += s
		}
	}
	return total
}

// noEntry panics for a queued step's entry: the CPU keeps no step queue
// (backend.StepQueue), its caller reads each step's answer.
func noEntry(e backend.StepEntry) {
	if e != 0 {
		panic(fmt.Sprintf("backend/cpu: an optimizer update for queued step %d; the CPU queues no steps", e.Index()))
	}
}
