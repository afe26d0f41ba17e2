package model

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// offloaded is a tensor's values waiting in host memory (Env.Host) until a
// backward needs them on the device again (memory.offload).
type offloaded struct {
	n, c, d, h, w int
	dt            backend.DType
	buf           *memory.Buffer
	host          *memory.Pool
}

// offload copies t into the host pool; the caller keeps (and will release)
// its own reference to t, whose device memory is then free for the rest
// of the forward pass.
func offload(env *Env, t *Tensor) (*offloaded, error) {
	off, ok := env.Backend.(backend.Offloader)
	if !ok {
		return nil, fmt.Errorf("model: memory.offload: the %s backend has no host memory to offload to", env.Backend.Name())
	}
	buf, err := env.Host.Alloc(memory.Activations, int64(t.Len()*t.DType.Size()))
	if err != nil {
		return nil, err
	}
	off.ToHost(backend.View{Buf: buf, DT: t.DType, Len: t.Len()}, t.View())
	return &offloaded{n: t.N, c: t.C, d: t.D, h: t.H, w: t.W, dt: t.DType, buf: buf, host: env.Host}, nil
}

// restore copies the values back into a new device tensor (one reference,
// the caller's) and frees the host copy.
func (o *offloaded) restore(env *Env) (*Tensor, error) {
	t, err := NewVolume(env.Device, memory.Activations, o.dt, o.n, o.c, o.d, o.h, o.w)
	if err != nil {
		o.free()
		return nil, err
	}
	env.Backend.(backend.Offloader).ToDevice(t.View(), backend.View{Buf: o.buf, DT: o.dt, Len: t.Len()})
	o.free()
	return t, nil
}

// free gives the host copy back.
func (o *offloaded) free() {
	if o.buf != nil {
		o.host.MustFree(o.buf)
		o.buf = nil
	}
}
