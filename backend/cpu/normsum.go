package cpu

// Reduction helpers for the norms: float64 accumulation in four independent
// chains (the add latency, not the memory, bounds a single chain), with the
// slices resliced so the compiler drops the bounds checks.

// shiftedSums returns s = Σ(x-k) and q = Σ(x-k)² in float64. With k a value
// of x (the first, say), the variance q/n - (s/n)² does not suffer the
// cancellation of a plain sum of squares when |mean| >> std.
func shiftedSums(xs []float32, k float64) (s, q float64) {
	var s0, s1, s2, s3, q0, q1, q2, q3 float64
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		v := xs[i : i+4 : i+4]
		d0, d1, d2, d3 := float64(v[0])-k, float64(v[1])-k, float64(v[2])-k, float64(v[3])-k
		s0 += d0
		s1 += d1
		s2 += d2
		s3 += d3
		q0 += d0 * d0
		q1 += d1 * d1
		q2 += d2 * d2
		q3 += d3 * d3
	}
	for ; i < len(xs); i++ {
		d := float64(xs[i]) - k
		s0 += d
		q0 += d * d
	}
	return (s0 + s1) + (s2 + s3), (q0 + q1) + (q2 + q3)
}

// gradSums returns Σg and Σg·(x-mu) in float64 over matching g and x.
func gradSums(g, x []float32, mu float64) (sg, sgx float64) {
	x = x[:len(g)]
	var a0, a1, a2, a3, b0, b1, b2, b3 float64
	i := 0
	for ; i+4 <= len(g); i += 4 {
		gv := g[i : i+4 : i+4]
		xv := x[i : i+4 : i+4]
		g0, g1, g2, g3 := float64(gv[0]), float64(gv[1]), float64(gv[2]), float64(gv[3])
		a0 += g0
		a1 += g1
		a2 += g2
		a3 += g3
		b0 += g0 * (float64(xv[0]) - mu)
		b1 += g1 * (float64(xv[1]) - mu)
		b2 += g2 * (float64(xv[2]) - mu)
		b3 += g3 * (float64(xv[3]) - mu)
	}
	for ; i < len(g); i++ {
		g0 := float64(g[i])
		a0 += g0
		b0 += g0 * (float64(x[i]) - mu)
	}
	return (a0 + a1) + (a2 + a3), (b0 + b1) + (b2 + b3)
}
