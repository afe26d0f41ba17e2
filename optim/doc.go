// Package optim is the parameter update of a training step: Adam
// (torch.optim.Adam, L2 weight decay) and the dynamic loss scaler for fp16
// (torch.cuda.amp.GradScaler's rule). Both run on the model's backend: the
// moments live in the device's pool (optimizer category) and the update is
// backend.Optimizer.Adam; unscaling and the finite check are
// backend.Optimizer.UnscaleCheck, whose one host value per parameter (is it
// finite) is all that leaves the device.
//
// Every float32 factor is formed as PyTorch forms it: a float64 expression
// (1-beta1, lr/(1-beta1^t), 1/scale) rounded to float32 once.
package optim
