package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// Confusion counts (target, predicted) pairs serially, 16-bit logits
// widened a chunk of pixels at a time.
func (c CPU) Confusion(s backend.Shape4, counts []int64, logits, target backend.View) {
	z, tg := valuesOf(logits), u8(target)
	K, HW := s.C, s.H*s.W
	if len(counts) != K*K || len(tg) != s.N*HW {
		panic(fmt.Sprintf("backend/cpu: confusion of %d classes into %d counts, %v", K, len(counts), target))
	}
	buf, whole := c.scratch(z.h != nil, K*lossChunk)
	defer c.release(whole)
	per := lossChunks(HW)
	for ch := range s.N * per {
		n, p0 := ch/per, ch%per*lossChunk
		m := min(lossChunk, HW-p0)
		zc, base, stride := logitChunk(z, K, HW, n, p0, m, buf[0])
		for i := range m {
			t := int(tg[n*HW+p0+i])
			if t == backend.IgnoreIndex || t >= K {
				continue
			}
			counts[t*K+argmaxAt(zc[base+i:], K, stride)]++
		}
	}
}

// Argmax writes each pixel's first largest class, in parallel over chunks
// of a sample's pixels.
func (c CPU) Argmax(s backend.Shape4, classes, logits backend.View) {
	z, out := valuesOf(logits), u8(classes)
	K, HW := s.C, s.H*s.W
	c.pixelChunks(s.N, HW, z.h != nil, []int{K * lossChunk}, func(ch, n, p0, m int, buf [5][]float32) {
		zc, base, stride := logitChunk(z, K, HW, n, p0, m, buf[0])
		for i := range m {
			out[n*HW+p0+i] = uint8(argmaxAt(zc[base+i:], K, stride))
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
