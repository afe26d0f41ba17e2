package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// TestUnscaleCheck: every gradient scaled by inv (as a loop multiplying
// each value would) and the check false exactly where one value is ±Inf
// or NaN, wherever it lies: either side of the 8-value blocks, in the
// tail, in a later chunk of a large gradient; sizes odd and even.
func TestUnscaleCheck(t *testing.T) {
	c := New()
	pool := memory.NewPool(HostAllocator{}, memory.Options{})
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 7, 8, 9, 17, 100, 1<<15 + 3, 3<<15 + 11} {
		for _, bad := range []float32{0, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
			for _, at := range []int{0, n / 2, n - 1, n - 9} {
				if at < 0 || bad == 0 && at != 0 {
					continue
				}
				for _, inv := range []float32{1, 0.5, 3e-5} {
					vals := make([]float32, n)
					for i := range vals {
						vals[i] = float32(rng.NormFloat64() * 1e4)
					}
					if bad != 0 {
						vals[at] = bad
					}
					buf, err := pool.Alloc(memory.Grads, int64(4*n))
					if err != nil {
						t.Fatal(err)
					}
					g := backend.View{Buf: buf, DT: backend.Float32, Len: n}
					backend.UploadFloat32(c, g, vals)
					name := fmt.Sprintf("n=%d bad=%v at %d inv=%v", n, bad, at, inv)
					if got := c.UnscaleCheck([]backend.View{g}, inv); got != (bad == 0) {
						t.Errorf("%s: finite = %v", name, got)
					}
					for i, v := range backend.DownloadFloat32(c, g) {
						want := vals[i] * inv
						if math.Float32bits(v) != math.Float32bits(want) && !(v != v && want != want) {
							t.Fatalf("%s: [%d] = %v, want %v", name, i, v, want)
						}
					}
					pool.MustFree(buf)
				}
			}
		}
	}
}
