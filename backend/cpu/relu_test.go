package cpu

import (
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

func TestReLUBranchFreeMatchesReference(t *testing.T) {
	for _, b := range []uint32{0, 0x80000000, 1, 0x80000001, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, 0x7f800001, 0xff800001, 0xffffffff, 0x7fffffff} {
		v := math.Float32frombits(b)
		y := []float32{0}
		kernels.ReLU(y, []float32{v})
		want := max(v, 0)
		if math.Float32bits(y[0]) != math.Float32bits(want) && !(v != v && y[0] != y[0]) {
			t.Errorf("relu %x: %x want %x", b, math.Float32bits(y[0]), math.Float32bits(want))
		}
		dx := []float32{0}
		kernels.ReLUBackward(dx, []float32{3}, []float32{v})
		w := float32(0)
		if v > 0 {
			w = 3
		}
		if dx[0] != w {
			t.Errorf("relu back %x: %v want %v", b, dx[0], w)
		}
	}
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		inf := infBits(dt)
		for b := 0; b < 65536; b++ {
			x := uint16(b)
			y := []uint16{0}
			kernels.ReLU16(y, []uint16{x}, inf)
			w := x
			if x&0x8000 != 0 && x&0x7fff <= inf {
				w = 0
			}
			if y[0] != w {
				t.Fatalf("%v relu %x: %x want %x", dt, x, y[0], w)
			}
			kernels.ReLUBackward16(y, []uint16{0x1234}, []uint16{x}, inf)
			w = 0
			if x&0x8000 == 0 && x != 0 && x <= inf {
				w = 0x1234
			}
			if y[0] != w {
				t.Fatalf("%v relu back %x: %x want %x", dt, x, y[0], w)
			}
		}
	}
}
