package optim

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// Kind names an optimizer (config key train.optimizer).
type Kind string

const (
	KindAdam    Kind = "adam"    // torch.optim.Adam: weight decay as L2 on the gradient
	KindAdamW   Kind = "adamw"   // torch.optim.AdamW: decoupled weight decay
	KindSGD     Kind = "sgd"     // torch.optim.SGD: momentum, dampening, Nesterov
	KindRMSprop Kind = "rmsprop" // torch.optim.RMSprop (centered off): milesial's default
)

// Kinds lists the optimizers.
func Kinds() []Kind { return []Kind{KindAdam, KindAdamW, KindSGD, KindRMSprop} }

// Config is an optimizer's settings: Betas and Eps for Adam and AdamW,
// Momentum, Dampening and Nesterov for SGD (and Momentum for RMSprop),
// Alpha and Eps for RMSprop.
type Config struct {
	Kind                Kind
	LR, WeightDecay     float64
	Beta1, Beta2, Eps   float64
	Momentum, Dampening float64
	Nesterov            bool
	Alpha               float64
}

// Optimizer updates the trainable parameters from their gradients; its
// per-parameter state lives on the device (optimizer category).
type Optimizer interface {
	// Update takes one step at rate lr. With an entry (a step queued on
	// the device, backend.StepQueue) the device decides: its kernels skip
	// a step whose gradients were not finite and take the step count from
	// there, and the host's count stays until the caller, having read
	// the queue, advances it by the steps taken (SetSteps).
	Update(lr float64, at backend.StepEntry)
	// Steps is the steps taken; SetSteps restores it from a checkpoint.
	Steps() int64
	SetSteps(int64)
	// BiasCorrections are, for the n step counts after Steps, the pairs
	// a queued step's factors need (backend.QueueStart): Adam's; none for
	// the others.
	BiasCorrections(n int) []float64
	// Params are the parameters it updates.
	Params() []*model.Param
	// State is each parameter's state tensors, named as PyTorch's
	// optimizer state_dict names them (exp_avg, momentum_buffer, ...).
	State() []StateTensor
	Config() Config
	Free()
}

// StateTensor is one state tensor of one parameter.
type StateTensor struct {
	Param *model.Param
	Name  string // e.g. "exp_avg": saved as state.<param>.<name>
	View  backend.View
}

// New makes the optimizer cfg names over params (the trainable ones), its
// state zeroed.
func New(dev *model.Device, params []*model.Param, cfg Config) (Optimizer, error) {
	switch cfg.Kind {
	case KindSGD:
		return newSGD(dev, params, cfg)
	case KindRMSprop:
		return newRMSprop(dev, params, cfg)
	}
	a, err := NewAdam(dev, params, AdamConfig{LR: cfg.LR, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps, WeightDecay: cfg.WeightDecay})
	if err != nil {
		return nil, err
	}
	a.Decoupled = cfg.Kind == KindAdamW
	return a, nil
}

// stateBuffers allocates n zeroed fp32 buffers of each trainable
// parameter's size; on failure it frees what it allocated.
func stateBuffers(dev *model.Device, params []*model.Param, n int) ([]*model.Param, [][]backend.View, error) {
	var ps []*model.Param
	var views [][]backend.View
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		var vs []backend.View
		for range n {
			buf, err := dev.Pool.Alloc(memory.Optimizer, int64(4*p.Len()))
			if err != nil {
				freeState(dev, append(views, vs))
				return nil, nil, err
			}
			v := backend.Whole(buf, backend.Float32)
			dev.Backend.Fill(v, 0)
			vs = append(vs, v)
		}
		ps, views = append(ps, p), append(views, vs)
	}
	return ps, views, nil
}

// freeState gives stateBuffers' buffers back to the pool.
func freeState(dev *model.Device, views [][]backend.View) {
	for _, vs := range views {
		for _, v := range vs {
			dev.Pool.MustFree(v.Buf)
		}
	}
}

// SGD is torch.optim.SGD (backend.SGDStep); with momentum, one buffer per
// parameter.
type SGD struct {
	cfg    Config
	step   int64
	params []*model.Param
	buf    [][]backend.View
	dev    *model.Device
}

