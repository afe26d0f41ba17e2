package model

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// Param is a named model tensor: a trainable parameter with its gradient, or
// (Trainable false) a buffer such as BatchNorm's running mean, without one.
type Param struct {
	// Name is the PyTorch state_dict key, e.g. "down1.maxpool_conv.1.double_conv.0.weight".
	Name      string
	Shape     []int
	Trainable bool
	value     *memory.Buffer // params category: the fp32 master
	grad      *memory.Buffer // grads category; nil unless Trainable
	work      *memory.Buffer // params category: 16-bit working copy used by the kernels, or nil
	workType  backend.DType
	dev       *Device
}

// newParam allocates p's value (and gradient) filled with fill (and 0).
func newParam(dev *Device, name string, trainable bool, fill float32, shape ...int) (*Param, error) {
	p := &Param{Name: name, Shape: shape, Trainable: trainable, dev: dev}
	var err error
	if p.value, err = dev.Pool.Alloc(memory.Params, int64(4*p.Len())); err != nil {
		return nil, fmt.Errorf("allocating %s: %w", name, err)
	}
	dev.Backend.Fill(p.View(), fill)
	if trainable {
		if p.grad, err = dev.Pool.Alloc(memory.Grads, int64(4*p.Len())); err != nil {
			dev.Pool.MustFree(p.value)
			return nil, fmt.Errorf("allocating the gradient of %s: %w", name, err)
		}
		dev.Backend.Fill(p.GradView(), 0)
	}
	return p, nil
}

// Len is the number of values (the product of Shape).
func (p *Param) Len() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// View is the fp32 value, row-major in Shape.
func (p *Param) View() backend.View {
	return backend.View{Buf: p.value, DT: backend.Float32, Len: p.Len()}
}

// GradView is the accumulated gradient (none unless Trainable).
func (p *Param) GradView() backend.View {
	if p.grad == nil {
		return backend.View{}
	}
	return backend.View{Buf: p.grad, DT: backend.Float32, Len: p.Len()}
}

// WorkView is the 16-bit working copy (none without one).
func (p *Param) WorkView() backend.View {
	if p.work == nil {
		return backend.View{}
	}
	return backend.View{Buf: p.work, DT: p.workType, Len: p.Len()}
}

// Read returns a host copy of the value.
func (p *Param) Read() []float32 { return backend.DownloadFloat32(p.dev.Backend, p.View()) }

// ReadInto copies the value into dst (Len values), a buffer the caller
// reuses.
func (p *Param) ReadInto(dst []float32) {
	if v := p.View(); v.DT == backend.Float32 {
		backend.DownloadFloat32Into(p.dev.Backend, dst, v)
		return
	}
	copy(dst, p.Read())
}

// ReadGrad returns a host copy of the gradient (nil unless Trainable).
func (p *Param) ReadGrad() []float32 {
	if p.grad == nil {
		return nil
	}
	return backend.DownloadFloat32(p.dev.Backend, p.GradView())
}

// Write uploads vals (Len values) into the value and refreshes the working
// copy, if any, from it.
func (p *Param) Write(vals []float32) {
	backend.UploadFloat32(p.dev.Backend, p.View(), vals)
	p.syncWork()
}

func (p *Param) free(pool *memory.Pool) {
	pool.MustFree(p.value)
	if p.grad != nil {
		pool.MustFree(p.grad)
	}
	p.dropWork(pool)
}

// setWork gives p a 16-bit working copy of type dt (or none for Float32)
// and fills it from the master.
func (p *Param) setWork(dt backend.DType) error {
	if p.work != nil && p.workType == dt {
		p.syncWork()
		return nil
	}
	p.dropWork(p.dev.Pool)
	if dt == backend.Float32 {
		return nil
	}
	buf, err := p.dev.Pool.Alloc(memory.Params, int64(2*p.Len()))
	if err != nil {
		return fmt.Errorf("allocating the %s working copy of %s: %w", dt, p.Name, err)
	}
	p.work, p.workType = buf, dt
	p.syncWork()
	return nil
}

func (p *Param) dropWork(pool *memory.Pool) {
	if p.work != nil {
		pool.MustFree(p.work)
		p.work = nil
	}
}

// syncWork rounds the master into the working copy, if there is one.
func (p *Param) syncWork() {
	if p.work != nil {
		p.dev.Backend.Convert(p.WorkView(), p.View())
	}
}
