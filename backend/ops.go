package backend

//go:generate go run ./internal/opgen

// This file is the table of the Backend's operations: each is a method of
// Transfer, Layers, Metrics or Optimizer, with its contract above it, and
// these lines closing that comment:
//
//	//op:cuda KERNEL... [threads=EXPR]
//		the entry points of backend/cuda/kernels/*.cu its CUDA method
//		launches. Where the method takes only views and its one kernel
//		takes those views by name, then dt (any float type; fp32 without
//		it), then n, the method is generated: the float views share n
//		values of one type, a view named mask holds their (n+7)/8 bit
//		bytes, and the kernel runs on n threads (or EXPR, in n).
//	//op:optional
//		a backend may lack it: it then runs Composed's method, a
//		composition of required operations, and its Supports says false.
//
// go generate ./backend (internal/opgen) writes from it the Method enum
// (ops_gen.go), the noop backend's methods, each backend's Supports and
// composed methods, the CUDA backend's Kernel enum and its generated
// methods, the CUDA emulator's dispatch, backendtest's registration of
// each operation's case (test<Op>) and the operation lists of docs/design.md
// and doc.go; a test fails where they differ from it.

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
	//
	//op:cuda convert
	Convert(dst, src View)
	// Fill sets every value of dst (a float type) to v, rounded to dst's
	// type (-0 stays -0).
	Fill(dst View, v float32)
}

