package model

import "github.com/memunet/memunet/memory"

// Thin exported constructors for the parameterized layers, so that tests in
// other packages (the gorgonia oracle in model/oracle) can build a single
// layer. Parameters are allocated from pool with the same names, shapes and
// initial values (zeros; norm weights 1, running variance 1) as inside a UNet.

// NewConv2d returns a K x K, stride 1 convolution with zero padding pad,
// weight name+".weight" (outC,inC,k,k) and, if bias, name+".bias" (outC).
func NewConv2d(pool *memory.Pool, name string, inC, outC, k, pad int, bias bool) (*Conv2d, error) {
	return newConv2d(pool, name, inC, outC, k, pad, bias)
}

// NewBatchNorm2d returns a BatchNorm2d over c channels (eps 1e-5, momentum 0.1).
func NewBatchNorm2d(pool *memory.Pool, name string, c int) (*BatchNorm2d, error) {
	return newBatchNorm2d(pool, name, c)
}

// NewGroupNorm returns a GroupNorm of c channels in groups groups (eps 1e-5).
func NewGroupNorm(pool *memory.Pool, name string, groups, c int) (*GroupNorm, error) {
	return newGroupNorm(pool, name, groups, c)
}

// NewUpConv returns a 2x2, stride 2 transposed convolution with weight
// (inC,outC,2,2) and bias (outC).
func NewUpConv(pool *memory.Pool, name string, inC, outC int) (*UpConv, error) {
	return newUpConv(pool, name, inC, outC)
}

// Params lists the layer's parameters: weight, then bias if any.
func (l *Conv2d) Params() []*Param { return l.params() }

// Params lists weight and bias.
func (l *UpConv) Params() []*Param { return l.params() }

// Params lists weight, bias, running mean and running variance.
func (l *BatchNorm2d) Params() []*Param { return l.params() }

// Params lists weight and bias.
func (l *GroupNorm) Params() []*Param { return l.params() }
