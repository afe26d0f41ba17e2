package kernels

import (
	"fmt"
	"slices"
	"testing"
)

// TestMaxPoolRowsMatchGo: the pooling rows (AVX2 blocks where the CPU has
// them) give the pure-Go rows' maxima, positions and routed gradients, at
// widths around the blocks, with ties, NaN and ±0 in the windows, with and
// without positions.
func TestMaxPoolRowsMatchGo(t *testing.T) {
	for _, OW := range []int{1, 7, 8, 9, 16, 17, 33, 64} {
		r := seedFor(fmt.Sprint("maxpool", OW))
		r0, r1 := specialFloats(r, 2*OW+1), specialFloats(r, 2*OW+1)
		for i := 0; i < len(r0); i += 5 {
			r1[i] = r0[i] // ties
		}
		y, want := make([]float32, OW), make([]float32, OW)
		idx, wantIdx := make([]uint8, OW), make([]uint8, OW)
		MaxPool2Row(y, idx, r0, r1)
		maxPool2RowGo(want, wantIdx, r0, r1, 0)
		sameBits(t, fmt.Sprintf("max OW=%d", OW), y, want)
		if !slices.Equal(idx, wantIdx) {
			t.Fatalf("OW=%d: positions %v, Go %v", OW, idx, wantIdx)
		}
		MaxPool2Row(y, nil, r0, r1)
		sameBits(t, fmt.Sprintf("max without positions OW=%d", OW), y, want)

		g := specialFloats(r, OW)
		d0, d1 := specialFloats(r, 2*OW+1), specialFloats(r, 2*OW+1) // garbage to overwrite
		w0, w1 := slices.Clone(d0), slices.Clone(d1)
		MaxPool2BackRow(d0, d1, g, idx)
		maxPool2BackRowGo(w0, w1, g, idx, 0)
		sameBits(t, fmt.Sprintf("back r0 OW=%d", OW), d0, w0)
		sameBits(t, fmt.Sprintf("back r1 OW=%d", OW), d1, w1)
	}
}
