package cpu

import (
	"fmt"
	"math"

	"github.com/memunet/memunet/backend"
)

// Upload copies host bytes into dst.
func (CPU) Upload(dst backend.View, src []byte) {
	if len(src) != dst.Bytes() {
		panic(fmt.Sprintf("backend/cpu: upload of %d bytes into %v", len(src), dst))
	}
	copy(bytesOf(dst), src)
}

// Download copies src into host bytes.
func (CPU) Download(dst []byte, src backend.View) {
	if len(dst) != src.Bytes() {
		panic(fmt.Sprintf("backend/cpu: download of %v into %d bytes", src, len(dst)))
	}
	copy(dst, bytesOf(src))
}

// Convert widens or rounds between fp32 and fp16/bf16 (the F16C/AVX2
// kernels where the CPU has them); the same type copies.
func (c CPU) Convert(dst, src backend.View) {
	if dst.Len != src.Len {
		panic(fmt.Sprintf("backend/cpu: convert %v into %v", src, dst))
	}
	switch {
	case dst.DT == src.DT:
		copy(bytesOf(dst), bytesOf(src))
	case dst.DT == backend.Float32 && src.DT == backend.Float16:
		c.team.F16ToF32Slice(f32(dst), u16(src))
	case dst.DT == backend.Float32 && src.DT == backend.BFloat16:
		c.team.BF16ToF32Slice(f32(dst), u16(src))
	case dst.DT == backend.Float16 && src.DT == backend.Float32:
		c.team.F32ToF16Slice(u16(dst), f32(src))
	case dst.DT == backend.BFloat16 && src.DT == backend.Float32:
		c.team.F32ToBF16Slice(u16(dst), f32(src))
	default:
		panic(fmt.Sprintf("backend/cpu: no conversion from %s to %s", src.DT, dst.DT))
	}
}

// Fill sets every value of dst to v (rounded for 16-bit types).
func (CPU) Fill(dst backend.View, v float32) {
	switch dst.DT {
	case backend.Float32:
		xs := f32(dst)
		if math.Float32bits(v) == 0 {
			clear(xs) // +0: memclr
			return
		}
		for i := range xs {
			xs[i] = v
		}
	case backend.Float16, backend.BFloat16:
		bits := backend.F32ToF16(v)
		if dst.DT == backend.BFloat16 {
			bits = backend.F32ToBF16(v)
		}
		xs := u16(dst)
		for i := range xs {
			xs[i] = bits
		}
	default:
		panic(fmt.Sprintf("backend/cpu: fill of %v", dst))
	}
}
