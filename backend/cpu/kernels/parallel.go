package kernels

import (
	"runtime"
	"sync"
)

// ParallelFor calls body over [0,n) split into contiguous chunks, one per
// available core; it returns when all chunks are done. Small n (or minChunk
// larger than n/cores) runs on fewer goroutines, down to inline.
func ParallelFor(n, minChunk int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if minChunk < 1 {
		minChunk = 1
	}
	if w := n / minChunk; w < workers {
		workers = w
	}
	if workers <= 1 {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(lo, hi)
		}()
	}
	wg.Wait()
}
