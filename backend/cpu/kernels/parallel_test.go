package kernels

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memunet/memunet/backend"
)

// TestParallelForCoverage checks that every index in [0,n) is visited exactly
// once, by chunks that are non-empty, in range and no more numerous than the
// worker limit min(GOMAXPROCS, n/minChunk) (at least one), and that all work
// is done when ParallelFor returns.
// The same holds for Team.For, on one team reused across all cases (its
// workers outliving GOMAXPROCS changes).
func TestParallelForCoverage(t *testing.T) {
	team := NewTeam()
	for _, procs := range []int{1, 2, 3, 8} {
		for _, n := range []int{-3, 0, 1, 2, 7, 1000} {
			for _, minChunk := range []int{-1, 0, 1, 2, 3, 7, 64, 999, 1000, 5000} {
				t.Run(fmt.Sprintf("procs%d/n%d/min%d", procs, n, minChunk), func(t *testing.T) {
					withProcs(procs, func() {
						checkParallelFor(t, ParallelFor, procs, n, minChunk)
						checkParallelFor(t, team.For, procs, n, minChunk)
					})
				})
			}
		}
	}
}

func checkParallelFor(t *testing.T, parallelFor func(n, minChunk int, body func(lo, hi int)), procs, n, minChunk int) {
	counts := make([]int32, max(n, 0))
	var calls atomic.Int32
	var mu sync.Mutex
	var bad []string
	parallelFor(n, minChunk, func(lo, hi int) {
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
	for name, parallelFor := range map[string]func(int, int, func(int, int)){"goroutines": ParallelFor, "team": NewTeam().For} {
		withProcs(procs, func() {
			var started sync.WaitGroup
			started.Add(procs)
			done := make(chan struct{})
			go func() {
				parallelFor(procs*10, 1, func(lo, hi int) {
					started.Done()
					started.Wait()
				})
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: chunks did not run concurrently (still blocked after 10s)", name)
			}
		})
	}
}

// TestTeamShared: loops started on one team from several goroutines at
// once, and loops nested in a loop's body, each cover their range exactly
// once (the ones that find the team busy run on new goroutines).
func TestTeamShared(t *testing.T) {
	withProcs(3, func() {
		team := NewTeam()
		const n, outer = 5000, 8
		var counts [outer][n]int32
		var wg sync.WaitGroup
		for g := range outer {
			wg.Go(func() {
				for range 20 {
					team.For(outer, 1, func(lo, hi int) {
						// nested: the team is busy
						team.For(n, 7, func(a, b int) {
							for i := a; i < b; i++ {
								atomic.AddInt32(&counts[g][i], 1)
							}
						})
					})
				}
			})
		}
		wg.Wait()
		for g := range outer {
			for i, c := range counts[g] {
				// each of the 20 rounds runs the nested loop once per outer chunk
				if c%20 != 0 || c == 0 {
					t.Fatalf("goroutine %d index %d visited %d times", g, i, c)
				}
			}
		}
	})
}

// TestTeamWorkersExit: a team's workers park when idle and exit after its
// idle time, and the next loop starts them again.
func TestTeamWorkersExit(t *testing.T) {
	withProcs(3, func() {
		team := NewTeam()
		team.spin, team.idleExit = 10*time.Microsecond, 20*time.Millisecond
		var sum atomic.Int64
		team.For(300, 1, func(lo, hi int) { sum.Add(int64(hi - lo)) })
		if got := team.running(); got != 2 {
			t.Fatalf("%d workers running after a loop on 3 cores, want 2", got)
		}
		deadline := time.Now().Add(10 * time.Second)
		for team.running() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d workers still running after 10s idle", team.running())
			}
			time.Sleep(5 * time.Millisecond)
		}
		team.For(300, 1, func(lo, hi int) { sum.Add(int64(hi - lo)) })
		if sum.Load() != 600 {
			t.Fatalf("covered %d indices over two loops, want 600", sum.Load())
		}
	})
}

// TestKernelsOnTeam: the convolutions and Sgemm give bit-identical results
// on a team and on new goroutines (each value is computed by one task
// either way; only who runs it differs).
func TestKernelsOnTeam(t *testing.T) {
	team := NewTeam()
	for _, procs := range []int{2, 3} {
		withProcs(procs, func() {
			for _, s := range []backend.ConvShape{
				{N: 2, C: 9, H: 19, W: 23, OC: 70, K: 3, Pad: 1},
				{N: 1, C: 40, H: 8, W: 8, OC: 50, K: 3, Pad: 1},
				{N: 1, C: 5, H: 32, W: 32, OC: 16, K: 3, Pad: 1},
			} {
				r := seedFor("team " + convName(s))
				in, w, bias, dout := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC), randSlice(r, s.OutSize())
				ws := make([]float32, ConvWorkspace(s))
				run := func(on *Team) (out, din, dw, db []float32) {
					out, din, dw, db = make([]float32, s.OutSize()), make([]float32, s.InSize()), make([]float32, s.WeightSize()), make([]float32, s.OC)
					on.Conv2d(s, out, in, w, bias, ws)
					on.Conv2dBackward(s, din, dw, db, dout, in, w, ws)
					return
				}
				o1, i1, w1, b1 := run(nil)
				o2, i2, w2, b2 := run(team)
				for name, pair := range map[string][2][]float32{"out": {o1, o2}, "din": {i1, i2}, "dw": {w1, w2}, "dbias": {b1, b2}} {
					for i := range pair[0] {
						if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
							t.Fatalf("%d procs, %s: %s[%d] = %v on goroutines, %v on the team", procs, convName(s), name, i, pair[0][i], pair[1][i])
						}
					}
				}
			}
		})
	}
}

// TestTeamWaited: the caller's wait for a slower worker is counted, never
// more than the loop took.
func TestTeamWaited(t *testing.T) {
	var none *Team
	if none.Waited() != 0 {
		t.Fatal("a nil team waited")
	}
	team := NewTeam()
	start := time.Now()
	team.Run(2, func(w int) {
		if w == 1 {
			time.Sleep(10 * time.Millisecond)
		}
	})
	took := time.Since(start)
	if w := team.Waited(); w <= 0 || w > took {
		t.Fatalf("waited %v in a loop of %v whose worker slept 10ms", w, took)
	}
}
