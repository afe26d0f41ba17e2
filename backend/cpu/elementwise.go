package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// Concat copies each sample's skip channels, then its up channels (bytes,
// whatever the storage type).
func (CPU) Concat(n int, out, skip, up backend.View) {
	if skip.DT != up.DT || out.DT != up.DT || out.Len != skip.Len+up.Len || skip.Len%n != 0 || up.Len%n != 0 {
		panic(fmt.Sprintf("backend/cpu: concat of %v and %v into %v", skip, up, out))
	}
	s, u, o := bytesOf(skip), bytesOf(up), bytesOf(out)
	sn, un := len(s)/n, len(u)/n
	for i := 0; i < n; i++ {
		copy(o[i*(sn+un):], s[i*sn:(i+1)*sn])
		copy(o[i*(sn+un)+sn:], u[i*un:(i+1)*un])
	}
}

// Split is Concat's adjoint.
func (CPU) Split(n int, dskip, dup, dout backend.View) {
	if dskip.DT != dup.DT || dout.DT != dup.DT || dout.Len != dskip.Len+dup.Len || dskip.Len%n != 0 || dup.Len%n != 0 {
		panic(fmt.Sprintf("backend/cpu: split of %v into %v and %v", dout, dskip, dup))
	}
	g, s, u := bytesOf(dout), bytesOf(dskip), bytesOf(dup)
	sn, un := len(s)/n, len(u)/n
	for i := 0; i < n; i++ {
		copy(s[i*sn:(i+1)*sn], g[i*(sn+un):])
		copy(u[i*un:(i+1)*un], g[i*(sn+un)+sn:])
	}
}

// Add is out = a + b, in parallel, 16-bit values block by block.
func (c CPU) Add(out, a, b backend.View) {
	x, y, o := valuesOf(a), valuesOf(b), valuesOf(out)
	if x.len() != o.len() || y.len() != o.len() {
		panic(fmt.Sprintf("backend/cpu: add of %v and %v into %v", a, b, out))
	}
	half := anyHalf(x, y, o)
	c.team.For(o.len(), 1<<14, func(lo, hi int) {
		buf, whole := c.scratch(half, blockLen, blockLen, blockLen)
		defer c.release(whole)
		blk := step(hi-lo, half)
		for i := lo; i < hi; i += blk {
			m := min(blk, hi-i)
			xs, ys, os := x.load(buf[0], i, m), y.load(buf[1], i, m), o.out(buf[2], i, m)
			for j := range os {
				os[j] = xs[j] + ys[j]
			}
			o.store(os, i)
		}
	})
}
