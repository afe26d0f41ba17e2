package noop

import (
	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// Noop computes nothing over virtual memory, sized and paged like its
// target.
type Noop struct {
	backend.Sizer // the target's
	target        string
	page          int64 // the target's memory page (memory.Pager), 0 if it takes segments
	hostPage      int64 // the same for its host memory (backend.Offloader)
}

var _ backend.Backend = Noop{}

// New plans for target: its sizes, no memory, no arithmetic.
func New(target backend.Backend) Noop {
	n := Noop{Sizer: target, target: target.Name(), page: pageSize(target.Allocator())}
	if o, ok := target.(backend.Offloader); ok {
		n.hostPage = pageSize(o.HostAllocator())
	}
	return n
}

// pageSize is a's page size, 0 if it does not page.
func pageSize(a memory.Allocator) int64 {
	if p, ok := a.(memory.Pager); ok {
		return p.PageSize()
	}
	return 0
}

// Name is "noop(target)".
func (n Noop) Name() string { return "noop(" + n.target + ")" }

// Allocator is memory.Virtual, paged as the target's memory is, so that
// the plan's pool reserves what the target's would.
func (n Noop) Allocator() memory.Allocator { return memory.Virtual{Page: n.page} }

// Sync has nothing to wait for.
func (Noop) Sync() error { return nil }

func (Noop) Upload(backend.View, []byte)                                                         {}
func (Noop) Download(dst []byte, _ backend.View)                                                 { clear(dst) }
func (Noop) Convert(_, _ backend.View)                                                           {}
func (Noop) Fill(backend.View, float32)                                                          {}
func (Noop) Conv(_ backend.ConvShape, _, _, _, _, _ backend.View)                                {}
func (Noop) ConvBack(_ backend.ConvShape, _, _, _, _, _, _, _ backend.View)                      {}
func (Noop) UpConv(_ backend.UpConvShape, _, _, _, _, _ backend.View)                            {}
func (Noop) UpConvBack(_ backend.UpConvShape, _, _, _, _, _, _, _ backend.View)                  {}
func (Noop) BatchNorm(_ backend.NormArgs, _, _, _ backend.View, _, _ bool)                       {}
func (Noop) BatchNormEval(_ backend.NormArgs, _, _ backend.View)                                 {}
func (Noop) BatchNormBack(_ backend.NormArgs, _, _, _, _, _, _ backend.View)                     {}
func (Noop) GroupNorm(_ backend.NormArgs, _, _, _ backend.View, _ bool)                          {}
func (Noop) GroupNormBack(_ backend.NormArgs, _, _, _, _, _, _ backend.View)                     {}
func (Noop) ReLU(_, _ backend.View)                                                              {}
func (Noop) ReLUBack(_, _, _ backend.View)                                                       {}
func (Noop) ReLUMask(_, _ backend.View)                                                          {}
func (Noop) ReLUBackMask(_, _, _ backend.View)                                                   {}
func (Noop) MaxPool2(_ backend.Shape4, _, _, _ backend.View)                                     {}
func (Noop) MaxPool2Back(_ backend.Shape4, _, _, _ backend.View)                                 {}
func (Noop) Upsample2(_ backend.Shape4, _, _ backend.View)                                       {}
func (Noop) Upsample2Back(_ backend.Shape4, _, _ backend.View)                                   {}
func (Noop) Concat(_ int, _, _, _ backend.View)                                                  {}
func (Noop) Split(_ int, _, _, _ backend.View)                                                   {}
func (Noop) Add(_, _, _ backend.View)                                                            {}
func (Noop) CrossEntropyBack(_ backend.Shape4, _, _, _ backend.View, _ float32)                  {}
func (Noop) LossSums(_ backend.Shape4, _, _ backend.View, _ float32, _ []float64) error          { return nil }
func (Noop) LossBack(_ backend.Shape4, _, _, _ backend.View, _ float32, _ []float32)             {}
func (Noop) Confusion(_ backend.Shape4, _ []int64, _, _ backend.View)                            {}
func (Noop) Argmax(_ backend.Shape4, _, _ backend.View)                                          {}
func (Noop) Adam(_ backend.AdamStep, _, _, _, _ backend.View)                                    {}
func (Noop) SGD(backend.SGDStep, backend.View, backend.View, backend.View)                       {}
func (Noop) RMSprop(backend.RMSpropStep, backend.View, backend.View, backend.View, backend.View) {}

// CrossEntropy sums nothing.
func (Noop) CrossEntropy(backend.Shape4, backend.View, backend.View) (float64, int, error) {
	return 0, 0, nil
}

// UnscaleCheck reports finite gradients (a planned step is never skipped).
func (Noop) UnscaleCheck(backend.View, float32) bool { return true }

var _ backend.Offloader = Noop{}

// HostAllocator is virtual too: a plan counts the offloaded bytes in a pool
// of their own.
func (n Noop) HostAllocator() memory.Allocator { return memory.Virtual{Page: n.hostPage} }

// ToHost copies nothing.
func (Noop) ToHost(dst, src backend.View) {}

// ToDevice copies nothing.
func (Noop) ToDevice(dst, src backend.View) {}
