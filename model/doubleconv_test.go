package model

import (
	"fmt"
	"slices"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// dropout0 is a test-only layer, PyTorch's Dropout(p=0): out = in. In
// training it keeps its (empty) mask for backward, which fails without a
// training forward before it, so a block that recomputes must run it
// again; quiet counts the forwards that keep nothing (a rebuild's).
type dropout0 struct {
	kept  bool
	quiet int
}

// Forward: in (N,C,H,W) -> out (N,C,H,W), the same tensor.
func (l *dropout0) Forward(env *Env, in *Tensor) (*Tensor, error) {
	switch {
	case env.saves():
		if l.kept {
			panic("dropout0: kept twice")
		}
		l.kept = true
	case env.Training:
		l.quiet++
	}
	return in.Retain(), nil
}

// Backward: dout (N,C,H,W) -> din = dout (nil stays nil).
func (l *dropout0) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	if !l.kept {
		panic("dropout0: backward without a training forward")
	}
	l.kept = false
	return dout, nil
}

func (l *dropout0) Params() []*Param                                { return nil }
func (l *dropout0) Out(in backend.Shape4) (backend.Shape4, float64) { return sameShape(in) }
func (l *dropout0) Forget()                                         { l.kept = false }

// insertAfter puts l into b's parts after the part after (nil: first).
func insertAfter(b *DoubleConv, after, l Layer) {
	i := 0
	if after != nil {
		i = b.index(after) + 1
	}
	b.parts.Layers = slices.Insert(b.parts.Layers, i, l)
}

// TestDoubleConvTakesANewLayer: a layer of a new kind inserted into every
// DoubleConv, at each place in the block, needs no change to the recompute
// policy: a Dropout(0) trains bit for bit as the blocks without it, with
// the same activation peak, whichever levels recompute, and where conv2's
// input is rebuilt from norm1 the rebuild runs the inserted layer again.
func TestDoubleConvTakesANewLayer(t *testing.T) {
	places := []struct {
		name   string
		after  func(b *DoubleConv) Layer
		middle bool // between norm1 and conv2
	}{
		{"first", func(b *DoubleConv) Layer { return nil }, false},
		{"after-conv1", func(b *DoubleConv) Layer { return b.conv1 }, false},
		{"after-norm1", func(b *DoubleConv) Layer { return b.norm1 }, true},
		{"after-relu1", func(b *DoubleConv) Layer { return b.relu1 }, true},
		{"after-conv2", func(b *DoubleConv) Layer { return b.conv2 }, false},
		{"after-relu2", func(b *DoubleConv) Layer { return b.relu2 }, false},
	}
	for _, v := range utVariants {
		for _, levels := range [][]int{nil, RecomputeAll(2), {1}} {
			cfg := Config{Arch: Arch{InChannels: 3, Classes: 3, Base: 4, Depth: 2, Up: v.up, Norm: v.norm, Groups: 2}, Recompute: levels}
			plainLoss, plain, plainStats := vtTrain(t, cfg, nil)
			for _, p := range places {
				if v.norm == NormNone && p.name == "after-norm1" {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%v/%s", v.norm, v.up, levels, p.name), func(t *testing.T) {
					inserted := map[*DoubleConv]*dropout0{}
					loss, got, stats := vtTrain(t, cfg, func(m *UNet) {
						for _, b := range m.blocks() {
							inserted[b] = &dropout0{}
							insertAfter(b, p.after(b), inserted[b])
						}
					})
					vtSameBits(t, "with the inserted layer", loss, plainLoss, got, plain)
					for _, c := range []memory.Category{memory.Activations, memory.Workspace} {
						if a, b := stats.ByCategory[c].Peak, plainStats.ByCategory[c].Peak; a != b {
							t.Errorf("%s peak %d bytes with the inserted layer, %d without", c, a, b)
						}
					}
					for b, d := range inserted {
						if p.middle && b.conv2.Source != nil && d.quiet != len(plainLoss) {
							t.Errorf("conv2's input was rebuilt %d times through the inserted layer in %d steps", d.quiet, len(plainLoss))
						}
					}
				})
			}
		}
	}
}
