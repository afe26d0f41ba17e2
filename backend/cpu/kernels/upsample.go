package kernels

// The rows of a 2x bilinear upsampling (align_corners=False, see
// backend/cpu): AVX2 for the interior where the CPU has it, pure Go for the
// edges and elsewhere, the same float32 operations in the same order (a
// multiply and an add, never fused), so both agree bit for bit.

// UpsampleRow writes the 2W values of one output row from the vertical
// blend cur[j] = a*r0[j] + b*r1[j] of two input rows of W values: output
// 0 is cur[0], 2j+1 is 0.75*cur[j] + 0.25*cur[j+1], 2j+2 is
// 0.25*cur[j] + 0.75*cur[j+1], and 2W-1 is cur[W-1].
func UpsampleRow(dst, r0, r1 []float32, a, b float32) {
	W := len(r0)
	r1, dst = r1[:W], dst[:2*W]
	j0 := 0
	if bestElementwise().avx2 {
		j0 = upsampleRowAsm(dst, r0, r1, a, b)
	}
	upsampleRowGo(dst, r0, r1, a, b, j0)
}

// upsampleRowGo writes outputs 0, 2j+1 and 2j+2 for j >= j0 (j+1 < W), and
// 2W-1.
func upsampleRowGo(dst, r0, r1 []float32, a, b float32, j0 int) {
	W := len(r0)
	dst[0] = a*r0[0] + b*r1[0]
	mid := dst[1 : 2*W-1]
	cur := a*r0[j0] + b*r1[j0]
	for j := j0; j+1 < W; j++ {
		next := a*r0[j+1] + b*r1[j+1]
		p := mid[2*j : 2*j+2 : 2*j+2]
		p[0] = 0.75*cur + 0.25*next
		p[1] = 0.25*cur + 0.75*next
		cur = next
	}
	dst[2*W-1] = a*r0[W-1] + b*r1[W-1]
}

// UpsampleRowAdjoint writes the W values of one input row's gradient from
// the four output-gradient rows that touch it (up, even, odd, down: output
// rows 2i-1, 2i, 2i+1, 2i+2 clamped, weights 0.25, 0.75, 0.75, 0.25), and
// along the row the same weights on output columns 2j-1 .. 2j+2: with
// t[k] = 0.25*(gu[k]+gd[k]) + 0.75*(ge[k]+go[k]), dst[j] =
// 0.25*(t[2j-1] + t[2j+2]) + 0.75*(t[2j] + t[2j+1]), the columns clamped.
func UpsampleRowAdjoint(dst, gu, ge, go_, gd []float32) {
	W := len(dst)
	gu, ge, go_, gd = gu[:2*W], ge[:2*W], go_[:2*W], gd[:2*W]
	j1 := 0 // dst[j] for 1 <= j < j1 done in assembly
	if bestElementwise().avx2 {
		j1 = upsampleRowAdjointAsm(dst, gu, ge, go_, gd)
	}
	upsampleRowAdjointGo(dst, gu, ge, go_, gd, j1)
}

// upsampleRowAdjointGo writes dst[0] and dst[j] for j >= max(j1, 1).
func upsampleRowAdjointGo(dst, gu, ge, go_, gd []float32, j1 int) {
	W := len(dst)
	t := func(k int) float32 { return 0.25*(gu[k]+gd[k]) + 0.75*(ge[k]+go_[k]) }
	for j := 0; j < W; j++ {
		if j > 0 && j < j1 {
			continue
		}
		prevO := t(max(2*j-1, 0))
		next := t(min(2*j+2, 2*W-1))
		dst[j] = 0.25*(prevO+next) + 0.75*(t(2*j)+t(2*j+1))
	}
}
