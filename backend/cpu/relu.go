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
		c.reluBits(u16(out), u16(in), in.DT)
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
		c.reluBackwardBits(u16(din), u16(dout), u16(out), out.DT)
		return
	}
	y, dy, dx := f32(out), f32(dout), f32(din)
	c.team.For(len(y), 1<<14, func(lo, hi int) { kernels.ReLUBackward(dx[lo:hi], dy[lo:hi], y[lo:hi]) })
}

// infBits is the pattern of +Inf; a magnitude (bits & 0x7fff) above it is NaN.
func infBits(dt backend.DType) uint16 {
	if dt == backend.Float16 {
		return 0x7c00
	}
	return 0x7f80
}

// reluBits is max(x, 0) on 16-bit patterns: negative numbers (and -0) become
// +0, NaN and non-negative values pass through.
func (c CPU) reluBits(y, x []uint16, dt backend.DType) {
	inf := infBits(dt)
	c.team.For(len(x), 1<<15, func(lo, hi int) {
		xs, ys := x[lo:hi], y[lo:hi]
		ys = ys[:len(xs)]
		for i, b := range xs {
			// branch-free: keep b unless it is negative and not NaN
			keep := ^uint16(int16(b)>>15) | uint16((int32(0x8000|inf)-int32(b))>>31)
			ys[i] = b & keep
		}
	})
}

// reluBackwardBits passes dy where y > 0 (positive, non-zero, not NaN), else 0.
func (c CPU) reluBackwardBits(dx, dy, y []uint16, dt backend.DType) {
	inf := infBits(dt)
	c.team.For(len(y), 1<<15, func(lo, hi int) {
		ys, gs, ds := y[lo:hi], dy[lo:hi], dx[lo:hi]
		gs, ds = gs[:len(ys)], ds[:len(ys)]
		for i, b := range ys {
			// branch-free: all ones where 1 <= b <= inf
			keep := uint16((int32(b-1) - int32(inf)) >> 31)
			ds[i] = gs[i] & keep
		}
	})
}
