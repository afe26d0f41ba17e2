// Package model is memunet's UNet and its layers, each an explicit
// Forward/Backward pair in the llm.c style: a layer is shape arithmetic,
// allocations from the pool and calls to the device's backend; the
// arithmetic lives in the backend.
//
// Layout: every activation is a *Tensor in NCHW (float32, fp16 or bf16
// storage: Env.Precision). Parameters are *Param with PyTorch state_dict
// names and shapes (conv weights (OC,C,K,K), transposed conv weights
// (C,OC,2,2)), fp32 masters with an optional 16-bit working copy.
//
// Structure: a Layer is Forward, Backward, Params, Out (shape and FLOPs) and
// Forget; Sequential chains layers; DoubleConv is the UNet's block, its
// parts named (conv1, norm1, relu1, conv2, norm2, relu2); Recomputed wraps
// a block for recompute, what the config calls model.checkpoint (gradient
// checkpointing: a bilinear decoder's keeps its input as the skip and the
// level below, decoderInput, and its conv1's output). The UNet is a list
// of levels (encoder block, decoder block) described once and walked by
// Forward, Backward, FLOPs and the parameter list. What each layer keeps
// for backward, what backward rebuilds instead and which blocks recompute
// is one policy, recompute.go, written against the parts' names; the
// rebuilt tensors are rebuild.go's.
//
// Memory ownership:
//   - Every buffer comes from the pool of the Device in Env (a backend and a
//     pool over its allocator): parameters and BatchNorm running statistics
//     (params), their gradients (grads), activations and saved-for-backward
//     tensors (activations), and convolution workspace and fp32 staging of
//     16-bit tensors (workspace, freed before the call returns). Staging is
//     decided here, per family of operations, from the backend's Sizer
//     (Stages), because it is memory the planner must see; a convolution
//     mixing fp32 and 16-bit tensors (the first, reading the data) is staged
//     whatever the backend takes.
//   - Tensors are reference counted. Forward returns a tensor the caller owns
//     one reference to; a layer that needs its input or output in backward
//     takes its own reference (Retain) in training mode, or keeps less and
//     rebuilds it: a ReLU its output's signs (a bit mask), a convolution
//     after a norm nothing (the norm's kept input and statistics give its
//     input again, the same bits). Backward consumes the
//     caller's reference to dout, releases what the layer saved, and returns
//     din owned by the caller. So after a full backward every activation has
//     been freed, and the pool's allocated bytes return to params + grads.
//   - Parameter gradients are accumulated (+=); ZeroGrad clears them.
//   - No code here reads or writes a buffer's memory: host values enter by
//     Tensor.Write / Param.Write (uploads) and leave by Read (downloads).
//
// Errors: allocation failures (a capacity-limited pool running out) are
// returned; shape mismatches between layers are programmer errors and panic
// with a "model:" message.
package model