// Layers are the operations of the UNet's layers, forward and backward.
type Layers interface {
	// Conv: out (N,OC,OH,OW) = conv(in (N,C,H,W), w (OC,C,K,K)) + bias (OC;
	// may be none); a 3D convolution (s.Is3D) over (N,C,D,H,W) volumes
	// alike, w (OC,C,KD,K,K). ws has ConvWorkspace(s) values, contents
	// unspecified.
	//
	//op:cuda conv tc_conv_tf32 tc_conv_16 conv3 bias_add
	Conv(s ConvShape, out, in, w, bias, ws View)
	// ConvBack: din (overwritten; skipped if none) = conv of dout with the
	// flipped weights; dw (OC,C,K,K) += dout x im2col(in); dbias (OC; may be
	// none) += sum of dout over (N,OH,OW) (over (N,OD,OH,OW) in 3D).
	//
	//op:cuda conv_back_data conv_back_weight split_sum norm_sums add_sums tc_conv_tf32 tc_conv_16 tc_wgrad_tf32 tc_wgrad_16 conv3_back_data conv3_back_weight accumulate
	ConvBack(s ConvShape, din, dw, dbias, dout, in, w, ws View)
	// UpConv: out (N,OC,2H,2W) from in (N,C,H,W), w (C,OC,2,2), bias (OC;
	// may be none); in 3D (s.Is3D) out (N,OC,KD*D,2H,2W) from in
	// (N,C,D,H,W), w (C,OC,KD,2,2). ws has UpConvWorkspace(s) values.
	//
	//op:cuda up_conv tc_conv_tf32 tc_conv_16 up_conv3 bias_add
	UpConv(s UpConvShape, out, in, w, bias, ws View)
	// UpConvBack: din overwritten (skipped if none), dw and dbias (may be
	// none) accumulated.
	//
	//op:cuda up_conv_back_data up_conv_back_weight split_sum norm_sums add_sums tc_conv_tf32 tc_conv_16 tc_wgrad_tf32 tc_wgrad_16 up_conv3_back_data up_conv3_back_weight accumulate
	UpConvBack(s UpConvShape, din, dw, dbias, dout, in, w, ws View)

	// BatchNorm (training): normalizes in per channel with the batch mean and
	// biased variance, out = gamma*xhat + beta. stats (2C: mean, then
	// invstd) are computed unless reuse (then read, as a checkpointed
	// block's recomputation does); with update the running statistics move
	// towards the batch's (momentum, unbiased variance). update needs the
	// batch's variance, so it is only allowed without reuse.
	//
	//op:cuda norm_sums batch_norm_finish batch_norm_apply
	BatchNorm(a NormArgs, out, in, stats View, reuse, update bool)
	// BatchNormReLU is BatchNorm(a, out, in, stats, reuse, update), then
	// ReLU of out in place and, unless mask is none, ReLUMask(mask, out):
	// the same bits in one pass over out (a DoubleConv's norm and ReLU).
	//
	//op:optional
	//op:cuda norm_sums batch_norm_finish batch_norm_relu_apply
	BatchNormReLU(a NormArgs, out, mask, in, stats View, reuse, update bool)
	// BatchNormEval normalizes with the running statistics.
	//
	//op:cuda batch_norm_eval
	BatchNormEval(a NormArgs, out, in View)
	// BatchNormBack: dgamma, dbeta += and din (may be dout) from the saved
	// stats.
	//
	//op:cuda norm_sums batch_norm_back_finish batch_norm_back_apply
	BatchNormBack(a NormArgs, din, dgamma, dbeta, dout, in, stats View)
	// BatchNormReLUBack is the backward of BatchNormReLU: din = the ReLU's
	// gradient of dout (ReLUBackMask where relu is the mask, Uint8, else
	// ReLUBack with relu the ReLU's output), then BatchNormBack(a, din,
	// dgamma, dbeta, din, in, stats): the same bits without the pass
	// between. din may be dout.
	//
	//op:optional
	//op:cuda norm_sums batch_norm_back_finish batch_norm_back_apply
	BatchNormReLUBack(a NormArgs, din, dgamma, dbeta, dout, in, stats, relu View)
	// GroupNorm normalizes per (sample, group); stats are 2*N*Groups (mean,
	// then invstd), computed unless reuse.
	//
	//op:cuda norm_sums group_norm_finish group_norm_apply
	GroupNorm(a NormArgs, out, in, stats View, reuse bool)
	// GroupNormBack: dgamma, dbeta += and din (may be dout).
	//
	//op:cuda norm_sums add_sums group_norm_back_finish group_norm_back_apply
	GroupNormBack(a NormArgs, din, dgamma, dbeta, dout, in, stats View)

	// ReLU: out = max(in, 0) (NaN passes), for every float type; out may be
	// in.
	//
	//op:cuda relu
	ReLU(out, in View)
	// ReLUBack: din = dout where out > 0, else 0, for every float type; din
	// may be dout.
	//
	//op:cuda relu_back
	ReLUBack(din, dout, out View)
	// ReLUMask packs what ReLUBack reads of out (every float type), one bit
	// a value: bit i%8 of mask[i/8] (Uint8, (out.Len+7)/8 bytes; the last
	// byte's spare bits 0) is set where out[i] > 0 (positive, non-zero, not
	// NaN).
	//
	//op:cuda relu_mask threads=(n+7)/8
	ReLUMask(mask, out View)
	// ReLUBackMask is ReLUBack reading out's ReLUMask: din = dout where the
	// bit is set, else +0, for every float type; din may be dout.
	//
	//op:cuda relu_back_mask
	ReLUBackMask(din, dout, mask View)
	// ReLUAndMask is ReLU(out, in) then ReLUMask(mask, out) in one pass,
	// the same bits, for every float type; out may be in.
	//
	//op:optional
	//op:cuda relu_and_mask threads=(n+7)/8
	ReLUAndMask(out, mask, in View)
	// MaxPool2: out (N,C,H/2,W/2) is the maximum of each 2x2 window of in
	// (s is in's shape); argmax (Uint8, one per output; may be none) its
	// position 0..3, the first on ties, a NaN winning (which NaN, when a
	// window has several, is unspecified).
	//
	//op:cuda max_pool2
	MaxPool2(s Shape4, out, argmax, in View)
	// MaxPool2Back: din (s) gets each dout value at its window's argmax, 0
	// elsewhere (odd last rows and columns too).
	//
	//op:cuda max_pool2_back
	MaxPool2Back(s Shape4, din, dout, argmax View)
	// Upsample2: out (N,C,2H,2W) is in (s) upsampled bilinearly, PyTorch's
	// align_corners=False.
	//
	//op:cuda upsample2
	Upsample2(s Shape4, out, in View)
	// Upsample2Back: din (s) is the adjoint of Upsample2 applied to dout.
	//
	//op:cuda upsample2_back
	Upsample2Back(s Shape4, din, dout View)
	// MaxPool3: out (s.Pooled(k)) is the maximum of each window of k
	// (kernel and stride per axis) of in (s: N,C,D,H,W); argmax (Uint8, one
	// per output; may be none) its position (kd*k.H+kh)*k.W+kw in the
	// window, the first on ties, a NaN winning (which NaN, when a window
	// has several, is unspecified). k.Volume() is at most 256.
	//
	//op:cuda max_pool3
	MaxPool3(s Shape5, k Scale3, out, argmax, in View)
	// MaxPool3Back: din (s) gets each dout value at its window's argmax, 0
	// elsewhere (the last slices, rows and columns no window covers too).
	//
	//op:cuda max_pool3_back
	MaxPool3Back(s Shape5, k Scale3, din, dout, argmax View)
	// Upsample3: out (s.Scaled(f)) is in (s: N,C,D,H,W) upsampled
	// trilinearly, PyTorch's align_corners=False; each factor of f is 1 (the
	// axis as it is) or 2.
	//
	//op:cuda upsample3
	Upsample3(s Shape5, f Scale3, out, in View)
	// Upsample3Back: din (s) is the adjoint of Upsample3 applied to dout.
	//
	//op:cuda upsample3_back
	Upsample3Back(s Shape5, f Scale3, din, dout View)
	// UpsampleConcat is Upsample2(s, up, in) then Concat(s.N, out, skip,
	// up) without the tensor up: out's n-th sample is skip's n-th, then
	// in's n-th upsampled (the same bits; a bilinear decoder's input).
	//
	//op:optional
	//op:cuda upsample_concat
	UpsampleConcat(s Shape4, out, skip, in View)
	// UpsampleConcatBack is UpsampleConcat's adjoint: dskip gets dout's
	// first part of each sample, din the adjoint upsampling of the second
	// (Split then Upsample2Back, the same bits).
	//
	//op:optional
	//op:cuda upsample_concat_back
	UpsampleConcatBack(s Shape4, dskip, din, dout View)
	// Concat: out's n-th sample is skip's n-th then up's n-th (N samples,
	// the same storage type, every float type): torch.cat([skip, up],
	// dim=1).
	//
	//op:cuda concat
	Concat(n int, out, skip, up View)
	// Split is Concat's adjoint: dout's samples split into dskip and dup.
	//
	//op:cuda split
	Split(n int, dskip, dup, dout View)
	// Add: out = x + y elementwise; out may be x or y.
	//
	//op:cuda add
	Add(out, x, y View)
	// CrossEntropy returns the sum over pixels of -log softmax(logits)[t]
	// and the number of pixels summed, for logits (s: N,K,H,W) and target
	// (Uint8, N,H,W) holding classes or IgnoreIndex. A target value that is
	// neither is a *TargetError naming the first sample that has one and
	// one of its bad values.
	//
	//op:cuda loss_partials loss_record
	CrossEntropy(s Shape4, logits, target View) (sum float64, count int, err error)
	// CrossEntropyBack: dlogits = k*(softmax(logits) - onehot(target)) at
	// counted pixels, 0 at ignored ones (and everywhere if k is 0); dlogits
	// may be logits.
	//
	//op:cuda cross_entropy_back
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
	//
	//op:cuda loss_partials loss_finish
	LossSums(s Shape4, logits, target View, gamma float32, sums []float64) error
	// LossBack writes dlogits at a pixel with target t as
	//   coef[t]·F·(p - onehot(t)) + p⊙(d - <p,d>),  d_c = coef[K+c]·[c=t] + coef[2K+c],
	// F = (1-p_t)^gamma - gamma·p_t·(1-p_t)^(gamma-1)·log p_t (1 at gamma
	// 0): the gradient of coef[t] times the focal term plus of any loss
	// whose derivative by p_c is d_c (soft Dice's); 0 at ignored pixels.
	// coef is host memory, 3K values; dlogits may be logits.
	//
	//op:cuda loss_back loss_coefs
	LossBack(s Shape4, dlogits, logits, target View, gamma float32, coef []float32)
}

