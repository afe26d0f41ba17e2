// Package predict segments images with a checkpoint's model: the
// architecture, preprocessing and weights come from the checkpoint, the
// model runs in eval mode on a device of its own, and the classes (argmax
// on the device) come back to the host. It scores a dataset split the way
// training validates, and predicts image files and directories into an
// output folder (Run: masks, overlays, probabilities, legend.png and
// predict.json), so a Go caller can do what memunet predict does. A Run
// leaves a finished prediction or none: one that fails, or whose
// Predictor.Stop is done (memunet predict's SIGINT/SIGTERM), stops between
// batches, slices and tiles and removes what it wrote. Every file is
// named in the folder's outdir.Journal before it is written, and
// predict.json is written last: a predict killed midway (SIGKILL) leaves
// a journal naming all it wrote, which the next Run refuses as a
// prediction cut off, or replaces with Options.Force.
//
// Memory: a Predictor owns its device's pool and the model in it (an
// ensemble's models, all held; Close gives them back). Every batch is planned before a byte of it is decoded
// (PlanBatch: the pool's peaks exactly, by a dry run on the planning
// backend, plus the host buffers beside it at the largest of its phases:
// decoding, predicting, writing) and refused when it passes the Limits;
// automatic choices (whole or by tiles, the tile, tiles or images per
// pass) keep within memlimit's share of the memory the process may use.
// While Run predicts, the Go collector's soft limit is held to the plan
// (heldGC), so the process's peak RSS is the plan's (predict.json's
// planned_rss_bytes beside peak_rss_bytes) rather than twice the live
// heap; Run puts the limit back as it found it. Host buffers of a batch
// are the caller's only while a call runs; nothing is cached between
// calls.
//
// Files: predict.go (the model and its passes), probs.go (probabilities,
// flip averaging), plan.go (a batch's memory and the limits), hostplan.go
// (the host's side of a plan, phase by phase, and the collector held to
// it while Run predicts), files.go
// (image files), split.go (a dataset split), write.go (the output
// writers: every file whole, never through a link), names.go (output
// names, one per input, colliding stems told apart; the default output
// folder), resize.go (--resize: the size each image goes to the model at),
// run.go (an output folder and predict.json), report.go (the report and
// the options), tiled.go (sliding-window prediction of an image too large
// to take whole, and a data.patch checkpoint's splits scored whole by
// tiles: the tiles, their batch and their plan, a band of blended rows on
// the host), volume.go (NIfTI volumes slice by slice into a mask volume of
// the same geometry, by a 2D model), volume3d.go (NIfTI volumes by a 3D
// UNet: a 3D sliding window with Gaussian blending, streamed slab by slab
// along z, planned as the slab, scored per volume against --references),
// cases.go (nnU-Net's cases of several modalities, CASE_0000.nii.gz ...:
// a case's files found and checked, predicted once into CASE.nii.gz),
// ensemble.go (several checkpoints' models in one pool, their
// probabilities averaged: --checkpoint A,B,...; the members checked
// alike), components.go (--keep-largest: each class's largest connected
// component, and nnU-Net's choice of it on a split's Dice),
// eval.go (a split's scores as memunet eval's JSON
// report), casescores.go (eval's per-case Dice, IoU and HD95: a nifti
// volume's slices gathered into their case; the CSV), evalfolders.go
// (eval --predictions --references: a folder of masks against another),
// progress.go (the bar of the outermost loop: count, elapsed
// time and ETA, as training's).
package predict
