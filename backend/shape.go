package backend

import (
	"fmt"
	"strings"
)

// ConvShape describes a stride-1, zero-padded 2D convolution:
// in is (N,C,H,W), w is (OC,C,K,K), bias is (OC), out is (N,OC,OH,OW)
// with OH = H+2*Pad-K+1 and OW = W+2*Pad-K+1; or, where D, KD or PadD is
// set (Is3D), a 3D one over volumes: in (N,C,D,H,W), w (OC,C,KD,K,K),
// out (N,OC,OD,OH,OW) with OD = D+2*PadD-KD+1 (PyTorch's Conv3d with
// kernel (KD,K,K) and padding (PadD,Pad,Pad)). D and KD 0 count as 1, so
// the zero value of the three is today's 2D convolution. DT is the storage type of
// in, out, their gradients and w as the operation takes them: Float32
// (the zero value), or a 16-bit type where the backend does not stage
// OpConv (its workspace may then hold their float32 copies). Algo is how
// the convolution is computed (ConvDirect, the zero value, unless the
// model asks otherwise); a backend without the algorithm computes it
// directly, and ConvWorkspace counts what the algorithm takes.
type ConvShape struct {
	N, C, H, W, OC, K, Pad int
	D, KD, PadD            int // a 3D convolution's depths and depth padding (0: 2D)
	DT                     DType
	Algo                   ConvAlgo
}

// ConvAlgo is a convolution's algorithm (the config's model.conv_algo).
type ConvAlgo uint8

const (
	// ConvDirect multiplies by the weights as they are (an implicit
	// im2col GEMM on the CPU).
	ConvDirect ConvAlgo = iota
	// ConvWinograd computes 3x3 convolutions with padding 1 by Winograd's
	// F(2x2,3x3) where the backend has it (2.25x fewer multiplications,
	// more workspace, float32 results within a stated bound of the direct
	// ones); other shapes directly.
	ConvWinograd
	// ConvAuto is ConvWinograd for the parts of a layer wide enough to
	// gain from it (on the CPU: for its instruction set; with F(4x4,3x3)
	// where the shape takes it, 4x fewer multiplications than direct, a
	// looser bound), ConvDirect
	// elsewhere: by the shape alone, so the same layers take the same way
	// whatever the memory, the cores or the variant (the bits do not
	// depend on them); its workspace is Winograd's for those parts.
	ConvAuto
)

// convAlgoNames are the algorithms' config names, in ConvAlgo order.
const convAlgoNames = "direct winograd auto"

// String is the algorithm's config name.
func (a ConvAlgo) String() string {
	if names := strings.Fields(convAlgoNames); int(a) < len(names) {
		return names[a]
	}
	return fmt.Sprintf("ConvAlgo(%d)", a)
}

// ParseConvAlgo is the algorithm of a config name, and whether there is one.
func ParseConvAlgo(name string) (ConvAlgo, bool) {
	for i, n := range strings.Fields(convAlgoNames) {
		if n == name {
			return ConvAlgo(i), true
		}
	}
	return ConvDirect, false
}

// OH is the output height.
func (s ConvShape) OH() int { return s.H + 2*s.Pad - s.K + 1 }

// OW is the output width.
func (s ConvShape) OW() int { return s.W + 2*s.Pad - s.K + 1 }

// Is3D reports a convolution over volumes: a depth, a kernel depth or a
// depth padding other than a 2D convolution's (D and KD 0 or 1, PadD 0).
func (s ConvShape) Is3D() bool { return s.D > 1 || s.KD > 1 || s.PadD != 0 }

// Depth is the input's depth, 1 for a 2D convolution.
func (s ConvShape) Depth() int { return max(s.D, 1) }

// KDepth is the kernel's depth, 1 for a 2D convolution.
func (s ConvShape) KDepth() int { return max(s.KD, 1) }

// OD is the output depth, 1 for a 2D convolution.
func (s ConvShape) OD() int { return s.Depth() + 2*s.PadD - s.KDepth() + 1 }

