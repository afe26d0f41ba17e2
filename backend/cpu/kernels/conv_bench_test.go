package kernels

import (
	"testing"

	"github.com/memunet/memunet/backend"
)

// Benchmarks report GFLOP/s counting one multiply-add as 2 flops:
// forward 2*N*C*OC*K*K*OH*OW; backward with din twice that (dw and din GEMMs).
// Run e.g. go test -run XXX -bench . -benchtime 3x ./model/kernels/

var convBenchSizes = []struct {
	name string
	s    backend.ConvShape
}{
	{"small", backend.ConvShape{N: 1, C: 8, H: 16, W: 16, OC: 8, K: 3, Pad: 1}},
	{"medium", backend.ConvShape{N: 4, C: 32, H: 64, W: 64, OC: 32, K: 3, Pad: 1}},
	{"large", backend.ConvShape{N: 4, C: 64, H: 128, W: 128, OC: 64, K: 3, Pad: 1}},
}

func convFlops(s backend.ConvShape) float64 {
	return 2 * float64(s.N) * float64(s.C) * float64(s.OC) * float64(s.K*s.K) * float64(s.OH()*s.OW())
}

func reportGFLOPs(b *testing.B, flopsPerOp float64) {
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(flopsPerOp*float64(b.N)/sec/1e9, "GFLOP/s")
	}
}

func BenchmarkConv2d(b *testing.B) {
	for _, bs := range convBenchSizes {
		s := bs.s
		b.Run(bs.name, func(b *testing.B) {
			r := seedFor("bench")
			in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
			out, ws := make([]float32, s.OutSize()), make([]float32, ConvWorkspace(s))
			b.ResetTimer()
			for range b.N {
				Conv2d(s, out, in, w, bias, ws)
			}
			b.StopTimer()
			reportGFLOPs(b, convFlops(s))
		})
	}
}

func BenchmarkConv2dBackward(b *testing.B) {
	for _, bs := range convBenchSizes {
		s := bs.s
		b.Run(bs.name, func(b *testing.B) {
			r := seedFor("bench")
			in, w, dout := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OutSize())
			din, dw, dbias := make([]float32, s.InSize()), make([]float32, s.WeightSize()), make([]float32, s.OC)
			ws := make([]float32, ConvWorkspace(s))
			b.ResetTimer()
			for range b.N {
				Conv2dBackward(s, din, dw, dbias, dout, in, w, ws)
			}
			b.StopTimer()
			reportGFLOPs(b, 2*convFlops(s))
		})
	}
}

var upBenchShape = backend.UpConvShape{N: 4, C: 64, H: 32, W: 32, OC: 32}

func upFlops(s backend.UpConvShape) float64 {
	return 2 * float64(s.N) * float64(s.C) * float64(s.OC) * 4 * float64(s.H*s.W)
}

func BenchmarkUpConv(b *testing.B) {
	s := upBenchShape
	r := seedFor("bench")
	in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
	out, ws := make([]float32, s.OutSize()), make([]float32, UpConvWorkspace(s))
	b.ResetTimer()
	for range b.N {
		UpConv(s, out, in, w, bias, ws)
	}
	b.StopTimer()
	reportGFLOPs(b, upFlops(s))
}

func BenchmarkUpConvBackward(b *testing.B) {
	s := upBenchShape
	r := seedFor("bench")
	in, w, dout := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OutSize())
	din, dw, dbias := make([]float32, s.InSize()), make([]float32, s.WeightSize()), make([]float32, s.OC)
	ws := make([]float32, UpConvWorkspace(s))
	b.ResetTimer()
	for range b.N {
		UpConvBackward(s, din, dw, dbias, dout, in, w, ws)
	}
	b.StopTimer()
	reportGFLOPs(b, 2*upFlops(s))
}
