package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// values is a float view as the fp32 kernels take it: fp32 values in
// place, or a 16-bit tensor's bit patterns widened a band of rows or a
// chunk of pixels at a time into a worker's scratch (and results
// narrowed back). So a 16-bit tensor reaches pooling, upsampling, Add, the
// losses and the metrics without an fp32 copy in the pool, each value
// converted in cache with the same bits as staging gives. (The norms widen
// in registers: kernels.AffineHalf and friends.)
type values struct {
	f      []float32 // fp32 values; nil for 16-bit
	h      []uint16  // 16-bit bit patterns
	dt     backend.DType
	widen  func(dst []float32, src []uint16)
	narrow func(dst []uint16, src []float32)
}

// valuesOf is v's values (a none view has none).
func valuesOf(v backend.View) values {
	switch {
	case v.None():
		return values{}
	case v.DT == backend.Float32:
		return values{f: f32(v), dt: v.DT}
	case v.DT.Half():
		return values{h: u16(v), dt: v.DT, widen: kernels.Widen(v.DT), narrow: kernels.Narrow(v.DT)}
	}
	panic(fmt.Sprintf("backend/cpu: %v where float values are needed", v))
}

// len is the number of values.
func (v values) len() int { return max(len(v.f), len(v.h)) }

// bandValues is how many float32 values a worker's scratch holds for one
// band of 16-bit rows, its inputs and outputs together: a band is widened
// in one call and narrowed in one, in L2.
const bandValues = 16 << 10

// bandRows is how many of n rows a band takes where each row needs perRow
// values of scratch: all n where nothing is 16-bit (fp32 is read in
// place), else as many as bandValues holds, at least one.
func bandRows(n, perRow int, half bool) int {
	if !half {
		return n
	}
	return max(1, min(n, bandValues/max(perRow, 1)))
}

// anyHalf reports whether any of vs is 16-bit.
func anyHalf(vs ...values) bool {
	for _, v := range vs {
		if v.h != nil {
			return true
		}
	}
	return false
}

// scratch is a worker's fp32 buffers of the given sizes (at most 5) for
// widened 16-bit values, cut from one buffer of c's spares, or nils where
// half is false; the worker gives whole back with c.release when done.
func (c CPU) scratch(half bool, sizes ...int) (parts [5][]float32, whole *[]float32) {
	if !half {
		return parts, nil
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	if c.spare != nil {
		whole, _ = c.spare.Get().(*[]float32)
	}
	if whole == nil || cap(*whole) < total {
		buf := make([]float32, total)
		whole = &buf
	}
	buf := (*whole)[:total]
	for i, n := range sizes {
		parts[i], buf = buf[:n:n], buf[n:]
	}
	return parts, whole
}

// release gives a scratch buffer back to c's spares (nil: none).
func (c CPU) release(whole *[]float32) {
	if whole != nil && c.spare != nil {
		c.spare.Put(whole)
	}
}

// load is values [off, off+n): v's own where fp32, else widened into buf
// (n <= len(buf)).
func (v values) load(buf []float32, off, n int) []float32 {
	if v.h == nil {
		return v.f[off : off+n]
	}
	v.widen(buf[:n], v.h[off:off+n])
	return buf[:n]
}

// out is where values [off, off+n) are written: v's own where fp32, else
// buf, which store then narrows into v.
func (v values) out(buf []float32, off, n int) []float32 {
	if v.h == nil {
		return v.f[off : off+n]
	}
	return buf[:n]
}

// store narrows vals (what out gave for off) into v where 16-bit.
func (v values) store(vals []float32, off int) {
	if v.h != nil {
		v.narrow(v.h[off:off+len(vals)], vals)
	}
}

// clear sets values [off, off+n) to +0.
func (v values) clear(off, n int) {
	if v.h == nil {
		clear(v.f[off : off+n])
		return
	}
	clear(v.h[off : off+n]) // +0 in fp16 and bf16 alike
}

// at is value i.
func (v values) at(i int) float32 {
	switch {
	case v.h == nil:
		return v.f[i]
	case v.dt == backend.BFloat16:
		return backend.BF16ToF32(v.h[i])
	}
	return backend.F16ToF32(v.h[i])
}

// copyTo writes values [off, off+len(dst)) into dst, widened where 16-bit.
func (v values) copyTo(dst []float32, off int) {
	if v.h == nil {
		copy(dst, v.f[off:off+len(dst)])
		return
	}
	v.widen(dst, v.h[off:off+len(dst)])
}

// storeFrom writes src into values [off, off+len(src)), narrowed where
// 16-bit.
func (v values) storeFrom(src []float32, off int) {
	if v.h == nil {
		copy(v.f[off:off+len(src)], src)
		return
	}
	v.narrow(v.h[off:off+len(src)], src)
}
