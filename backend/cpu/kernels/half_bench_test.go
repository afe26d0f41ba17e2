package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
)

// Half-precision conversion benchmarks on 1M values. SetBytes counts the
// bytes read plus written per call (4+2 per element), so the reported MB/s
// (and the same figure as GB/s) is memory traffic; divide by 6 for
// elements/ns.
// Run e.g. go test -run XXX -bench Half ./model/kernels/

const halfBenchN = 1 << 20

// halfBench sets the byte count, runs f b.N times and reports GB/s.
func halfBench(b *testing.B, f func()) {
	const bytes = 6 * halfBenchN
	b.SetBytes(bytes)
	b.ResetTimer()
	for range b.N {
		f()
	}
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(bytes*float64(b.N)/sec/1e9, "GB/s")
	}
}

// halfBenchData returns normal-range float32s (what activations and
// gradients look like) and their float16 and bfloat16 encodings.
func halfBenchData() (f32 []float32, f16, bf16 []uint16) {
	r := seedFor("half-bench")
	f32 = make([]float32, halfBenchN)
	f16 = make([]uint16, halfBenchN)
	bf16 = make([]uint16, halfBenchN)
	for i := range f32 {
		f32[i] = float32((2*r.Float64() - 1) * math.Exp2(float64(r.IntN(20)-10)))
	}
	F32ToF16Slice(f16, f32)
	F32ToBF16Slice(bf16, f32)
	return f32, f16, bf16
}

func BenchmarkHalfF32ToF16Slice(b *testing.B) {
	src, dst, _ := halfBenchData()
	halfBench(b, func() { F32ToF16Slice(dst, src) })
}

func BenchmarkHalfF16ToF32Slice(b *testing.B) {
	dst, src, _ := halfBenchData()
	halfBench(b, func() { F16ToF32Slice(dst, src) })
}

func BenchmarkHalfF32ToBF16Slice(b *testing.B) {
	src, _, dst := halfBenchData()
	halfBench(b, func() { F32ToBF16Slice(dst, src) })
}

func BenchmarkHalfBF16ToF32Slice(b *testing.B) {
	dst, _, src := halfBenchData()
	halfBench(b, func() { BF16ToF32Slice(dst, src) })
}

// Single-goroutine throughput of the scalar kernels (the same loop without
// ParallelFor), to separate per-element cost from scaling.
func BenchmarkHalfF32ToF16Serial(b *testing.B) {
	src, dst, _ := halfBenchData()
	halfBench(b, func() {
		for i, v := range src {
			dst[i] = backend.F32ToF16(v)
		}
	})
}

func BenchmarkHalfF16ToF32Serial(b *testing.B) {
	dst, src, _ := halfBenchData()
	halfBench(b, func() {
		for i, v := range src {
			dst[i] = backend.F16ToF32(v)
		}
	})
}

// BenchmarkHalfImpls: each implementation's conversions on one goroutine,
// on 64Ki values (in L2) and on all 1Mi (from L3 or memory), in GB/s as
// halfBench counts them.
func BenchmarkHalfImpls(b *testing.B) {
	f32, f16, bf16 := halfBenchData()
	for _, h := range append([]halfImpl{genericHalf()}, asmHalfImpls()...) {
		for _, n := range []int{1 << 16, halfBenchN} {
			x, y, z := f32[:n], f16[:n], bf16[:n]
			size := fmt.Sprintf("%dKi", n>>10)
			run := func(name string, f func()) {
				b.Run(h.name+"/"+name+"/"+size, func(b *testing.B) {
					b.SetBytes(int64(6 * n))
					for range b.N {
						f()
					}
				})
			}
			run("f32ToF16", func() { h.f32ToF16(y, x) })
			run("f16ToF32", func() { h.f16ToF32(x, y) })
			run("f32ToBF16", func() { h.f32ToBF16(z, x) })
			run("bf16ToF32", func() { h.bf16ToF32(x, z) })
		}
	}
}
