package model

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// The UNet's parameters and buffers: 16-bit working copies, saving and
// restoring the buffers, the BatchNorms, zeroing and freeing.

// SetPrecision gives every convolution weight a working copy in dt (Float16
// or BFloat16; Float32 drops the copies), rounded from the fp32 master and
// used by the kernels from then on. The copies are allocated as params.
func (m *UNet) SetPrecision(dt backend.DType) error {
	for _, p := range m.params {
		if p.Trainable && len(p.Shape) == 4 {
			if err := p.setWork(dt); err != nil {
				return err
			}
		}
	}
	return nil
}

// SyncWorkingWeights rounds the fp32 masters into the 16-bit working copies
// (after an optimizer step); a no-op without them.
func (m *UNet) SyncWorkingWeights() {
	for _, p := range m.params {
		p.syncWork()
	}
}

// SaveBuffers copies the non-trainable buffers (BatchNorm running
// statistics and batch counts), which a forward in training mode updates, and
// returns a function that puts them back: for retrying a failed step exactly.
// The copies are small and live in host memory, outside the pool: where the
// device copies to host memory directly (backend.Offloader: pinned memory
// on a GPU), they are copied there beside the computation, so a step that
// saves them does not wait for the device; elsewhere they are read.
func (m *UNet) SaveBuffers() (restore func()) {
	bns := m.BatchNorms()
	counts := make([]int64, len(bns))
	for i, bn := range bns {
		counts[i] = bn.NumBatchesTracked
	}
	putCounts := func() {
		for i, bn := range bns {
			bn.NumBatchesTracked = counts[i]
		}
	}
	if off, ok := m.dev.Backend.(backend.Offloader); ok && m.snapshotOn(off) {
		bufs := m.buffers()
		for i, p := range bufs {
			off.ToHost(m.saved[i], p.View())
		}
		return func() {
			for i, p := range bufs {
				off.ToDevice(p.View(), m.saved[i])
			}
			putCounts()
		}
	}
	var saved [][]float32
	for _, p := range m.buffers() {
		saved = append(saved, p.Read())
	}
	return func() {
		for i, p := range m.buffers() {
			p.Write(saved[i])
		}
		putCounts()
	}
}

// buffers are the non-trainable parameters, in order.
func (m *UNet) buffers() []*Param {
	var out []*Param
	for _, p := range m.params {
		if !p.Trainable {
			out = append(out, p)
		}
	}
	return out
}

// snapshotOn makes SaveBuffers' host views in off's memory the first time;
// false where that memory is not to be had (SaveBuffers then reads).
func (m *UNet) snapshotOn(off backend.Offloader) bool {
	if m.snapshot != nil {
		return true
	}
	pool := memory.NewPool(off.HostAllocator(), memory.Options{})
	var saved []backend.View
	for _, p := range m.buffers() {
		v := p.View()
		buf, err := pool.Alloc(memory.Params, int64(v.Bytes()))
		if err != nil {
			pool.Release()
			return false
		}
		saved = append(saved, backend.View{Buf: buf, DT: v.DT, Len: v.Len})
	}
	m.snapshot, m.saved = pool, saved
	return true
}

// BatchNorms lists the network's BatchNorm2d layers in state_dict order
// (none unless Config.Norm is batch), for saving and restoring their
// NumBatchesTracked, which is not a Param. The state_dict key of a layer's
// count is its Weight's name with ".weight" replaced by ".num_batches_tracked".
func (m *UNet) BatchNorms() []*BatchNorm2d {
	var out []*BatchNorm2d
	for _, b := range m.blocks() {
		for _, n := range []norm{b.norm1, b.norm2} {
			if bn, ok := n.(*BatchNorm2d); ok {
				out = append(out, bn)
			}
		}
	}
	return out
}

// Params lists every parameter and buffer in state_dict order.
func (m *UNet) Params() []*Param { return m.params }

// NumParams counts trainable values (what PyTorch's
// sum(p.numel() for p in model.parameters()) gives).
func (m *UNet) NumParams() int {
	n := 0
	for _, p := range m.params {
		if p.Trainable {
			n += p.Len()
		}
	}
	return n
}

// ZeroGrad sets every gradient to 0.
func (m *UNet) ZeroGrad() {
	for _, p := range m.params {
		if p.Trainable {
			m.dev.Backend.Fill(p.GradView(), 0)
		}
	}
}

// Free returns parameters and gradients to the pool.
func (m *UNet) Free() {
	for _, p := range m.params {
		p.free(m.dev.Pool)
	}
	m.params = nil
	if m.snapshot != nil {
		for _, v := range m.saved {
			m.snapshot.MustFree(v.Buf)
		}
		m.snapshot.Release()
		m.snapshot, m.saved = nil, nil
	}
}
