// Package backendtest is the conformance suite of backend.Backend: one
// entry point, Run, that checks every method of a backend against naive
// references, through the interface only.
//
// A new backend calls it from a test in its own package:
//
//	func TestConformance(t *testing.T) { backendtest.Run(t, cpu.New()) }
//
// and a device backend the same way behind its build tag, e.g. in
// backend/cuda/driverapi/conformance_test.go:
//
//	//go:build gpu
//
//	func TestConformance(t *testing.T) { backendtest.Run(t, cuda.New(0)) }
//
// What it checks. Every operation runs as a subtest named by operation,
// storage type and shape (Conv/fp32/N2C3H5W7_OC5K3P1/bias), on random
// inputs seeded by that name (the same inputs on every backend and every
// run) over odd sizes: batches of 1 to 3, 1, 3, 5 and 17 channels, images
// from 1x1 up, odd heights and widths, plus one larger shape per layer for
// tiled code paths. Buffers come from memory.NewPool(b.Allocator(), ...);
// inputs are Uploaded, the operation called and its outputs Downloaded, so
// the suite sees exactly what a caller sees. A failing case reruns alone
// on the same inputs, e.g. go test -run 'TestConformance/ConvBack/fp32/'.
// Each operation's case is the method test<Op> of suite; ops_gen.go, which
// go generate writes from backend/ops.go, runs them in the table's order,
// and each optional operation's again on backend.Composed (Composed/<Op>),
// so a new operation cannot go without a case. In particular:
//
//   - every view sits at an offset of 0 to 3 values in its buffer, between
//     guard values that must survive the operation (no write outside a
//     view); outputs that are overwritten are prefilled with NaN (0xee for
//     bytes), and so is convolution workspace, exactly the size the Sizer
//     gives, so a value never written, or read before it is written,
//     shows; gradients that accumulate (dw, dbias, dgamma, dbeta, confusion
//     counts) are prefilled with random values and checked for +=; inputs
//     must come back unchanged;
//   - the in-place uses the contract allows are run both ways (ReLU out=in,
//     ReLUBack and the norms' backward din=dout, Add out=a and out=b,
//     CrossEntropyBack dlogits=logits), optional views both present and
//     none (conv bias, ConvBack din and dbias, MaxPool2's argmax);
//   - Transfer: Upload/Download round trips of every type through
//     sub-views; Convert bit for bit against backend.F32ToF16, F16ToF32,
//     F32ToBF16 and BF16ToF32 on every 16-bit pattern, on rounding ties and
//     on random float32 patterns (NaN only as NaN: the contract says
//     nothing of payloads), same-type copies bit for bit; Fill;
//   - the layers in fp32, and in fp16 and bf16 as well for a backend whose
//     Stages reports false for them (activations and weights then stored
//     in 16 bits; biases, parameter gradients, statistics and workspace in
//     fp32), with tolerances for the final rounding;
//   - ReLU, ReLUBack, Concat, Split, Confusion, Argmax and Convert on
//     every float type, on special values (signed zeros, infinities, NaNs,
//     subnormals) where the contract says what happens to them; max
//     pooling and argmax on ties; the loss on large logits and on bad or
//     ignored targets; Adam with and without weight decay; UnscaleCheck on
//     NaN, infinities and overflow; and Sync returning nil.
//
// The references (reference.go) are plain float64 loops written from
// PyTorch's definitions of the operations (conv2d, conv_transpose2d,
// batch_norm, group_norm, max_pool2d, bilinear interpolate with
// align_corners=False, cross_entropy with ignore_index, Adam as
// backend.AdamStep documents it) and share no code with any backend; the
// convolutions use kernels.Conv2dNaive and its siblings at float64, which
// are the textbook sums and not the CPU backend's fast kernels. Results are
// compared with |got-want| <= tol*(1+|want|), want computed on the values
// the backend actually stored; each tolerance is stated with its reason in
// backendtest.go, and every comparison logs its worst error (go test -v).
// Bit patterns, copies, selections and counts are compared exactly.
//
// The shapes are kept small: the whole suite runs in a fraction of a
// second on the CPU backend (backend/cpu/conformance_test.go), so it can
// run with every go test. backendtest_test.go also runs it on the CPU
// backend dressed as one that computes on 16-bit tensors directly, which
// checks the suite's own fp16 and bf16 layer cases.
package backendtest
