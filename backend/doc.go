// Package backend is memunet's device seam: the one interface (Backend)
// through which every number of a training step, validation and prediction
// is computed, and the typed views (View) of pool buffers it computes on.
//
// Shapes, as in ggml's backend interface and GoMLX's backends.Backend:
//
//   - a Backend is one device: an Allocator (the memory its buffers live in,
//     under a memory.Pool), a Sizer (the workspace its operations need; per
//     family of operations (Op), whether 16-bit tensors reach it through
//     fp32 staging or as they are; which operations it runs itself) and the
//     operations of Transfer, Layers, Metrics and Optimizer, declared once
//     in ops.go (listed below);
//   - a View is Len values of one DType at an offset of a memory.Buffer;
//     only the backend that owns the buffer's memory reads or writes it;
//   - a new device is a new package implementing Backend (backend/cpu is the
//     host; backend/noop, the planner, computes nothing over memory.Virtual),
//     tested with backend/backendtest against naive references.
//
// What a backend must implement and who owns what:
//
//   - The caller owns every buffer: it allocates outputs and workspace from
//     the pool (sizes from the Sizer), keeps them alive across the call and
//     frees them. Operations allocate nothing.
//   - Parameter gradients (dw, dbias, dgamma, dbeta) are accumulated (+=);
//     everything else is overwritten. In-place use (an output being an input)
//     is allowed only where a method says so.
//   - Layouts are NCHW; arithmetic is float32, with 16-bit storage widened on
//     the way in and rounded to nearest even on the way out.
//   - Operations may be asynchronous; Sync waits and returns the first error.
//     The few methods that return host values (the loss sum, the finite
//     flag, confusion counts, downloads) return them after the work before
//     them. Shape errors are programmer errors and panic.
//
// The operations, by interface (written by go generate from ops.go):
//
//   - Transfer: Upload, Download, Convert, Fill.
//   - Layers: Conv, ConvBack, UpConv, UpConvBack, BatchNorm, BatchNormReLU
//     (optional), BatchNormEval, BatchNormBack, BatchNormReLUBack
//     (optional), GroupNorm, GroupNormBack, ReLU, ReLUBack, ReLUMask,
//     ReLUBackMask, ReLUAndMask (optional), MaxPool2, MaxPool2Back,
//     Upsample2, Upsample2Back, MaxPool3, MaxPool3Back, Upsample3,
//     Upsample3Back, UpsampleConcat (optional), UpsampleConcatBack
//     (optional), Concat, Split, Add, CrossEntropy, CrossEntropyBack,
//     LossSums, LossBack.
//   - Metrics: Confusion, Argmax.
//   - Optimizer: Adam, SGD, RMSprop, UnscaleCheck, SumSquares (optional).
//
// ops.go is the table go generate (internal/opgen) writes the rest from: a
// new operation is its method there, with its contract; a CPU
// implementation (backend/cpu); a CUDA kernel (backend/cuda/kernels), or
// for an optional operation none yet, its composition (Composed) standing
// in; its case in backendtest; and the caller. docs/design.md's "Adding an
// operation" lists what go generate writes.
//
// There is no registry: which backend a run uses is an explicit value
// (train.Target), so the package holds no mutable state.
package backend
