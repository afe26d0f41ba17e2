package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// Concat copies each sample's skip channels, then its up channels (bytes,
// whatever the storage type), in parallel over byte ranges of out.
func (c CPU) Concat(n int, out, skip, up backend.View) {
	if skip.DT != up.DT || out.DT != up.DT || out.Len != skip.Len+up.Len || skip.Len%n != 0 || up.Len%n != 0 {
		panic(fmt.Sprintf("backend/cpu: concat of %v and %v into %v", skip, up, out))
	}
	c.interleave(n, bytesOf(out), bytesOf(skip), bytesOf(up), false)
}

// Split is Concat's adjoint.
func (c CPU) Split(n int, dskip, dup, dout backend.View) {
	if dskip.DT != dup.DT || dout.DT != dup.DT || dout.Len != dskip.Len+dup.Len || dskip.Len%n != 0 || dup.Len%n != 0 {
		panic(fmt.Sprintf("backend/cpu: split of %v into %v and %v", dout, dskip, dup))
	}
	c.interleave(n, bytesOf(dout), bytesOf(dskip), bytesOf(dup), true)
}

// interleave copies a and b into o as n samples of a's part then b's (o's
// byte i of sample k is a's k-th part's, then b's), or, with split, o back
// out into a and b; the team takes ranges of o's bytes. With b nil, b's
// parts (len(o)/n - len(a)/n bytes each) are left alone.
func (c CPU) interleave(n int, o, a, b []byte, split bool) {
	an, bn := len(a)/n, len(o)/n-len(a)/n
	c.team.For(len(o), 64<<10, func(lo, hi int) {
		for lo < hi {
			k, r := lo/(an+bn), lo%(an+bn)
			src, off, end := a, k*an+r, an // the part lo lies in, and where it ends
			if r >= an {
				src, off, end = b, k*bn+r-an, an+bn
			}
			m := min(hi-lo, end-r)
			if src == nil {
				lo += m
				continue
			}
			if split {
				copy(src[off:off+m], o[lo:lo+m])
			} else {
				copy(o[lo:lo+m], src[off:off+m])
			}
			lo += m
		}
	})
}

// Add is out = a + b, in parallel, 16-bit values a band at a time (a
// "row" being one value of each).
func (c CPU) Add(out, a, b backend.View) {
	x, y, o := valuesOf(a), valuesOf(b), valuesOf(out)
	if x.len() != o.len() || y.len() != o.len() {
		panic(fmt.Sprintf("backend/cpu: add of %v and %v into %v", a, b, out))
	}
	half := anyHalf(x, y, o)
	blk := bandRows(o.len(), 3, half)
	c.team.For(o.len(), 1<<14, func(lo, hi int) {
		buf, whole := c.scratch(half, blk, blk, blk)
		defer c.release(whole)
		for i := lo; i < hi; i += blk {
			m := min(blk, hi-i)
			os := o.out(buf[2], i, m)
			kernels.Add(os, x.load(buf[0], i, m), y.load(buf[1], i, m))
			o.store(os, i)
		}
	})
}
