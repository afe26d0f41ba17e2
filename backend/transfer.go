package backend

import (
	"fmt"
	"unsafe"
)

// Host values cross Upload and Download as bytes in the machine's own
// order; every platform memunet builds for is little-endian, as the
// safetensors files are.

// UploadFloat32 copies src into dst (an fp32 view of len(src) values).
func UploadFloat32(t Transfer, dst View, src []float32) {
	if dst.DT != Float32 || dst.Len != len(src) {
		panic(fmt.Sprintf("backend: upload of %d float32 values into %v", len(src), dst))
	}
	t.Upload(dst, float32Bytes(src))
}

// DownloadFloat32 returns a new host copy of v's values as float32 (16-bit
// values are widened on the host).
func DownloadFloat32(t Transfer, v View) []float32 {
	out := make([]float32, v.Len)
	switch {
	case v.DT == Float32:
		t.Download(float32Bytes(out), v)
	case v.DT.Half():
		bits := make([]uint16, v.Len)
		t.Download(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(bits))), 2*len(bits)), v)
		widen := F16ToF32
		if v.DT == BFloat16 {
			widen = BF16ToF32
		}
		for i, b := range bits {
			out[i] = widen(b)
		}
	default:
		panic(fmt.Sprintf("backend: float32 download of %v", v))
	}
	return out
}

// DownloadBytes returns a new host copy of v's bytes.
func DownloadBytes(t Transfer, v View) []byte {
	out := make([]byte, v.Bytes())
	t.Download(out, v)
	return out
}

func float32Bytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}

// TargetError is a target value that is neither a class nor IgnoreIndex.
type TargetError struct {
	Value, Sample, Classes int
}

func (e *TargetError) Error() string {
	return fmt.Sprintf("model: cross entropy: target value %d in sample %d is not a class of %d (nor the ignore index %d)",
		e.Value, e.Sample, e.Classes, IgnoreIndex)
}

// DownloadFloat32Into copies a Float32 view's values into dst (len v.Len),
// for a caller that reuses its host buffer.
func DownloadFloat32Into(t Transfer, dst []float32, v View) {
	if v.DT != Float32 || v.Len != len(dst) {
		panic(fmt.Sprintf("backend: download of %v into %d float32 values", v, len(dst)))
	}
	t.Download(float32Bytes(dst), v)
}
