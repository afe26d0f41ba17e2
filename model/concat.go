package model

import (
	"fmt"

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
	out, err := NewTensorOf(env.Pool, memory.Activations, skip.DType, skip.N, skip.C+up.C, skip.H, skip.W)
	if err != nil {
		return nil, err
	}
	l.skipC, l.upC = skip.C, up.C
	plane := skip.H * skip.W * skip.DType.Size() // bytes per channel
	s, u, o := skip.buf.Bytes(), up.buf.Bytes(), out.buf.Bytes()
	for n := 0; n < skip.N && !env.dry(); n++ {
		copy(o[n*out.C*plane:], s[n*skip.C*plane:(n+1)*skip.C*plane])
		copy(o[(n*out.C+skip.C)*plane:], u[n*up.C*plane:(n+1)*up.C*plane])
	}
	return out, nil
}

// Backward splits dout into dskip and dup; it consumes dout.
func (l *Concat) Backward(env *Env, dout *Tensor) (dskip, dup *Tensor, err error) {
	defer env.Profile.begin(KindUpsample)()
	if dout.C != l.skipC+l.upC {
		panic(fmt.Sprintf("model: concat backward: dout has %d channels, want %d", dout.C, l.skipC+l.upC))
	}
	if dskip, err = NewTensorOf(env.Pool, memory.Activations, dout.DType, dout.N, l.skipC, dout.H, dout.W); err != nil {
		return nil, nil, err
	}
	if dup, err = NewTensorOf(env.Pool, memory.Activations, dout.DType, dout.N, l.upC, dout.H, dout.W); err != nil {
		dskip.Release()
		return nil, nil, err
	}
	plane := dout.H * dout.W * dout.DType.Size()
	g, s, u := dout.buf.Bytes(), dskip.buf.Bytes(), dup.buf.Bytes()
	for n := 0; n < dout.N && !env.dry(); n++ {
		copy(s[n*l.skipC*plane:(n+1)*l.skipC*plane], g[n*dout.C*plane:])
		copy(u[n*l.upC*plane:(n+1)*l.upC*plane], g[(n*dout.C+l.skipC)*plane:])
	}
	dout.Release()
	return dskip, dup, nil
}
