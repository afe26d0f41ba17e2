// Package oracle builds memunet's UNet, and each of its layers, as a gorgonia
// ExprGraph: the independent autodiff oracle that memunet's hand-written
// Forward/Backward pairs are tested against, and the "plain gorgonia"
// reference a trainer can run with gorgonia's TapeMachine and solvers.
//
// Every op is composed from gorgonia primitives whose gradients gorgonia
// derives symbolically (gorgonia.Grad); nothing here computes a gradient by
// hand:
//
//   - Conv2d: gorgonia.Conv2d (im2col + matmul), bias by a broadcast add.
//   - BatchNorm2d (training mode) and GroupNorm: transpose/reshape to rows of
//     the normalized groups, mean, centered square, 1/sqrt (as Inverse of
//     Sqrt: gorgonia.InverseSqrt's gradient is wrong in v0.9.18);
//     gorgonia's own BatchNorm op is not used.
//   - ReLU: x * (x > 0) (PyTorch's gradient 0 at 0).
//   - MaxPool2: gorgonia.MaxPool2D with a 2x2 kernel, stride 2.
//   - Upsample2 (bilinear, align_corners=False): per plane Ah * X * Aw^T with
//     constant interpolation matrices, as two matmuls.
//   - UpConv (2x2 stride 2 transposed conv): one matmul with the weight
//     reshaped to (C, OC*4), then a reshape/transpose onto the 2x grid.
//   - Concat: gorgonia.Concat along channels, skip first.
//   - CrossEntropy: mean over non-ignored pixels (target 255 is ignored) of
//     logsumexp(z) - z[target], with constant mask and one-hot tensors.
//
// A Builder holds the graph and its dtype (tensor.Float64 or
// tensor.Float32); its op methods keep the first error, which Err reports
// (later calls then return nil). BuildUNet assembles the whole network from a
// *model.UNet's configuration and parameters; Net.Run differentiates and
// runs it once on a TapeMachine, and Net.SetBatch rebinds the input batch so
// that a training loop (TapeMachine plus a gorgonia solver on the Params
// nodes) can reuse the graph.
//
// The tests check every op's gorgonia gradient against central differences
// (the oracle checked on its own), then memunet's layers and whole UNet
// against the oracle.
//
// Concurrency: do not build or differentiate two graphs at the same time.
// gorgonia v0.9.18 keeps package-level state that graph construction
// mutates (node groups, and shared constant nodes such as the 1 that
// gorgonia.Grad adds to every graph), which the race detector flags.
package oracle
