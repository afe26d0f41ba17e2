package model

import (
	"time"

	"github.com/memunet/memunet/backend"
)

// Kind names a group of layers whose time a Profile adds up.
type Kind uint8

const (
	KindConvForward Kind = iota
	KindConvBackward
	KindNorm     // BatchNorm and GroupNorm, forward and backward
	KindReLU     // forward and backward
	KindPool     // max pooling, forward and backward
	KindUpsample // bilinear upsampling and concatenation, forward and backward
	KindLoss     // cross entropy, forward and backward
	KindConvert  // fp16/bf16 <-> fp32 staging, wherever it happens
	NumKinds
)

var kindNames = [NumKinds]string{"conv forward", "conv backward", "norm", "relu", "pooling", "upsampling", "loss", "conversions"}

func (k Kind) String() string { return kindNames[k] }

// Profile adds up time per layer kind: the host's wall time, or, on a
// backend with its own clock (backend.Clock: a GPU's events), the time the
// device took, since there the host only issues the work. Time spent in a
// nested kind (conversions inside a convolution) is counted there only, so
// the kinds add up to the time measured. Not safe for concurrent use: one
// per Env.
type Profile struct {
	total [NumKinds]time.Duration
	clock backend.Clock
	stack []profFrame
	spans []span // the clock's, until Totals reads them
}

// NewProfile is a Profile on the host's clock, or on clock where it is
// not nil.
func NewProfile(clock backend.Clock) *Profile { return &Profile{clock: clock} }

type profFrame struct {
	kind  Kind
	start time.Time
	mark  backend.Mark
}

// span is time in kind between two of the clock's marks.
type span struct {
	kind     Kind
	from, to backend.Mark
}

// Totals is the time per kind so far (on a clock, once its work has run:
// it waits for that).
func (p *Profile) Totals() [NumKinds]time.Duration {
	if len(p.spans) > 0 {
		for _, s := range p.spans {
			p.total[s.kind] += p.clock.Between(s.from, s.to)
		}
		// Every mark ends one span or starts one (begin and end each make
		// one, and a paused kind resumes from the end's): give each back once.
		seen := map[backend.Mark]bool{}
		for _, s := range p.spans {
			for _, m := range []backend.Mark{s.from, s.to} {
				if !seen[m] {
					seen[m] = true
					p.clock.ReleaseMark(m)
				}
			}
		}
		p.spans = p.spans[:0]
	}
	return p.total
}

// now is the current point: the host's time, or a clock's mark.
func (p *Profile) now() (time.Time, backend.Mark) {
	if p.clock != nil {
		return time.Time{}, p.clock.Mark()
	}
	return time.Now(), 0
}

// add counts the time from f's start to now (t, m) in f's kind.
func (p *Profile) add(f profFrame, t time.Time, m backend.Mark) {
	if p.clock != nil {
		p.spans = append(p.spans, span{f.kind, f.mark, m})
		return
	}
	p.total[f.kind] += t.Sub(f.start)
}

// begin starts timing kind, pausing the kind it runs inside, and returns
// the function that ends it.
func (p *Profile) begin(k Kind) func() {
	if p == nil {
		return nop
	}
	t, m := p.now()
	if n := len(p.stack); n > 0 {
		p.add(p.stack[n-1], t, m)
	}
	p.stack = append(p.stack, profFrame{k, t, m})
	return func() {
		t, m := p.now()
		n := len(p.stack)
		p.add(p.stack[n-1], t, m)
		p.stack = p.stack[:n-1]
		if n > 1 {
			p.stack[n-2].start, p.stack[n-2].mark = t, m
		}
	}
}

func nop() {}
