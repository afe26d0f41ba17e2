package model

import (
	"fmt"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/memory"
)

// TestDryRunMatchesRealStep: steps through the planning backend (no memory,
// no compute) make exactly the allocations of the real steps on the CPU, so
// the pool's statistics are identical byte for byte: the basis of memunet
// plan. The planning pool has no memory behind its buffers, so a layer that
// touched one outside the backend would fail here.
func TestDryRunMatchesRealStep(t *testing.T) {
	for _, v := range utVariants {
		for _, prec := range []backend.DType{backend.Float32, backend.Float16} {
			for _, ck := range [][]int{nil, {0, 2}} {
				t.Run(fmt.Sprintf("%s/%s/%s/%v", v.norm, v.up, prec, ck), func(t *testing.T) {
					cfg := Config{Arch: Arch{InChannels: 3, Classes: 3, Base: 4, Depth: 2, Up: v.up, Norm: v.norm, Groups: 2}, Recompute: ck}
					host, target := utBatch(t, testDevice(), 1, 2, 3, 16, 16, 3)
					images := host.Read()
					stats := func(b backend.Backend) []memory.Stats {
						dev := NewDevice(b, memory.Options{})
						m, err := New(dev, cfg, 1)
						if err != nil {
							t.Fatal(err)
						}
						if err := m.SetPrecision(prec); err != nil {
							t.Fatal(err)
						}
						env := &Env{Device: dev, Training: true, Precision: prec}
						x, err := NewTensor(dev, memory.Activations, backend.Float32, 2, 3, 16, 16)
						if err != nil {
							t.Fatal(err)
						}
						x.Write(images)
						var out []memory.Stats
						for range 2 {
							vtStep(t, env, m, x, target, 1)
							out = append(out, dev.Pool.Stats())
						}
						eval := &Env{Device: dev, Precision: prec}
						dev.Pool.ResetPeak()
						logits, err := m.Forward(eval, x)
						if err != nil {
							t.Fatal(err)
						}
						logits.Release()
						return append(out, dev.Pool.Stats())
					}
					real, dry := stats(cpu.New()), stats(noop.New(cpu.New()))
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
