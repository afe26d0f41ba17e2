package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// Confusion counts (target, predicted) pairs serially.
func (c CPU) Confusion(s backend.Shape4, counts []int64, logits, target backend.View) {
	z, tg := c.floats(logits), u8(target)
	K, HW := s.C, s.H*s.W
	if len(counts) != K*K || len(tg) != s.N*HW {
		panic(fmt.Sprintf("backend/cpu: confusion of %d classes into %d counts, %v", K, len(counts), target))
	}
	for n := 0; n < s.N; n++ {
		for p := 0; p < HW; p++ {
			t := int(tg[n*HW+p])
			if t == backend.IgnoreIndex || t >= K {
				continue
			}
			counts[t*K+argmaxAt(z[n*K*HW+p:], K, HW)]++
		}
	}
}

// Argmax writes each pixel's first largest class, in parallel over samples.
func (c CPU) Argmax(s backend.Shape4, classes, logits backend.View) {
	z, out := c.floats(logits), u8(classes)
	K, HW := s.C, s.H*s.W
	c.team.For(s.N, 1, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for p := 0; p < HW; p++ {
				out[n*HW+p] = uint8(argmaxAt(z[n*K*HW+p:], K, HW))
			}
		}
	})
}

// argmaxAt is the index of the first largest of z[0], z[stride], ...
func argmaxAt(z []float32, K, stride int) int {
	best, arg := z[0], 0
	for k := 1; k < K; k++ {
		if v := z[k*stride]; v > best {
			best, arg = v, k
		}
	}
	return arg
}

// floats is a float view's values as float32: the view itself, or a host
// copy widened from 16 bits.
func (c CPU) floats(v backend.View) []float32 {
	if v.DT == backend.Float32 {
		return f32(v)
	}
	out := make([]float32, v.Len)
	if v.DT == backend.Float16 {
		c.team.F16ToF32Slice(out, u16(v))
	} else {
		c.team.BF16ToF32Slice(out, u16(v))
	}
	return out
}
