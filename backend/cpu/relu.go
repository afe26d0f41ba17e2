package cpu

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// ReLU is max(in, 0) on the stored bit patterns, branch-free (activation
// signs are unpredictable), for every float type.
func (c CPU) ReLU(out, in backend.View) {
	if out.DT != in.DT || out.Len != in.Len {
		panic(fmt.Sprintf("backend/cpu: relu of %v into %v", in, out))
	}
	if in.DT.Half() {
		x, y, inf := u16(in), u16(out), infBits(in.DT)
		c.team.For(len(x), 1<<15, func(lo, hi int) { kernels.ReLU16(y[lo:hi], x[lo:hi], inf) })
		return
	}
	x, y := f32(in), f32(out)
	c.team.For(len(x), 1<<14, func(lo, hi int) { kernels.ReLU(y[lo:hi], x[lo:hi]) })
}

// ReLUBack passes dout where out > 0, on bit patterns, for every float type.
func (c CPU) ReLUBack(din, dout, out backend.View) {
	if din.DT != out.DT || dout.DT != out.DT || din.Len != out.Len || dout.Len != out.Len {
		panic(fmt.Sprintf("backend/cpu: relu backward of %v, %v into %v", dout, out, din))
	}
	if out.DT.Half() {
		y, dy, dx, inf := u16(out), u16(dout), u16(din), infBits(out.DT)
		c.team.For(len(y), 1<<15, func(lo, hi int) { kernels.ReLUBackward16(dx[lo:hi], dy[lo:hi], y[lo:hi], inf) })
		return
	}
	y, dy, dx := f32(out), f32(dout), f32(din)
	c.team.For(len(y), 1<<14, func(lo, hi int) { kernels.ReLUBackward(dx[lo:hi], dy[lo:hi], y[lo:hi]) })
}

// ReLUMask packs out > 0 into mask, a bit a value, for every float type;
// the team splits it at whole bytes.
func (c CPU) ReLUMask(mask, out backend.View) {
	m := u8(mask)
	if len(m) != (out.Len+7)/8 {
		panic(fmt.Sprintf("backend/cpu: relu mask of %v into %v", out, mask))
	}
	if out.DT.Half() {
		y, inf := u16(out), infBits(out.DT)
		c.team.For(len(m), 1<<12, func(lo, hi int) { kernels.ReLUMask16(m[lo:hi], y[8*lo:min(8*hi, len(y))], inf) })
		return
	}
	y := f32(out)
	c.team.For(len(m), 1<<11, func(lo, hi int) { kernels.ReLUMask(m[lo:hi], y[8*lo:min(8*hi, len(y))]) })
}

// ReLUAndMask is ReLU, then ReLUMask of its output, a band of 4096 values
// at a time: the band's output is still in the core's cache when its bits
// are packed, where the two operations read it back from memory.
func (c CPU) ReLUAndMask(out, mask, in backend.View) {
	m := u8(mask)
	if out.DT != in.DT || out.Len != in.Len || len(m) != (in.Len+7)/8 {
		panic(fmt.Sprintf("backend/cpu: relu and mask of %v into %v and %v", in, out, mask))
	}
	band := func(pass func(bits []uint8, lo, hi int)) func(lo, hi int) {
		return func(lo, hi int) {
			for b := lo; b < hi; b += 512 {
				e := min(b+512, hi)
				pass(m[b:e], 8*b, min(8*e, in.Len))
			}
		}
	}
	if in.DT.Half() {
		x, y, inf := u16(in), u16(out), infBits(in.DT)
		c.team.For(len(m), 1<<12, band(func(bits []uint8, lo, hi int) {
			kernels.ReLU16(y[lo:hi], x[lo:hi], inf)
			kernels.ReLUMask16(bits, y[lo:hi], inf)
		}))
		return
	}
	x, y := f32(in), f32(out)
	c.team.For(len(m), 1<<11, band(func(bits []uint8, lo, hi int) {
		kernels.ReLU(y[lo:hi], x[lo:hi])
		kernels.ReLUMask(bits, y[lo:hi])
	}))
}

// ReLUBackMask passes dout where mask's bit is set, for every float type.
func (c CPU) ReLUBackMask(din, dout, mask backend.View) {
	m := u8(mask)
	if din.DT != dout.DT || din.Len != dout.Len || len(m) != (dout.Len+7)/8 {
		panic(fmt.Sprintf("backend/cpu: relu backward of %v, mask %v into %v", dout, mask, din))
	}
	if dout.DT.Half() {
		dy, dx := u16(dout), u16(din)
		c.team.For(len(m), 1<<12, func(lo, hi int) {
			hi8 := min(8*hi, len(dy))
			kernels.ReLUBackwardMask16(dx[8*lo:hi8], dy[8*lo:hi8], m[lo:hi])
		})
		return
	}
	dy, dx := f32(dout), f32(din)
	c.team.For(len(m), 1<<11, func(lo, hi int) {
		hi8 := min(8*hi, len(dy))
		kernels.ReLUBackwardMask(dx[8*lo:hi8], dy[8*lo:hi8], m[lo:hi])
	})
}

// infBits is the pattern of +Inf; a magnitude (bits & 0x7fff) above it is NaN.
func infBits(dt backend.DType) uint16 {
	if dt == backend.Float16 {
		return 0x7c00
	}
	return 0x7f80
}
