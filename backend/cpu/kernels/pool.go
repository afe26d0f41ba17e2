package kernels

import "math"

// The rows of a 2x2 max pooling (PyTorch's MaxPool2d(2)): AVX2 eight
// windows at a time where the CPU has it, pure Go for the rest and
// elsewhere. Both give the same values and window positions (comparisons
// only, no arithmetic).

// MaxPool2Row writes the maxima of the len(y) 2x2 windows over input rows
// r0 and r1 (2*len(y) values each, or more) into y, and each window's
// position of the maximum (0, 1 on r0; 2, 3 on r1) into idx unless idx is
// nil. A later value wins if it is larger or NaN, so a NaN propagates as in
// PyTorch.
func MaxPool2Row(y []float32, idx []uint8, r0, r1 []float32) {
	ox := 0
	if bestElementwise().avx2 {
		ox = maxPool2RowAsm(y, idx, r0, r1)
	}
	maxPool2RowGo(y, idx, r0, r1, ox)
}

// maxPool2RowGo does windows ox0 onwards.
func maxPool2RowGo(y []float32, idx []uint8, r0, r1 []float32, ox0 int) {
	r0, r1 = r0[:2*len(y)], r1[:2*len(y)]
	for ox := ox0; ox < len(y); ox++ {
		best, at := r0[2*ox], byte(0)
		if v := r0[2*ox+1]; v > best || v != v {
			best, at = v, 1
		}
		if v := r1[2*ox]; v > best || v != v {
			best, at = v, 2
		}
		if v := r1[2*ox+1]; v > best || v != v {
			best, at = v, 3
		}
		y[ox] = best
		if idx != nil {
			idx[ox] = at
		}
	}
}

// MaxPool2BackRow routes each g[ox] to its window's position idx[ox],
// writing all four values of every window (the others +0) over the first
// 2*len(g) values of r0 and r1.
func MaxPool2BackRow(r0, r1, g []float32, idx []uint8) {
	ox := 0
	if bestElementwise().avx2 {
		ox = maxPool2BackRowAsm(r0, r1, g, idx)
	}
	maxPool2BackRowGo(r0, r1, g, idx, ox)
}

// maxPool2BackRowGo does windows ox0 onwards, branch-free: the gradient's
// bits where the maximum was, else +0.
func maxPool2BackRowGo(r0, r1, g []float32, idx []uint8, ox0 int) {
	r0, r1, idx = r0[:2*len(g)], r1[:2*len(g)], idx[:len(g)]
	for ox := ox0; ox < len(g); ox++ {
		b, a := math.Float32bits(g[ox]), uint32(idx[ox])
		w0, w1 := r0[2*ox:2*ox+2:2*ox+2], r1[2*ox:2*ox+2:2*ox+2]
		w0[0] = math.Float32frombits(b & selectMask(a, 0))
		w0[1] = math.Float32frombits(b & selectMask(a, 1))
		w1[0] = math.Float32frombits(b & selectMask(a, 2))
		w1[1] = math.Float32frombits(b & selectMask(a, 3))
	}
}

// selectMask is all ones if a == k, else 0 (for a, k < 2^31), without a branch.
func selectMask(a, k uint32) uint32 { return uint32((int32(a^k) - 1) >> 31) }
