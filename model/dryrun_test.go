package model

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/memory"
)

// TestDryRunMatchesRealStep: a step on a virtual pool (no memory, no
// compute) makes exactly the allocations of the real step, so its statistics
// are identical byte for byte: the basis of memunet plan.
func TestDryRunMatchesRealStep(t *testing.T) {
	for _, v := range utVariants {
		for _, prec := range []DType{Float32, Float16} {
			for _, ck := range [][]int{nil, {0, 2}} {
				t.Run(fmt.Sprintf("%s/%s/%s/%v", v.norm, v.up, prec, ck), func(t *testing.T) {
					cfg := Config{InChannels: 3, Classes: 3, Base: 4, Depth: 2, Up: v.up, Norm: v.norm, Groups: 2, Checkpoint: ck}
					stats := func(virtual bool) []memory.Stats {
						pool := memory.NewPool(memory.Options{Virtual: virtual})
						m, err := New(pool, cfg, 1)
						if err != nil {
							t.Fatal(err)
						}
						if err := m.SetPrecision(prec); err != nil {
							t.Fatal(err)
						}
						env := &Env{Pool: pool, Training: true, Precision: prec}
						x, target := utBatch(t, memory.NewPool(memory.Options{}), 1, 2, 3, 16, 16, 3)
						if virtual {
							x, _ = NewTensor(pool, memory.Activations, 2, 3, 16, 16)
						} else {
							x2, _ := NewTensor(pool, memory.Activations, 2, 3, 16, 16)
							copy(x2.Data(), x.Data())
							x = x2
						}
						var out []memory.Stats
						for range 2 {
							vtStep(t, env, m, x, target, 1)
							out = append(out, pool.Stats())
						}
						eval := &Env{Pool: pool, Precision: prec}
						pool.ResetPeak()
						logits, err := m.Forward(eval, x)
						if err != nil {
							t.Fatal(err)
						}
						logits.Release()
						return append(out, pool.Stats())
					}
					real, dry := stats(false), stats(true)
					for i := range real {
						if real[i] != dry[i] {
							t.Errorf("phase %d: dry run stats\n%+v\nreal\n%+v", i, dry[i], real[i])
						}
					}
				})
			}
		}
	}
}