// Metrics are the validation and prediction reductions.
type Metrics interface {
	// Confusion adds, for every pixel whose target is a class, one to
	// counts[target*K + argmax of logits] (host memory, K*K values; logits
	// (s: N,K,H,W) of any float type, target Uint8 (N,H,W)).
	//
	//op:cuda confusion
	Confusion(s Shape4, counts []int64, logits, target View)
	// Argmax writes each pixel's class, the first largest logit (any float
	// type), into classes (Uint8, N,H,W).
	//
	//op:cuda argmax
	Argmax(s Shape4, classes, logits View)
}

// Optimizer is the parameter update, on fp32 views of equal length.
type Optimizer interface {
	// Adam updates w, m and v from g (see AdamStep); g is left as it was.
	//
	//op:cuda adam
	Adam(a AdamStep, w, g, m, v View)
	// SGD updates w and its momentum buffer buf (none without momentum)
	// from g (see SGDStep); g is left as it was.
	//
	//op:cuda sgd
	SGD(a SGDStep, w, g, buf View)
	// RMSprop updates w, its square average sq and momentum buffer buf
	// (none without momentum) from g (see RMSpropStep).
	//
	//op:cuda rmsprop
	RMSprop(a RMSpropStep, w, g, sq, buf View)
	// UnscaleCheck multiplies every view of gs by inv and reports whether
	// every value of them all is finite afterwards: one answer for a
	// step's gradients, so a device reads one flag back, not one a
	// parameter.
	//
	//op:cuda unscale_check step_begin step_factors
	UnscaleCheck(gs []View, inv float32) bool
	// SumSquares is the sum of the squares of every value of gs (fp32
	// views), in float64: a step's squared global L2 gradient norm (the
	// trainer's clipping), one number read back for them all; +Inf or NaN
	// where a value is. Each view is summed in blocks of SumSquaresBlock
	// values (SumSquaresOf), the blocks' sums added in order, so the bits
	// do not depend on the number of threads.
	//
	//op:optional
	//op:cuda sum_squares sum_squares_finish
	SumSquares(gs []View) float64
}