// InSize, OutSize and WeightSize are element counts.
func (s ConvShape) InSize() int     { return s.N * s.C * s.Depth() * s.H * s.W }
func (s ConvShape) OutSize() int    { return s.N * s.OC * s.OD() * s.OH() * s.OW() }
func (s ConvShape) WeightSize() int { return s.OC * s.C * s.KDepth() * s.K * s.K }

// Direct reports whether the convolution is a plain matrix product per image
// (1x1 or 1x1x1, no padding).
func (s ConvShape) Direct() bool { return s.K == 1 && s.Pad == 0 && s.KDepth() == 1 && s.PadD == 0 }

// Slices is a 3D convolution's output slice as a 2D convolution of one
// image: its input the KD input slices it reads (zeros where they lie in
// the depth padding), taken as C*KD channels (c, kd), so that the weights
// (OC,C,KD,K,K) are that convolution's (OC,C*KD,K,K) as they lie; the
// algorithm direct. For a 2D shape it is the shape of one image.
func (s ConvShape) Slices() ConvShape {
	return ConvShape{N: 1, C: s.C * s.KDepth(), H: s.H, W: s.W, OC: s.OC, K: s.K, Pad: s.Pad, DT: s.DT}
}

// Images is the shape of n images.
func (s ConvShape) Images(n int) ConvShape { s.N = n; return s }

// UpConvShape describes a 2x2, stride-2 transposed convolution (PyTorch's
// ConvTranspose2d(C, OC, 2, stride=2)): in is (N,C,H,W), w is (C,OC,2,2),
// bias is (OC), out is (N,OC,2H,2W); DT as for ConvShape. Where D or KD
// is set (Is3D) it is a 3D one, ConvTranspose3d(C, OC, (KD,2,2),
// stride=(KD,2,2)) with KD 1 or 2: in (N,C,D,H,W), w (C,OC,KD,2,2), out
// (N,OC,KD*D,2H,2W). D and KD 0 count as 1.
type UpConvShape struct {
	N, C, H, W, OC int
	D, KD          int // a 3D one's input depth and kernel depth (0: 2D)
	DT             DType
}

// Is3D reports a transposed convolution over volumes.
func (s UpConvShape) Is3D() bool { return s.D > 1 || s.KD > 1 }

// Depth is the input's depth, KDepth the kernel's (and the stride's):
// 1 for a 2D one.
func (s UpConvShape) Depth() int  { return max(s.D, 1) }
func (s UpConvShape) KDepth() int { return max(s.KD, 1) }

// InSize, OutSize and WeightSize are element counts.
func (s UpConvShape) InSize() int     { return s.N * s.C * s.Depth() * s.H * s.W }
func (s UpConvShape) OutSize() int    { return s.N * s.OC * s.KDepth() * s.Depth() * 4 * s.H * s.W }
func (s UpConvShape) WeightSize() int { return s.C * s.OC * s.KDepth() * 4 }

// Slice is one input slice's transposed convolution as a 2D one of one
// image with OC*KD output channels (oc, kd): the weights (C,OC,KD,2,2)
// are its (C,OC*KD,2,2) as they lie, and its output's channels (oc, kd)
// for kd = 0..KD-1 are output channel oc's KD slices, consecutive in
// depth. For a 2D shape it is the shape of one image.
func (s UpConvShape) Slice() UpConvShape {
	return UpConvShape{N: 1, C: s.C, H: s.H, W: s.W, OC: s.OC * s.KDepth(), DT: s.DT}
}

// Images is the shape of n images.
func (s UpConvShape) Images(n int) UpConvShape { s.N = n; return s }

// Shape5 is an NCDHW activation's shape (a volume's).
type Shape5 struct{ N, C, D, H, W int }

// Len is N*C*D*H*W.
func (s Shape5) Len() int { return s.N * s.C * s.D * s.H * s.W }

// Scale3 is a per-axis factor of a volume's depth, height and width: a 3D
// pooling's kernel and stride (each at least 1), an up-sampling's scale
// (each 1 or 2).
type Scale3 struct{ D, H, W int }

