// Package backend is memunet's device seam: the one interface (Backend)
// through which every number of a training step, validation and prediction
// is computed, and the typed views (View) of pool buffers it computes on.
//
// Shapes, as in ggml's backend interface and GoMLX's backends.Backend:
//
//   - a Backend is one device: an Allocator (the memory its buffers live in,
//     under a memory.Pool), a Sizer (the workspace its operations need and,
//     per family of operations (Op), whether 16-bit tensors reach it
//     through fp32 staging or as they are), Transfer
//     (upload, download, conversion, fill), Layers (convolutions, norms,
//     ReLU, pooling, upsampling, concat, add, the loss), Metrics (confusion
//     counts, argmax) and Optimizer (Adam, unscale and check);
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
// There is no registry: which backend a run uses is an explicit value
// (train.Target), so the package holds no mutable state.
package backend
