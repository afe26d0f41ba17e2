// Package onnx writes a UNet as an ONNX model: the eval-mode graph of
// memunet's forward pass (the same layers as model.UNet.Forward, with the
// PyTorch state_dict names as node and initializer names), for ONNX Runtime
// and anything else that reads ONNX.
//
// The graph, operator set 17 (IR version 8), has one input "image"
// (N, in_channels, H, W) and one output "logits" (N, classes, H, W), or
// "probabilities" with Options.Softmax; N, H and W are dynamic (H and W
// multiples of 2^depth, as for memunet). Both are float32 whatever the
// weights' type: with Float16 the weights and the activations are fp16,
// Cast nodes at the two ends. Per layer: a 3x3 convolution is Conv (pads
// 1); BatchNorm2d is BatchNormalization with its running statistics (eval);
// GroupNorm is Reshape to (N, groups, -1), InstanceNormalization, Reshape
// back, Mul and Add of its weight and bias; 2x2 max pooling is MaxPool;
// bilinear upsampling is Resize (linear, half_pixel: PyTorch's
// align_corners=False, which memunet's Upsample2 is); a transposed
// upsampling is ConvTranspose (2x2, stride 2); a decoder's input is Concat
// of the skip then the upsampled level below.
//
// Invariants: the bytes are deterministic for one network and Options; the
// protobuf comes from generated code (internal/onnxpb), never hand-encoded.
//
// Memory: Marshal reads the weights from the network's device (downloads)
// into host slices it owns and returns the encoded model; it keeps no
// reference to the network.
package onnx
