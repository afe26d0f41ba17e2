package kernels

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend"
)

// BenchmarkWinogradFilter times the filter transforms a step runs per
// Winograd layer (the forward's, the input gradient's flipped one, the
// weight gradient's G^T du G), at the widths of base 16 to base 64's
// deepest 16x16 level; bytes are the weights and transformed planes.
func BenchmarkWinogradFilter(b *testing.B) {
	team := NewTeam()
	for _, sh := range [][2]int{{64, 64}, {256, 256}, {512, 512}, {1024, 512}} {
		s := backend.ConvShape{N: 4, C: sh[0], H: 16, W: 16, OC: sh[1], K: 3, Pad: 1, Algo: backend.ConvWinograd}
		r := seedFor("bench")
		w := randSlice(r, s.WeightSize())
		ws := make([]float32, 3*WinogradFilterSize(s, Wino2)+16*s.C*s.OC)
		dw := make([]float32, s.WeightSize())
		name := fmt.Sprintf("%d-%d", sh[0], sh[1])
		b.Run("fwd/"+name, func(b *testing.B) {
			for range b.N {
				team.WinogradFilter(s, Wino2, w, ws, false)
			}
			b.SetBytes(int64(4 * (s.WeightSize() + WinogradFilterSize(s, Wino2))))
		})
		b.Run("flipped/"+name, func(b *testing.B) {
			for range b.N {
				team.WinogradFilter(s, Wino2, w, ws, true)
			}
			b.SetBytes(int64(4 * (s.WeightSize() + WinogradFilterSize(s, Wino2))))
		})
		b.Run("add/"+name, func(b *testing.B) {
			du := randSlice(r, WinogradFilterSize(s, Wino2))
			for range b.N {
				team.WinogradWeightGradAdd(s, Wino2, dw, du, ws)
			}
			b.SetBytes(int64(4 * (s.WeightSize() + WinogradFilterSize(s, Wino2))))
		})
	}
}
