package kernels

import (
	"fmt"
	"testing"
)

// TestUpsampleRowsMatchGo: the upsampling rows (AVX2 interior where the
// CPU has it) give the pure-Go rows' bits at every width around the
// vector blocks, special values included.
func TestUpsampleRowsMatchGo(t *testing.T) {
	widths := []int{1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 25, 26, 33, 64, 65, 129}
	for _, W := range widths {
		r := seedFor(fmt.Sprint("upsample", W))
		r0, r1 := specialFloats(r, W), specialFloats(r, W)
		got, want := make([]float32, 2*W), make([]float32, 2*W)
		for _, ab := range [][2]float32{{0.25, 0.75}, {0.75, 0.25}, {1, 0}} {
			UpsampleRow(got, r0, r1, ab[0], ab[1])
			upsampleRowGo(want, r0, r1, ab[0], ab[1], 0)
			sameBits(t, fmt.Sprintf("row W=%d a=%v", W, ab[0]), got, want)
		}
		g := [4][]float32{specialFloats(r, 2*W), specialFloats(r, 2*W), specialFloats(r, 2*W), specialFloats(r, 2*W)}
		gotd, wantd := make([]float32, W), make([]float32, W)
		UpsampleRowAdjoint(gotd, g[0], g[1], g[2], g[3])
		upsampleRowAdjointGo(wantd, g[0], g[1], g[2], g[3], 0)
		sameBits(t, fmt.Sprintf("adjoint W=%d", W), gotd, wantd)
	}
}
