// Package train runs memunet's training loop: batches from a data.Dataset,
// forward and backward through a model.UNet, Adam steps, validation metrics,
// progress output and the run's files (resolved config, metrics.jsonl,
// summary.json).
//
// Memory: the Adam moments are allocated from the run's pool (optimizer
// category) and the batch buffers too (activations), so every byte the loop
// touches is accounted. The loop is single-threaded; the kernels underneath
// use every core.
package train
