// Package train is the training loop. A Trainer holds a model on a device
// (a backend and the pool its buffers come from), Adam and the grad scaler
// (package optim), the micro-batch buffers and the position in the data; its
// Step runs one optimizer step (micro-batches of forward and backward with
// accumulation, unscaling, Adam or a skipped step) and Validate scores the
// validation split on the device.
//
// Planning is the same loop on the planning backend (backend/noop): Plan and
// PlanConfig build the trainer over a virtual pool and run two steps and a
// validation, computing nothing, so the pool's statistics are those of the
// real run to the byte. Its cost does not grow with the number of samples:
// each validation batch is a pool phase of its own, and the planning side
// counts the full batches that would repeat the one before instead of
// running them (evaluate). memory.fit: auto (Fit, FitCandidates, Adopt) uses
// the plan to pick the variant that fits, and the loop moves on to the next
// one on an out-of-memory error.
//
// On a device that queues steps (backend.StepQueue) Step leaves a step's
// answer there (its result Pending) and Settle reads a window of them in
// one copy (queue.go); a caller settles before it reads the optimizer or
// the scaler.
//
// Files by role: trainer.go (the loop), queue.go (steps queued on the
// device), validate.go (the validation loop;
// its scores are package metrics), validate_tiled.go (a data.patch run's
// validation: whole images by tiles), preview.go (the first validation images
// kept for pictures), plan.go (variants and the plan), fastest.go (the fastest setting
// that fits a capacity), fit.go
// (memory.fit), fits.go (refusing what cannot fit, device and host),
// capacity.go (memory.capacity: auto; the host's memory is package
// memlimit's), recompute_auto.go
// (model.checkpoint: auto), suggest.go (plan --suggest patch: the largest
// patch that fits), classweights.go (class_weights: auto),
// dataparallel.go (ranks' gradients all-reduced), bench.go (timed steps,
// memunet bench). The run directory,
// checkpoints and resume are package rundir; prediction is package
// predict.
//
// Memory: every buffer the loop touches is from the device's pool: the
// model, Adam's moments (optimizer category), the micro-batch's images and
// targets (activations). Host data crosses by upload (batches) and download
// (metrics, checkpoints). The loop is single-threaded; the backend uses
// every core.
package train
