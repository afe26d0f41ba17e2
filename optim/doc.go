// Package optim is the parameter update of a training step: the
// optimizers (Optimizer: torch.optim's Adam, AdamW, SGD and RMSprop, made
// by New from a Config), the learning-rate schedules (Schedule) and the
// dynamic loss scaler for fp16 (torch.cuda.amp.GradScaler's rule). All run
// on the model's backend: an optimizer's state tensors (State) live in the
// device's pool (optimizer category), allocated by New and released by
// Free, and the update is one backend.Optimizer call per parameter;
// unscaling and the finite check are backend.Optimizer.UnscaleCheck, whose
// one host value per parameter (is it finite) is all that leaves the
// device. ClipGradNorm is torch.nn.utils.clip_grad_norm_ over the same
// gradients: their global L2 norm (backend.Optimizer.SumSquares) and, past
// the maximum, one factor for them all.
//
// Every float32 factor is formed as PyTorch forms it: a float64 expression
// (1-beta1, lr/(1-beta1^t), 1/scale) rounded to float32 once.
package optim