// SumSquaresBlock is the values of one block SumSquares sums alone.
const SumSquaresBlock = 1 << 14

// SumSquaresOf is Σ x² over xs in float64 (each square exact), in four
// interleaved sums added at the end: one block of SumSquares.
func SumSquaresOf(xs []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		x := xs[i : i+4 : i+4]
		a, b, c, d := float64(x[0]), float64(x[1]), float64(x[2]), float64(x[3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(xs); i++ {
		a := float64(xs[i])
		s0 += a * a
	}
	return (s0 + s1) + (s2 + s3)
}

// Composed{b} is b with each optional operation composed of required ones:
// the reference a backend lacking an optional operation runs (its
// generated method calls Composed's) and backendtest checks too. A
// composition allocates no buffer (SumSquares stages its blocks in host
// memory, outside the pool).
type Composed struct{ Backend }

// Supports is false for the optional operations, which Composed composes.
func (c Composed) Supports(m Method) bool { return !m.Optional() && c.Backend.Supports(m) }

// ReLUAndMask is ReLU, then ReLUMask of its output.
func (c Composed) ReLUAndMask(out, mask, in View) {
	c.ReLU(out, in)
	c.ReLUMask(mask, out)
}

// BatchNormReLU is BatchNorm, then ReLU in place (ReLUAndMask with a mask).
func (c Composed) BatchNormReLU(a NormArgs, out, mask, in, stats View, reuse, update bool) {
	c.BatchNorm(a, out, in, stats, reuse, update)
	if mask.None() {
		c.ReLU(out, out)
		return
	}
	c.ReLUAndMask(out, mask, out)
}

// BatchNormReLUBack is the ReLU's backward into din, then BatchNormBack
// in place.
func (c Composed) BatchNormReLUBack(a NormArgs, din, dgamma, dbeta, dout, in, stats, relu View) {
	if relu.DT == Uint8 {
		c.ReLUBackMask(din, dout, relu)
	} else {
		c.ReLUBack(din, dout, relu)
	}
	c.BatchNormBack(a, din, dgamma, dbeta, din, in, stats)
}

// UpsampleConcat copies each sample's skip part and upsamples its in
// part into out in place.
func (c Composed) UpsampleConcat(s Shape4, out, skip, in View) {
	one := Shape4{N: 1, C: s.C, H: s.H, W: s.W}
	skipN, upN := skip.Len/s.N, 4*one.Len()
	for n := range s.N {
		o := out.Slice(n*(skipN+upN), (n+1)*(skipN+upN))
		c.Convert(o.Slice(0, skipN), skip.Slice(n*skipN, (n+1)*skipN))
		c.Upsample2(one, o.Slice(skipN, skipN+upN), in.Slice(n*one.Len(), (n+1)*one.Len()))
	}
}

// SumSquares downloads each view a block at a time and sums it on the
// host (a device reads back every gradient: a kernel would read back one
// number).
func (c Composed) SumSquares(gs []View) float64 {
	var host []float32
	total := 0.0
	for _, g := range gs {
		for lo := 0; lo < g.Len; lo += SumSquaresBlock {
			hi := min(lo+SumSquaresBlock, g.Len)
			if host == nil {
				host = make([]float32, SumSquaresBlock)
			}
			DownloadFloat32Into(c, host[:hi-lo], g.Slice(lo, hi))
			total += SumSquaresOf(host[:hi-lo])
		}
	}
	return total
}

// UpsampleConcatBack copies each sample's first part into dskip and
// upsamples the rest back into din.
func (c Composed) UpsampleConcatBack(s Shape4, dskip, din, dout View) {
	one := Shape4{N: 1, C: s.C, H: s.H, W: s.W}
	skipN, upN := dskip.Len/s.N, 4*one.Len()
	for n := range s.N {
		d := dout.Slice(n*(skipN+upN), (n+1)*(skipN+upN))
		c.Convert(dskip.Slice(n*skipN, (n+1)*skipN), d.Slice(0, skipN))
		c.Upsample2Back(one, din.Slice(n*one.Len(), (n+1)*one.Len()), d.Slice(skipN, skipN+upN))
	}
}
