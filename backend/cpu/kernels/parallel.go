package kernels

import (
	"runtime"
	"sync"
)

// ParallelFor calls body over [0,n) split into contiguous chunks, one per
// available core (the last on the calling goroutine); it returns when all
// chunks are done. Small n (or minChunk
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
	// The first chunks run on new goroutines, the last on the caller,
	// which would otherwise only wait.
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	lo := 0
	for ; lo+chunk < n; lo += chunk {
		start := lo
		wg.Go(func() { body(start, start+chunk) })
	}
	body(lo, n)
	wg.Wait()
}
