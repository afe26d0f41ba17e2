package model

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// Concat joins two tensors of the same storage type along channels, skip
// first (PyTorch's torch.cat([skip, up], dim=1) in the UNet decoder):
// skip (N,Cs,H,W), up (N,Cu,H,W), out (N,Cs+Cu,H,W).
type Concat struct {
	skipC, upC int
}

// Forward copies skip then up into out.
func (l *Concat) Forward(env *Env, skip, up *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindUpsample)()
	if skip.N != up.N || skip.H != up.H || skip.W != up.W || skip.DType != up.DType {
		panic(fmt.Sprintf("model: concat of %v and %v", skip, up))
	}
	out, err := NewTensor(env.Device, memory.Activations, skip.DType, skip.N, skip.C+up.C, skip.H, skip.W)
	if err != nil {
		return nil, err
	}
	l.skipC, l.upC = skip.C, up.C
	env.Backend.Concat(skip.N, out.View(), skip.View(), up.View())
	return out, nil
}

// Backward splits dout into dskip and dup; it consumes dout.
func (l *Concat) Backward(env *Env, dout *Tensor) (dskip, dup *Tensor, err error) {
	defer env.Profile.begin(KindUpsample)()
	if dout.C != l.skipC+l.upC {
		panic(fmt.Sprintf("model: concat backward: dout has %d channels, want %d", dout.C, l.skipC+l.upC))
	}
	if dskip, err = NewTensor(env.Device, memory.Activations, dout.DType, dout.N, l.skipC, dout.H, dout.W); err != nil {
		return nil, nil, err
	}
	if dup, err = NewTensor(env.Device, memory.Activations, dout.DType, dout.N, l.upC, dout.H, dout.W); err != nil {
		dskip.Release()
		return nil, nil, err
	}
	env.Backend.Split(dout.N, dskip.View(), dup.View(), dout.View())
	dout.Release()
	return dskip, dup, nil
}

// addInto adds src to dst elementwise (in float32, stored back in dst's type).
func addInto(env *Env, dst, src *Tensor) error {
	mustSameShape("add", dst, src)
	f := env.frame(backend.OpAdd)
	a, b := f.view(dst), f.view(src)
	out := f.writer(dst)
	if f.err == nil {
		env.Backend.Add(out, a, b)
	}
	return f.finish()
}
