package backend

import (
	"fmt"

	"github.com/memunet/memunet/memory"
)

// Backend is one device: its memory (an Allocator under the pool) and every
// numeric operation a training step, validation and predict need, on Views
// of buffers from a pool over that allocator. Layout is NCHW throughout.
//
// Contract, for every operation:
//   - Operations never allocate: outputs and workspace are views the caller
//     allocated from the pool, sized by the Sizer.
//   - Outputs named d* for parameters (dw, dbias, dgamma, dbeta) are
//     accumulated into (+=); every other output is overwritten. An output may
//     be the same view as an input only where the method says so.
//   - Float tensors of the layer and metric operations are fp32, or any
//     storage type for which Stages reports false for the operation's Op
//     (the caller stages the others through fp32 scratch with Convert).
//     ReLU, ReLUBack, ReLUMask, ReLUBackMask, Concat, Split, Convert,
//     Confusion and Argmax take every float type as it is.
//   - A shape that does not match its views is a programmer error and
//     panics. Operations may run asynchronously: their errors (other than
//     the data errors some return) surface at Sync; methods that return host
//     values (CrossEntropy, UnscaleCheck, Confusion, Download) wait for the
//     work before them.
type Backend interface {
	// Name says which device, e.g. "cpu" or "noop(cpu)".
	Name() string
	// Allocator is the memory this backend's views live in; pools for it
	// are made with memory.NewPool(b.Allocator(), ...).
	Allocator() memory.Allocator
	Sizer
	Transfer
	Layers
	Metrics
	Optimizer
	// Sync waits for every operation issued so far and returns the first
	// error among them.
	Sync() error
}

// Sizer is what the caller must allocate for a backend: pure functions of
// shapes, shared with the planner, which sizes a run for its target backend.
type Sizer interface {
	// ConvWorkspace is the float32 count Conv and ConvBack take as ws.
	ConvWorkspace(s ConvShape) int
	// UpConvWorkspace is the float32 count UpConv and UpConvBack take as ws.
	UpConvWorkspace(s UpConvShape) int
	// Stages reports whether the operations of family op take tensors of
	// type dt only as fp32 copies (staging), one image at a time for
	// convolutions. It is false for Float32. Where it is false for a 16-bit
	// dt, the activations and their gradients (and, for OpConv, the
	// weights) reach those operations in dt; biases, parameter gradients,
	// norm parameters and statistics and workspace are fp32 always.
	Stages(op Op, dt DType) bool
}

// Op is a family of layer operations that a backend takes 16-bit tensors
// for directly or only through fp32 staging (Sizer.Stages). ReLU,
// ReLUBack, ReLUMask, ReLUBackMask, Concat, Split, Convert, Confusion and
// Argmax are in none: they take every float type.
type Op uint8

const (
	// OpConv is Conv, ConvBack, UpConv and UpConvBack.
	OpConv Op = iota
	// OpNorm is BatchNorm, BatchNormEval, BatchNormBack, GroupNorm and
	// GroupNormBack.
	OpNorm
	// OpPool is MaxPool2 and MaxPool2Back.
	OpPool
	// OpUpsample is Upsample2 and Upsample2Back.
	OpUpsample
	// OpAdd is Add.
	OpAdd
	// OpLoss is CrossEntropy, CrossEntropyBack, LossSums and LossBack.
	OpLoss
)

// Ops is every Op, in order.
var Ops = [...]Op{OpConv, OpNorm, OpPool, OpUpsample, OpAdd, OpLoss}

