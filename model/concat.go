package model

import (
	"fmt"

	"github.com/memunet/memunet/memory"
)

// Concat joins two tensors along channels, skip first (PyTorch's
// torch.cat([skip, up], dim=1) in the UNet decoder): skip (N,Cs,H,W),
// up (N,Cu,H,W), out (N,Cs+Cu,H,W).
type Concat struct {
	skipC, upC int
}

// Forward copies skip then up into out.
func (l *Concat) Forward(env *Env, skip, up *Tensor) (*Tensor, error) {
	if skip.N != up.N || skip.H != up.H || skip.W != up.W {
		panic(fmt.Sprintf("model: concat of %v and %v", skip.Shape(), up.Shape()))
	}
	out, err := NewTensor(env.Pool, memory.Activations, skip.N, skip.C+up.C, skip.H, skip.W)
	if err != nil {
		return nil, err
	}
	l.skipC, l.upC = skip.C, up.C
	HW := skip.H * skip.W
	s, u, o := skip.Data(), up.Data(), out.Data()
	for n := 0; n < skip.N; n++ {
		copy(o[n*out.C*HW:], s[n*skip.C*HW:(n+1)*skip.C*HW])
		copy(o[(n*out.C+skip.C)*HW:], u[n*up.C*HW:(n+1)*up.C*HW])
	}
	return out, nil
}

// Backward splits dout into dskip and dup; it consumes dout.
func (l *Concat) Backward(env *Env, dout *Tensor) (dskip, dup *Tensor, err error) {
	if dout.C != l.skipC+l.upC {
		panic(fmt.Sprintf("model: concat backward: dout has %d channels, want %d", dout.C, l.skipC+l.upC))
	}
	if dskip, err = NewTensor(env.Pool, memory.Activations, dout.N, l.skipC, dout.H, dout.W); err != nil {
		return nil, nil, err
	}
	if dup, err = NewTensor(env.Pool, memory.Activations, dout.N, l.upC, dout.H, dout.W); err != nil {
		dskip.Release()
		return nil, nil, err
	}
	HW := dout.H * dout.W
	g, s, u := dout.Data(), dskip.Data(), dup.Data()
	for n := 0; n < dout.N; n++ {
		copy(s[n*l.skipC*HW:(n+1)*l.skipC*HW], g[n*dout.C*HW:])
		copy(u[n*l.upC*HW:(n+1)*l.upC*HW], g[(n*dout.C+l.skipC)*HW:])
	}
	dout.Release()
	return dskip, dup, nil
}
