// Package checkpoint is memunet's saved training state on disk: checkpoint
// directories written atomically and verified on load (dir.go), and the
// read side of a run's checkpoint (run.go, manifest.go, resolve.go,
// layout.go), so that predict, eval and export load a model without the
// run loop. Saving from a trainer and restoring into one are the run loop's
// (package rundir); the tensors' file format is package safetensors.
//
// A checkpoint directory holds data files, a JSON manifest (manifest.json)
// that records the SHA-256 and size of each, and manifest.json.sha256 with
// the manifest's own SHA-256 in sha256sum's format, so that
// "sha256sum -c manifest.json.sha256" checks it by hand. It is written into a
// temporary directory (.tmp-*), every file and the directory are fsynced,
// and only then is it renamed to its final name (step-NNNNNNNN): a directory
// under that name is always complete. OpenDir verifies everything before
// anything is used and refuses a missing, truncated or corrupt file with an
// *Error that names it.
//
// Every read is bounded: the manifest at MaxManifestBytes, its checksum
// line at MaxManifestSumBytes, each data file at the size the manifest
// records (another size is refused before a byte of it is read), and
// anything that is not a regular file (a FIFO, a link to /dev/zero) is
// refused by name before it is opened for reading (package infile). A run
// checkpoint's manifest may not give its data files more than its own
// configuration's model needs (RunFileBounds: the state_dict, two
// optimizer tensors per float one, their headers), checked before any is
// read; a plain OpenDir hashes each file streaming before reading it. So
// a manifest that lies beside a sparse file of gigabytes costs an error,
// never the memory it claims.
//
// A run checkpoint (Open) is such a directory holding model.safetensors
// (the state_dict under PyTorch's names), optimizer.safetensors and a
// Manifest: the configuration, the position in the data, the scaler, the
// metrics so far. ResolveResume and ResolveBest turn what a user names (a
// run, its checkpoints/ folder, a checkpoint, "auto") into one checkpoint;
// List and ListRun never take a temporary or trashed directory for one.
// Package export writes a run checkpoint's model for other tools
// (safetensors for PyTorch, ONNX).
//
// Memory: an Opened owns the bytes it read; a Checkpoint owns its decoded
// files, whose tensors alias those bytes. Nothing is cached between calls.
package checkpoint
