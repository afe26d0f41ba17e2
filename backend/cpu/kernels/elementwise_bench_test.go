package kernels

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend"
)

// BenchmarkElementwise times each elementwise pass per implementation by
// size class (a 16x16 plane, a 128x128 plane, 16 channels at 128x128), in
// GB/s of the float32 data it reads and writes.
func BenchmarkElementwise(b *testing.B) {
	for _, e := range elementwiseImpls() {
		for _, n := range []int{256, 16384, 16 * 16384} {
			r := seedFor(fmt.Sprint("bench elementwise", n))
			x, g, y, mask := randSlice(r, n), randSlice(r, n), make([]float32, n), make([]uint8, n/8)
			v := randSlice(r, n)
			for i := range v {
				v[i] *= v[i]
			}
			adam := backend.AdamStep{StepSize: 1e-3, SqrtBC2: 0.5, Beta1: 0.9, Beta2: 0.999, OneMinusBeta1: 0.1, OneMinusBeta2: 0.001, Eps: 1e-8}
			for _, c := range []struct {
				name   string
				arrays int // float32 arrays read and written
				run    func()
			}{
				{"relu", 2, func() { e.relu(y, x) }},
				{"relu-backward", 3, func() { e.reluBackward(y, g, x) }},
				{"relu-mask", 1, func() { e.reluMask(mask, x) }}, // and n/8 bytes written
				{"relu-backward-mask", 2, func() { e.reluBackMask(y, g, mask) }},
				{"relu-backward-mask-sums", 3, func() {
					var ch chains
					e.reluBackMaskGradSums(y, g, x, mask, 0.125, &ch)
				}},
				{"affine", 2, func() { e.affine(y, x, 1.5, 0.25) }},
				{"norm-grad", 3, func() { e.normGrad(y, g, x, 0.1, 1.2, -0.3, 0.01) }},
				{"shifted-sums", 1, func() {
					var ch chains
					e.shiftedSums(x, 0.5, &ch)
				}},
				{"adam", 7, func() { e.adam(adam, y, g, x, v) }},
			} {
				b.Run(fmt.Sprintf("%s/%s/n=%d", c.name, e.name, n), func(b *testing.B) {
					b.SetBytes(int64(4 * n * c.arrays))
					for range b.N {
						c.run()
					}
				})
			}
		}
	}
}