func newSGD(dev *model.Device, params []*model.Param, cfg Config) (*SGD, error) {
	n := 0
	if cfg.Momentum != 0 {
		n = 1
	}
	ps, bufs, err := stateBuffers(dev, params, n)
	if err != nil {
		return nil, err
	}
	return &SGD{cfg: cfg, params: ps, buf: bufs, dev: dev}, nil
}

func (s *SGD) Update(lr float64, at backend.StepEntry) {
	if at == 0 {
		s.step++
	}
	a := backend.SGDStep{LR: float32(lr), Momentum: float32(s.cfg.Momentum), Dampening: float32(s.cfg.Dampening),
		WeightDecay: float32(s.cfg.WeightDecay), Nesterov: s.cfg.Nesterov, First: s.step == 1, Entry: at}
	for i, p := range s.params {
		var buf backend.View
		if len(s.buf[i]) > 0 {
			buf = s.buf[i][0]
		}
		s.dev.Backend.SGD(a, p.View(), p.GradView(), buf)
	}
}

func (s *SGD) Steps() int64                  { return s.step }
func (s *SGD) BiasCorrections(int) []float64 { return nil }
func (s *SGD) SetSteps(n int64)              { s.step = n }
func (s *SGD) Params() []*model.Param        { return s.params }
func (s *SGD) Config() Config                { return s.cfg }

func (s *SGD) State() []StateTensor {
	var out []StateTensor
	for i, p := range s.params {
		for _, v := range s.buf[i] {
			out = append(out, StateTensor{p, "momentum_buffer", v})
		}
	}
	return out
}

func (s *SGD) Free() {
	freeState(s.dev, s.buf)
	s.buf, s.params = nil, nil
}

// RMSprop is torch.optim.RMSprop, centered off (backend.RMSpropStep): a
// square average per parameter, and a momentum buffer with momentum.
type RMSprop struct {
	cfg    Config
	step   int64
	params []*model.Param
	bufs   [][]backend.View // square_avg, then momentum_buffer
	dev    *model.Device
}

func newRMSprop(dev *model.Device, params []*model.Param, cfg Config) (*RMSprop, error) {
	n := 1
	if cfg.Momentum != 0 {
		n = 2
	}
	ps, bufs, err := stateBuffers(dev, params, n)
	if err != nil {
		return nil, err
	}
	return &RMSprop{cfg: cfg, params: ps, bufs: bufs, dev: dev}, nil
}

func (r *RMSprop) Update(lr float64, at backend.StepEntry) {
	if at == 0 {
		r.step++
	}
	a := backend.RMSpropStep{LR: float32(lr), Alpha: float32(r.cfg.Alpha), OneMinusAlpha: float32(1 - r.cfg.Alpha),
		Eps: float32(r.cfg.Eps), WeightDecay: float32(r.cfg.WeightDecay), Momentum: float32(r.cfg.Momentum), Entry: at}
	for i, p := range r.params {
		var buf backend.View
		if len(r.bufs[i]) > 1 {
			buf = r.bufs[i][1]
		}
		r.dev.Backend.RMSprop(a, p.View(), p.GradView(), r.bufs[i][0], buf)
	}
}

func (r *RMSprop) Steps() int64                  { return r.step }
func (r *RMSprop) BiasCorrections(int) []float64 { return nil }
func (r *RMSprop) SetSteps(n int64)              { r.step = n }
func (r *RMSprop) Params() []*model.Param        { return r.params }
func (r *RMSprop) Config() Config                { return r.cfg }

func (r *RMSprop) State() []StateTensor {
	var out []StateTensor
	for i, p := range r.params {
		out = append(out, StateTensor{p, "square_avg", r.bufs[i][0]})
		if len(r.bufs[i]) > 1 {
			out = append(out, StateTensor{p, "momentum_buffer", r.bufs[i][1]})
		}
	}
	return out
}

func (r *RMSprop) Free() {
	freeState(r.dev, r.bufs)
	r.bufs, r.params = nil, nil
}
