package kernels

import (
	"runtime"
	"sync"
	"time"
)

// MicroKernelPeak measures what this machine's GEMM micro-kernel computes
// with its panels in L1, on all GOMAXPROCS cores at once, in GFLOP/s (a
// multiply-add is 2 flops): the practical FMA peak that bench reports a
// step's GFLOP/s against. It runs for about d.
func MicroKernelPeak(d time.Duration) float64 {
	g := bestGemm()
	kern, width := g.kernel, gemmNR
	if g.wide != nil {
		kern, width = g.wide, 2*gemmNR
	}
	const kc = 128 // panels of 3 KiB (A) and 16 KiB (B): L1
	workers := runtime.GOMAXPROCS(0)
	calls := make([]int, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			a, b, c := make([]float32, kc*gemmMR), make([]float32, kc*width), make([]float32, gemmMR*width)
			for i := range a {
				a[i] = 1
			}
			for time.Since(start) < d {
				for range 64 {
					kern(kc, a, b, c, width, 1, 0, true, gemmMR)
				}
				calls[w] += 64
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range calls {
		total += n
	}
	return float64(total) * 2 * gemmMR * float64(width) * kc / time.Since(start).Seconds() / 1e9
}
