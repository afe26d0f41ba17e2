package kernels

// ParallelFor calls body over [0,n) split into contiguous chunks, one per
// available core (the last on the calling goroutine), on new goroutines;
// it returns when all chunks are done. Small n (or minChunk larger than
// n/cores) runs on fewer goroutines, down to inline. Team.For does the same
// on a team's waiting workers.
func ParallelFor(n, minChunk int, body func(lo, hi int)) { (*Team)(nil).For(n, minChunk, body) }
