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
	if skip.N != up.N || skip.D != up.D || skip.H != up.H || skip.W != up.W || skip.DType != up.DType {
		panic(fmt.Sprintf("model: concat of %v and %v", skip, up))
	}
	out, err := tensorLike(env.Device, skip.DType, skip, skip.C+up.C)
	if err != nil {
		return nil, err
	}
	l.skipC, l.upC = skip.C, up.C
	env.Backend.Concat(skip.N, out.View(), skip.View(), up.View())
	return out, nil
}

// upsampled is up as a bilinear Upsample2 whose output this Concat can
// take in the same backend operation (UpsampleConcat) for tensors of dt,
// or nil: where the backend takes them as they are (staged ones go
// through fp32 copies that the two operations make separately).
func (l *Concat) upsampled(env *Env, up Layer, dt backend.DType) *Upsample2 {
	u, ok := up.(*Upsample2)
	if !ok || dt != backend.Float32 && env.Backend.Stages(backend.OpUpsample, dt) {
		return nil
	}
	return u
}

// forwardUp is Forward(skip, up.Forward(below)) without the upsampled
// tensor (UpsampleConcat, the same bits): less memory, one pass less.
func (l *Concat) forwardUp(env *Env, skip *Tensor, up *Upsample2, below *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindUpsample)()
	if skip.N != below.N || skip.H != 2*below.H || skip.W != 2*below.W || skip.DType != below.DType {
		panic(fmt.Sprintf("model: upsample and concat of %v and %v", skip, below))
	}
	out, err := NewTensor(env.Device, memory.Activations, skip.DType, skip.N, skip.C+below.C, skip.H, skip.W)
	if err != nil {
		return nil, err
	}
	l.skipC, l.upC = skip.C, below.C
	up.inShape = below.shape4()
	env.Backend.UpsampleConcat(up.inShape, out.View(), skip.View(), below.View())
	return out, nil
}

// backwardUp is Backward then up.Backward of dup without dup
// (UpsampleConcatBack): dskip, and the gradient of up's input.
func (l *Concat) backwardUp(env *Env, dout *Tensor, up *Upsample2) (dskip, din *Tensor, err error) {
	defer env.Profile.begin(KindUpsample)()
	s := up.inShape
	if dout.C != l.skipC+l.upC || s.C != l.upC {
		panic(fmt.Sprintf("model: upsample and concat backward: dout has %d channels, want %d", dout.C, l.skipC+l.upC))
	}
	if dskip, err = NewTensor(env.Device, memory.Activations, dout.DType, dout.N, l.skipC, dout.H, dout.W); err != nil {
		return nil, nil, err
	}
	if din, err = env.newActivation(s.N, s.C, s.H, s.W); err != nil {
		dskip.Release()
		return nil, nil, err
	}
	env.Backend.UpsampleConcatBack(s, dskip.View(), din.View(), dout.View())
	dout.Release()
	return dskip, din, nil
}

// Backward splits dout into dskip and dup; it consumes dout.
func (l *Concat) Backward(env *Env, dout *Tensor) (dskip, dup *Tensor, err error) {
	defer env.Profile.begin(KindUpsample)()
	if dout.C != l.skipC+l.upC {
		panic(fmt.Sprintf("model: concat backward: dout has %d channels, want %d", dout.C, l.skipC+l.upC))
	}
	if dskip, err = tensorLike(env.Device, dout.DType, dout, l.skipC); err != nil {
		return nil, nil, err
	}
	if dup, err = tensorLike(env.Device, dout.DType, dout, l.upC); err != nil {
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
