// Package data yields the images and masks that memunet trains on: the
// Dataset interface, the built-in synthetic shapes set, deterministic
// train/validation splits and per-epoch shuffles, and parallel batch filling.
//
// # Layout
//
// An image is float32, planar (C, H, W): channel c, row y, column x is at
// index c*H*W + y*W + x. A batch of N images is (N, C, H, W), the images one
// after another. Image values are normalized per channel as (v-Mean)/Std with
// Mean 0.5 and Std 0.25, where v in [0, 1] is the raw intensity, so raw
// intensities map to [-2, 2].
//
// A mask is uint8 (H, W), one class index per pixel, row-major (y*W + x);
// a batch of N masks is (N, H, W). Class 0 is background; Ignore (255) marks
// pixels the loss and metrics must skip. Every other value is below the
// dataset's Classes().
//
// # Who owns memory
//
// This package allocates no tensors for the trainer. Dataset.Sample and
// FillBatch write into slices the caller supplies (typically buffers taken
// from the memory pool, so their bytes are counted there) and keep no
// reference to them after returning. Sample checks the slice lengths exactly
// and returns an error, never panics, when they are wrong.
//
// # Determinism
//
// Sample(i) depends only on the dataset and i, not on the order of calls or
// the goroutine making them; Split and Shuffle depend only on their
// arguments. The same config and seed give the same batches on every run and
// every machine.
//
// The package never knows the model: shapes here are plain ints and slices.
package data
