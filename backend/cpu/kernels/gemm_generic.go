package kernels

// microKernelGeneric is the pure-Go micro-kernel (see microKernel), used
// where the CPU lacks AVX2/FMA or the build has the noasm tag, and by the
// tests on every machine. It sweeps the 6x16 tile as 2-row x 8-column
// sub-tiles so the 16 accumulators plus operands stay close to the
// registers the compiler has; the packed panels are read from L1.
func microKernelGeneric(kc int, a, b, c []float32, ldc int, alpha, beta float32, overwrite bool, rows int) {
	a = a[:kc*gemmMR]
	b = b[:kc*gemmNR]
	if rows < 1 || rows > gemmMR {
		panic("kernels: micro-kernel rows out of range")
	}
	_ = c[(rows-1)*ldc+gemmNR-1]
	for i := 0; i < rows; i += 2 {
		for j := 0; j < gemmNR; j += 8 {
			var c00, c01, c02, c03, c04, c05, c06, c07 float32
			var c10, c11, c12, c13, c14, c15, c16, c17 float32
			for p := 0; p < kc; p++ {
				ap := a[p*gemmMR+i : p*gemmMR+i+2 : p*gemmMR+i+2]
				bp := b[p*gemmNR+j : p*gemmNR+j+8 : p*gemmNR+j+8]
				a0, a1 := ap[0], ap[1]
				b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
				c00 += a0 * b0
				c01 += a0 * b1
				c02 += a0 * b2
				c03 += a0 * b3
				c10 += a1 * b0
				c11 += a1 * b1
				c12 += a1 * b2
				c13 += a1 * b3
				b4, b5, b6, b7 := bp[4], bp[5], bp[6], bp[7]
				c04 += a0 * b4
				c05 += a0 * b5
				c06 += a0 * b6
				c07 += a0 * b7
				c14 += a1 * b4
				c15 += a1 * b5
				c16 += a1 * b6
				c17 += a1 * b7
			}
			acc0 := [8]float32{c00, c01, c02, c03, c04, c05, c06, c07}
			acc1 := [8]float32{c10, c11, c12, c13, c14, c15, c16, c17}
			for h, acc := range [2]*[8]float32{&acc0, &acc1} {
				if i+h >= rows {
					break
				}
				r := c[(i+h)*ldc+j : (i+h)*ldc+j+8 : (i+h)*ldc+j+8]
				if overwrite {
					for q := range r {
						r[q] = alpha * acc[q]
					}
				} else {
					for q := range r {
						r[q] = alpha*acc[q] + beta*r[q]
					}
				}
			}
		}
	}
}
