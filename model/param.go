package model

import (
	"fmt"

	"github.com/memunet/memunet/memory"
	"gorgonia.org/tensor"
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
	workType  DType
}

func newParam(pool *memory.Pool, name string, trainable bool, shape ...int) (*Param, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	p := &Param{Name: name, Shape: shape, Trainable: trainable}
	var err error
	if p.value, err = pool.AllocFloat32Zeroed(memory.Params, n); err != nil {
		return nil, fmt.Errorf("allocating %s: %w", name, err)
	}
	if trainable {
		if p.grad, err = pool.AllocFloat32Zeroed(memory.Grads, n); err != nil {
			pool.MustFree(p.value)
			return nil, fmt.Errorf("allocating the gradient of %s: %w", name, err)
		}
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

// Data is the value, row-major in Shape.
func (p *Param) Data() []float32 { return p.value.Float32() }

// Grad is the accumulated gradient (nil unless Trainable).
func (p *Param) Grad() []float32 {
	if p.grad == nil {
		return nil
	}
	return p.grad.Float32()
}

// Dense views the value as a gorgonia tensor sharing its memory.
func (p *Param) Dense() *tensor.Dense { return p.value.Dense(p.Shape...) }

func (p *Param) free(pool *memory.Pool) {
	pool.MustFree(p.value)
	if p.grad != nil {
		pool.MustFree(p.grad)
	}
	p.dropWork(pool)
}

// setWork gives p a 16-bit working copy of type dt (or none for Float32)
// and fills it from the master.
func (p *Param) setWork(pool *memory.Pool, dt DType) error {
	if p.work != nil && p.workType == dt {
		p.syncWork()
		return nil
	}
	p.dropWork(pool)
	if dt == Float32 {
		return nil
	}
	buf, err := pool.AllocUint16(memory.Params, p.Len())
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
	if p.work == nil {
		return
	}
	w := &Tensor{N: 1, C: 1, H: 1, W: p.Len(), DType: p.workType, buf: p.work}
	fromFloat32(w, p.Data())
}

func (p *Param) workToFloat32(dst []float32) {
	w := &Tensor{N: 1, C: 1, H: 1, W: p.Len(), DType: p.workType, buf: p.work}
	toFloat32(dst, w)
}
