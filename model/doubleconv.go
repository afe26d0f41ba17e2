package model

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// DoubleConv is the UNet's block, PyTorch's double_conv nn.Sequential:
//
//	in (N,C,H,W) -> conv1 -> norm1 -> relu1 -> conv2 -> norm2 -> relu2 -> out (N,OC,H,W)
//
// 3x3 convolutions with padding 1, so every part after conv1 is (N,OC,H,W);
// the convolutions have a bias only without a norm (norm: none, norm1 and
// norm2 nil). The parts are named, and the recompute policy (recompute.go)
// addresses them by name only; parts lists them in forward order with any
// other layer a block holds, which a rebuild between two named parts runs
// again (span), so a new kind of layer needs no change to that policy.
type DoubleConv struct {
	conv1 *Conv2d
	norm1 norm
	relu1 *ReLU
	conv2 *Conv2d
	norm2 norm
	relu2 *ReLU
	parts Sequential
}

// newDoubleConv builds a block of inC to outC channels named as PyTorch's
// state_dict has it: name.0 the first convolution, then the norm if any,
// the ReLU (which has no parameters, but a number), the second convolution,
// and so on.
func newDoubleConv(dev *Device, cfg Config, name string, inC, outC int) (*DoubleConv, error) {
	b := &DoubleConv{}
	idx := 0
	next := func() string {
		idx++
		return fmt.Sprintf("%s.%d", name, idx-1)
	}
	for _, half := range []struct {
		inC  int
		conv **Conv2d
		norm *norm
		relu **ReLU
	}{{inC, &b.conv1, &b.norm1, &b.relu1}, {outC, &b.conv2, &b.norm2, &b.relu2}} {
		newConv := NewConv2d
		if cfg.Volumes() {
			newConv = NewConv3d
		}
		conv, err := newConv(dev, next(), half.inC, outC, 3, 1, cfg.Norm == NormNone)
		if err != nil {
			return nil, err
		}
		*half.conv = conv
		b.parts.Layers = append(b.parts.Layers, conv)
		if cfg.Norm != NormNone {
			if *half.norm, err = newNorm(dev, cfg, next(), outC); err != nil {
				return nil, err
			}
			b.parts.Layers = append(b.parts.Layers, *half.norm)
		}
		next() // the ReLU's number
		*half.relu = &ReLU{}
		b.parts.Layers = append(b.parts.Layers, *half.relu)
	}
	return b, nil
}

// newNorm is cfg's norm (batch or group) over c channels.
func newNorm(dev *Device, cfg Config, name string, c int) (norm, error) {
	if cfg.Norm == NormGroup {
		return NewGroupNorm(dev, name, min(cfg.Groups, c), c)
	}
	return NewBatchNorm2d(dev, name, c)
}

// Forward runs the parts in order, in (N,C,H,W) -> out (N,OC,H,W); each
// keeps what the recompute policy lets it keep.
func (b *DoubleConv) Forward(env *Env, in *Tensor) (*Tensor, error) { return b.parts.Forward(env, in) }

// Backward runs the parts' backward in reverse, dout (N,OC,H,W) -> din
// (N,C,H,W) (nil when conv1 has NoInputGrad); it consumes dout.
func (b *DoubleConv) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	return b.parts.Backward(env, dout)
}

// Params lists the parts' parameters in state_dict order.
func (b *DoubleConv) Params() []*Param { return b.parts.Params() }

// Out is (N,OC,H,W) and the two convolutions' FLOPs.
func (b *DoubleConv) Out(in backend.Shape4) (backend.Shape4, float64) { return b.parts.Out(in) }

// Forget forgets every part's saved references.
func (b *DoubleConv) Forget() { b.parts.Forget() }

// span is the parts after from up to, not including, to: from nil starts
// at the block's input, to nil runs to its output. A rebuild that starts
// from one named part's output and ends at another's input runs them
// again.
func (b *DoubleConv) span(from, to Layer) []Layer {
	i, j := 0, len(b.parts.Layers)
	if from != nil {
		i = b.index(from) + 1
	}
	if to != nil {
		j = b.index(to)
	}
	return b.parts.Layers[i:j]
}

// through is the parts up to and including part.
func (b *DoubleConv) through(part Layer) []Layer { return b.parts.Layers[:b.index(part)+1] }

func (b *DoubleConv) index(part Layer) int {
	for i, l := range b.parts.Layers {
		if l == part {
			return i
		}
	}
	panic("model: a DoubleConv's named part is missing from its parts")
}
