package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Team is a set of worker goroutines that run the kernels' parallel parts.
// Starting goroutines for every parallel loop, as ParallelFor without a
// team does, costs tens of microseconds a loop on a busy machine (a parked
// thread must be woken), and a training step runs hundreds of loops of a
// few hundred microseconds each. A team's workers instead wait for the
// next loop by spinning for a while (yielding to other goroutines), as
// OpenMP's do, then park, and exit after being idle for a second, so a team
// needs no Close.
//
// One loop runs at a time: a loop started while another runs (from another
// goroutine, or nested in a loop's body) falls back to new goroutines. A nil
// *Team always does. The caller takes part as worker 0.
type Team struct {
	busy atomic.Bool // a loop runs on the team
	// spin is how long a worker spins for the next job before parking,
	// idleExit how long it stays parked before exiting.
	spin, idleExit time.Duration

	mu      sync.Mutex
	slots   []*teamWorker // index w-1 is worker w; nil: not running
	job     func(w int)
	workers int           // workers 1..workers-1 take part in the job
	gen     atomic.Uint64 // bumped for each job
	pending atomic.Int64  // workers of the current job not done
	// waited is the time callers of Run spent waiting, their own part
	// done, for the other workers to finish theirs (ns).
	waited atomic.Int64
	// scratch keeps the GEMM tasks' offset tables (*packScratch) between
	// loops: a step runs hundreds of them.
	scratch sync.Pool
}

// teamWorker is one worker's parking place.
type teamWorker struct {
	wake   chan struct{} // a send wakes it when parked
	parked atomic.Bool
}

// NewTeam returns a team; its workers start with its first parallel loop.
// They spin for 200µs for the next loop (longer than the gaps between a
// training step's loops, short enough that an idle trainer soon stops
// burning a core) and exit after a second parked.
func NewTeam() *Team { return &Team{spin: 200 * time.Microsecond, idleExit: time.Second} }

// For is ParallelFor on the team: body over [0,n) split into contiguous
// chunks, one per core, the last on the caller.
func (t *Team) For(n, minChunk int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := min(runtime.GOMAXPROCS(0), n/max(minChunk, 1))
	if workers <= 1 {
		body(0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	workers = (n + chunk - 1) / chunk
	t.Run(workers, func(w int) {
		// Worker 0 (the caller) takes the last chunk.
		c := (w + workers - 1) % workers
		body(c*chunk, min((c+1)*chunk, n))
	})
}

// Run calls f(w) for w in [0,workers) concurrently, f(0) on the calling
// goroutine, and returns when all have returned.
func (t *Team) Run(workers int, f func(w int)) {
	if workers <= 1 {
		f(0)
		return
	}
	if t == nil || !t.busy.CompareAndSwap(false, true) {
		runGoroutines(workers, f)
		return
	}
	defer t.busy.Store(false)
	t.mu.Lock()
	for len(t.slots) < workers-1 {
		t.slots = append(t.slots, nil)
	}
	for i := range workers - 1 {
		if t.slots[i] == nil {
			tw := &teamWorker{wake: make(chan struct{}, 1)}
			t.slots[i] = tw
			go t.work(i+1, tw, t.gen.Load())
		}
	}
	t.job, t.workers = f, workers
	t.pending.Store(int64(workers - 1))
	t.gen.Add(1) // publishes job and workers (under mu, so no worker exits now)
	for _, tw := range t.slots[:workers-1] {
		if tw.parked.Load() {
			select {
			case tw.wake <- struct{}{}:
			default:
			}
		}
	}
	t.mu.Unlock()
	f(0)
	if t.pending.Load() == 0 {
		return
	}
	start := time.Now()
	for spins := 0; t.pending.Load() > 0; spins++ {
		if spins%64 == 63 {
			runtime.Gosched()
		}
	}
	t.waited.Add(int64(time.Since(start)))
}

// Waited is how long the callers of Run have waited, their own part done,
// for the team's other workers to finish theirs: the loops' imbalance, and
// the time a worker's core was taken from it (by another process, or by
// the host of a virtual machine) while the caller's was not. A loop run
// on new goroutines (a busy or nil team) is not counted.
func (t *Team) Waited() time.Duration {
	if t == nil {
		return 0
	}
	return time.Duration(t.waited.Load())
}

// work is worker w's loop; seen is the last job generation it has handled.
func (t *Team) work(w int, tw *teamWorker, seen uint64) {
	for {
		if _, ok := t.next(w, tw, seen); !ok {
			return
		}
		// The generation, job and worker count are published together
		// under mu. Read together, they cannot mix two jobs: the caller
		// publishes the next job only once every worker taking part in
		// this one is done, and a worker that skipped a job it had no part
		// in takes the newest.
		t.mu.Lock()
		gen, job, workers := t.gen.Load(), t.job, t.workers
		t.mu.Unlock()
		seen = gen
		if w < workers {
			job(w)
			t.pending.Add(-1)
		}
	}
}

// next waits for a job generation after seen: spinning, then parked; it
// reports false when the worker has been idle long enough to exit.
func (t *Team) next(w int, tw *teamWorker, seen uint64) (uint64, bool) {
	start := time.Now()
	for spins := 0; ; spins++ {
		if g := t.gen.Load(); g != seen {
			return g, true
		}
		if spins%64 == 63 {
			if time.Since(start) > t.spin {
				break
			}
			runtime.Gosched()
		}
	}
	for {
		tw.parked.Store(true)
		if g := t.gen.Load(); g != seen { // published before parked was seen
			tw.parked.Store(false)
			return g, true
		}
		select {
		case <-tw.wake:
			tw.parked.Store(false)
		case <-time.After(t.idleExit):
			tw.parked.Store(false)
			t.mu.Lock()
			if g := t.gen.Load(); g != seen {
				t.mu.Unlock()
				return g, true
			}
			t.slots[w-1] = nil
			t.mu.Unlock()
			return 0, false
		}
		if g := t.gen.Load(); g != seen {
			return g, true
		}
	}
}

// runGoroutines calls f(w) for w in [0,workers) on new goroutines, f(0) on
// the caller's.
func runGoroutines(workers int, f func(w int)) {
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { f(w) })
	}
	f(0)
	wg.Wait()
}

// running is the number of the team's workers alive (for tests).
func (t *Team) running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, tw := range t.slots {
		if tw != nil {
			n++
		}
	}
	return n
}
