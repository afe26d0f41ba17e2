package model

import "time"

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

// Profile adds up wall time per layer kind. Time spent in a nested kind
// (conversions inside a convolution) is counted there only, so the kinds
// add up to the time measured. Not safe for concurrent use: one per Env.
type Profile struct {
	Total [NumKinds]time.Duration
	stack []profFrame
}

type profFrame struct {
	kind  Kind
	start time.Time
}

// begin starts timing kind, pausing the kind it runs inside, and returns
// the function that ends it.
func (p *Profile) begin(k Kind) func() {
	if p == nil {
		return nop
	}
	now := time.Now()
	if n := len(p.stack); n > 0 {
		top := &p.stack[n-1]
		p.Total[top.kind] += now.Sub(top.start)
	}
	p.stack = append(p.stack, profFrame{k, now})
	return func() {
		now := time.Now()
		n := len(p.stack)
		p.Total[k] += now.Sub(p.stack[n-1].start)
		p.stack = p.stack[:n-1]
		if n > 1 {
			p.stack[n-2].start = now
		}
	}
}

func nop() {}
