package kernels

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestParallelForCoverage checks that every index in [0,n) is visited exactly
// once, by chunks that are non-empty, in range and no more numerous than the
// worker limit min(GOMAXPROCS, n/minChunk) (at least one), and that all work
// is done when ParallelFor returns.
func TestParallelForCoverage(t *testing.T) {
	for _, procs := range []int{1, 2, 3, 8} {
		for _, n := range []int{-3, 0, 1, 2, 7, 1000} {
			for _, minChunk := range []int{-1, 0, 1, 2, 3, 7, 64, 999, 1000, 5000} {
				t.Run(fmt.Sprintf("procs%d/n%d/min%d", procs, n, minChunk), func(t *testing.T) {
					withProcs(procs, func() { checkParallelFor(t, procs, n, minChunk) })
				})
			}
		}
	}
}

func checkParallelFor(t *testing.T, procs, n, minChunk int) {
	counts := make([]int32, max(n, 0))
	var calls atomic.Int32
	var mu sync.Mutex
	var bad []string
	ParallelFor(n, minChunk, func(lo, hi int) {
		calls.Add(1)
		if lo < 0 || hi > n || lo >= hi {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("[%d,%d)", lo, hi))
			mu.Unlock()
			return
		}
		for i := lo; i < hi; i++ {
			atomic.AddInt32(&counts[i], 1)
		}
	})
	if len(bad) > 0 {
		t.Fatalf("bad chunks %v", bad)
	}
	for i, c := range counts {
		if c != 1 {
			t.Fatalf("index %d visited %d times", i, c)
		}
	}
	got := int(calls.Load())
	if n <= 0 {
		if got != 0 {
			t.Fatalf("body called %d times for n=%d", got, n)
		}
		return
	}
	limit := max(1, min(procs, n/max(minChunk, 1)))
	if got < 1 || got > limit {
		t.Fatalf("body called %d times, want 1..%d", got, limit)
	}
}

// TestParallelForConcurrent checks that with several workers the chunks do run
// on more than one goroutine at once (not silently serial): every chunk waits
// until all chunks have started.
func TestParallelForConcurrent(t *testing.T) {
	const procs = 4
	withProcs(procs, func() {
		var started sync.WaitGroup
		started.Add(procs)
		done := make(chan struct{})
		go func() {
			ParallelFor(procs*10, 1, func(lo, hi int) {
				started.Done()
				started.Wait()
			})
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("chunks did not run concurrently (still blocked after 10s)")
		}
	})
}
