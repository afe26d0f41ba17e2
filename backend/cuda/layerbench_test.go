package cuda

import (
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// TestSeedUNetConvolutions: the per-layer benchmark's convolutions are the
// seed UNet's: their FLOPs, each shape counted as often as it occurs, add
// up to the model's own count of a forward pass, at both benchmark widths.
func TestSeedUNetConvolutions(t *testing.T) {
	for _, c := range []struct{ base, size int }{{16, 128}, {64, 64}} {
		dev := model.NewDevice(noop.New(cpu.New()), memory.Options{})
		m, err := model.New(dev, model.Config{Arch: model.Arch{InChannels: 3, Classes: 4, Base: c.base, Depth: 4}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := m.FLOPs(c.size, c.size)
		got, convs := 0.0, 0
		layers := backend.SeedUNetConvolutions(c.base, c.size, 1)
		for _, l := range layers {
			s := l.Conv
			got += float64(l.Count) * 2 * float64(s.OH()*s.OW()*s.OC*s.C*s.K*s.K)
			convs += l.Count
		}
		if got != want || convs != 19 || !layers[0].NoInputGrad || layers[1].NoInputGrad {
			t.Errorf("base %d, %d px: %d convolutions of %v FLOPs, the model's %v", c.base, c.size, convs, got, want)
		}
	}
}
