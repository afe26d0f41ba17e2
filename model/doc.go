// Package model is memunet's UNet and its layers, each an explicit
// Forward/Backward pair in the llm.c style.
//
// Layout: every activation is a *Tensor in NCHW float32. Parameters are
// *Param with PyTorch state_dict names and shapes (conv weights (OC,C,K,K),
// transposed conv weights (C,OC,2,2)).
//
// Memory ownership:
//   - Every buffer comes from the *memory.Pool in Env: parameters and
//     BatchNorm running statistics (params), their gradients (grads),
//     activations and saved-for-backward tensors (activations), and im2col or
//     GEMM scratch (workspace, freed before the call returns).
//   - Tensors are reference counted. Forward returns a tensor the caller owns
//     one reference to; a layer that needs its input or output in backward
//     takes its own reference (Retain) in training mode. Backward consumes the
//     caller's reference to dout, releases what the layer saved, and returns
//     din owned by the caller. So after a full backward every activation has
//     been freed, and the pool's allocated bytes return to params + grads.
//   - Parameter gradients are accumulated (+=); ZeroGrad clears them.
//
// Errors: allocation failures (a capacity-limited pool running out) are
// returned; shape mismatches between layers are programmer errors and panic
// with a "model:" message.
package model