// Volume is the factors' product: a pooling window's size.
func (f Scale3) Volume() int { return f.D * f.H * f.W }

// Pooled is s pooled by k: each axis divided by its factor, rounded down.
func (s Shape5) Pooled(k Scale3) Shape5 {
	return Shape5{N: s.N, C: s.C, D: s.D / k.D, H: s.H / k.H, W: s.W / k.W}
}

// Scaled is s up-sampled by f: each axis multiplied by its factor.
func (s Shape5) Scaled(f Scale3) Shape5 {
	return Shape5{N: s.N, C: s.C, D: s.D * f.D, H: s.H * f.H, W: s.W * f.W}
}

// Shape4 is an NCHW activation's shape.
type Shape4 struct{ N, C, H, W int }

// Len is N*C*H*W.
func (s Shape4) Len() int { return s.N * s.C * s.H * s.W }

// NormArgs is a batch or group norm: x is (N,C,H,W), normalized per channel
// over (N,H,W) (batch) or per (sample, group of C/Groups channels) (group);
// Gamma and Beta are (C) float32; RunningMean and RunningVar (C) float32, for
// batch norm only. Stats are saved per channel (batch: 2C values, mean then
// invstd) or per (sample, group) (group: 2*N*Groups).
type NormArgs struct {
	Shape4
	Groups                               int // group norm only
	Eps, Momentum                        float64
	Gamma, Beta, RunningMean, RunningVar View
}

// StatsLen is the float32 count of the saved statistics.
func (a NormArgs) StatsLen(group bool) int {
	if group {
		return 2 * a.N * a.Groups
	}
	return 2 * a.C
}

// AdamStep is one Adam update's float32 factors, computed once per step by
// the optimizer (as PyTorch forms them: each a float64 expression rounded to
// float32 where it meets the tensors):
//
//	g  = g + WeightDecay*w            (only if WeightDecay != 0)
//	m  = Beta1*m + OneMinusBeta1*g
//	v  = Beta2*v + OneMinusBeta2*g*g
//	w -= StepSize * m / (sqrt(v)/SqrtBC2 + Eps)
type AdamStep struct {
	StepSize, SqrtBC2                          float32 // lr/(1-beta1^t), sqrt(1-beta2^t)
	Beta1, Beta2, OneMinusBeta1, OneMinusBeta2 float32
	Eps, WeightDecay                           float32
	// DecoupledScale, where not 0, first scales w by it: AdamW's decoupled
	// weight decay, 1 - lr*weight_decay (WeightDecay is then 0).
	DecoupledScale float32
	// Entry, where set, is the queued step whose device entry decides
	// the update (StepQueue): skipped where its gradients were not
	// finite, StepSize and SqrtBC2 the entry's.
	Entry StepEntry
}

// SGDStep is one step of torch.optim.SGD:
//
//	d = g + WeightDecay*w                   (only if WeightDecay != 0)
//	buf = d on the First step, else Momentum*buf + (1-Dampening)*d   (only if Momentum != 0)
//	d = d + Momentum*buf if Nesterov, else buf                       (only if Momentum != 0)
//	w -= LR*d
type SGDStep struct {
	LR, Momentum, Dampening, WeightDecay float32
	Nesterov, First                      bool
	// Entry, where set, is the queued step whose device entry decides the
	// update (StepQueue): skipped where its gradients were not finite,
	// First where its step count is 1.
	Entry StepEntry
}

// RMSpropStep is one step of torch.optim.RMSprop (centered off):
//
//	d = g + WeightDecay*w                   (only if WeightDecay != 0)
//	sq = Alpha*sq + OneMinusAlpha*d*d
//	avg = sqrt(sq) + Eps
//	buf = Momentum*buf + d/avg; w -= LR*buf  (with Momentum != 0)
//	w -= LR*d/avg                            (without)
type RMSpropStep struct {
	LR, Alpha, OneMinusAlpha, Eps, WeightDecay, Momentum float32
	// Entry, where set, is the queued step whose device entry may skip
	// the update (StepQueue).
	Entry StepEntry
}