// String is the family's name.
func (op Op) String() string {
	switch op {
	case OpConv:
		return "conv"
	case OpNorm:
		return "norm"
	case OpPool:
		return "pool"
	case OpUpsample:
		return "upsample"
	case OpAdd:
		return "add"
	case OpLoss:
		return "loss"
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Transfer moves values between host memory and buffers, and between
// storage types.
type Transfer interface {
	// Upload copies src (host bytes, little-endian values of dst.DT) into dst;
	// len(src) must be dst.Bytes().
	Upload(dst View, src []byte)
	// Download copies src into dst (host bytes, len(dst) == src.Bytes()).
	Download(dst []byte, src View)
	// Convert writes src's values into dst in dst's storage type (fp32 <->
	// fp16/bf16, rounding to nearest even; the same type copies). The views
	// have the same length and do not overlap.
	Convert(dst, src View)
	// Fill sets every value of dst (a float type) to v, rounded to dst's
	// type (-0 stays -0).
	Fill(dst View, v float32)
}

// Layers are the operations of the UNet's layers, forward and backward.
type Layers interface {
	// Conv: out (N,OC,OH,OW) = conv(in (N,C,H,W), w (OC,C,K,K)) + bias (OC;
	// may be none). ws has ConvWorkspace(s) values, contents unspecified.
	Conv(s ConvShape, out, in, w, bias, ws View)
	// ConvBack: din (overwritten; skipped if none) = conv of dout with the
	// flipped weights; dw (OC,C,K,K) += dout x im2col(in); dbias (OC; may be
	// none) += sum of dout over (N,OH,OW).
	ConvBack(s ConvShape, din, dw, dbias, dout, in, w, ws View)
	// UpConv: out (N,OC,2H,2W) from in (N,C,H,W), w (C,OC,2,2), bias (OC;
	// may be none). ws has UpConvWorkspace(s) values.
	UpConv(s UpConvShape, out, in, w, bias, ws View)
	// UpConvBack: din overwritten (skipped if none), dw and dbias (may be
	// none) accumulated.
	UpConvBack(s UpConvShape, din, dw, dbias, dout, in, w, ws View)

	// BatchNorm (training): normalizes in per channel with the batch mean and
	// biased variance, out = gamma*xhat + beta. stats (2C: mean, then
	// invstd) are computed unless reuse (then read, as a checkpointed
	// block's recomputation does); with update the running statistics move
	// towards the batch's (momentum, unbiased variance). update needs the
	// batch's variance, so it is only allowed without reuse.
	BatchNorm(a NormArgs, out, in, stats View, reuse, update bool)
	// BatchNormEval normalizes with the running statistics.
	BatchNormEval(a NormArgs, out, in View)
	// BatchNormBack: dgamma, dbeta += and din (may be dout) from the saved
	// stats.
	BatchNormBack(a NormArgs, din, dgamma, dbeta, dout, in, stats View)
	// GroupNorm normalizes per (sample, group); stats are 2*N*Groups (mean,
	// then invstd), computed unless reuse.
	GroupNorm(a NormArgs, out, in, stats View, reuse bool)
	// GroupNormBack: dgamma, dbeta += and din (may be dout).
	GroupNormBack(a NormArgs, din, dgamma, dbeta, dout, in, stats View)

	// ReLU: out = max(in, 0) (NaN passes); out may be in.
	ReLU(out, in View)
	// ReLUBack: din = dout where out > 0, else 0; din may be dout.
	ReLUBack(din, dout, out View)
	// ReLUMask packs what ReLUBack reads of out, one bit a value: bit i%8
	// of mask[i/8] (Uint8, (out.Len+7)/8 bytes; the last byte's spare bits
	// 0) is set where out[i] > 0 (positive, non-zero, not NaN).
	ReLUMask(mask, out View)
	// ReLUBackMask is ReLUBack reading out's ReLUMask: din = dout where the
	// bit is set, else +0; din may be dout.
	ReLUBackMask(din, dout, mask View)
	// MaxPool2: out (N,C,H/2,W/2) is the maximum of each 2x2 window of in
	// (s is in's shape); argmax (Uint8, one per output; may be none) its
	// position 0..3, the first on ties, a NaN winning (which NaN, when a
	// window has several, is unspecified).
	MaxPool2(s Shape4, out, argmax, in View)
	// MaxPool2Back: din (s) gets each dout value at its window's argmax, 0
	// elsewhere (odd last rows and columns too).
	MaxPool2Back(s Shape4, din, dout, argmax View)
	// Upsample2: out (N,C,2H,2W) is in (s) upsampled bilinearly, PyTorch's
	// align_corners=False.
	Upsample2(s Shape4, out, in View)
	// Upsample2Back: din (s) is the adjoint of Upsample2 applied to dout.
	Upsample2Back(s Shape4, din, dout View)
	// Concat: out's n-th sample is skip's n-th then up's n-th (N samples,
	// same storage type): torch.cat([skip, up], dim=1).
	Concat(n int, out, skip, up View)
	// Split is Concat's adjoint: dout's samples split into dskip and dup.
	Split(n int, dskip, dup, dout View)
	// Add: out = a + b elementwise; out may be a or b.
	Add(out, a, b View)
	// CrossEntropy returns the sum over pixels of -log softmax(logits)[t]
	// and the number of pixels summed, for logits (s: N,K,H,W) and target
	// (Uint8, N,H,W) holding classes or IgnoreIndex. A target value that is
	// neither is a *TargetError naming the first sample that has one and
	// one of its bad values.
	CrossEntropy(s Shape4, logits, target View) (sum float64, count int, err error)
	// CrossEntropyBack: dlogits = k*(softmax(logits) - onehot(target)) at
	// counted pixels, 0 at ignored ones (and everywhere if k is 0); dlogits
	// may be logits.
	CrossEntropyBack(s Shape4, dlogits, logits, target View, k float32)
	// LossSums adds, over the pixels whose target is a class (logits s:
	// N,K,H,W Float32; target Uint8 N,H,W; p = softmax of a pixel's
	// logits), four per-class sums into sums (host, 4K values):
	//   sums[c]    += Σ_{t=c} (1-p_c)^gamma·(-log p_c)  (the focal term; cross-entropy at gamma 0)
	//   sums[K+c]  += #{pixels with t=c}
	//   sums[2K+c] += Σ_{t=c} p_c
	//   sums[3K+c] += Σ p_c over every counted pixel
	// from which class-weighted cross-entropy, focal loss and soft Dice
	// follow. A bad target value is a *TargetError, as for CrossEntropy.
	LossSums(s Shape4, logits, target View, gamma float32, sums []float64) error
	// LossBack writes dlogits at a pixel with target t as
	//   coef[t]·F·(p - onehot(t)) + p⊙(d - <p,d>),  d_c = coef[K+c]·[c=t] + coef[2K+c],
	// F = (1-p_t)^gamma - gamma·p_t·(1-p_t)^(gamma-1)·log p_t (1 at gamma
	// 0): the gradient of coef[t] times the focal term plus of any loss
	// whose derivative by p_c is d_c (soft Dice's); 0 at ignored pixels.
	// coef is host memory, 3K values; dlogits may be logits.
	LossBack(s Shape4, dlogits, logits, target View, gamma float32, coef []float32)
}

// Metrics are the validation and prediction reductions.
type Metrics interface {
	// Confusion adds, for every pixel whose target is a class, one to
	// counts[target*K + argmax of logits] (host memory, K*K values; logits
	// (s: N,K,H,W) of any float type, target Uint8 (N,H,W)).
	Confusion(s Shape4, counts []int64, logits, target View)
	// Argmax writes each pixel's class, the first largest logit, into
	// classes (Uint8, N,H,W).
	Argmax(s Shape4, classes, logits View)
}

// Optimizer is the parameter update, on fp32 views of equal length.
type Optimizer interface {
	// Adam updates w, m and v from g (see AdamStep); g is left as it was.
	Adam(a AdamStep, w, g, m, v View)
	// SGD updates w and its momentum buffer buf (none without momentum)
	// from g (see SGDStep); g is left as it was.
	SGD(a SGDStep, w, g, buf View)
	// RMSprop updates w, its square average sq and momentum buffer buf
	// (none without momentum) from g (see RMSpropStep).
	RMSprop(a RMSpropStep, w, g, sq, buf View)
	// UnscaleCheck multiplies g by inv and reports whether every value is
	// finite afterwards.
	UnscaleCheck(g View, inv float32) bool
}

// IgnoreIndex is the target value whose pixels the loss and metrics skip.
const IgnoreIndex = 255

// Offloader is a backend with host memory its device copies to and from
// directly (pinned memory on a GPU, plain memory on the CPU): where tensors
// wait outside the device's memory until they are needed again
// (memory.offload).
type Offloader interface {
	// HostAllocator is that memory; a pool over it holds the offloaded
	// tensors, apart from the device's pool.
	HostAllocator() memory.Allocator
	// ToHost copies src (device memory) into dst (HostAllocator's memory):
	// same type and length. ToDevice copies back.
	ToHost(dst, src View)
	ToDevice(dst, src View)
}
