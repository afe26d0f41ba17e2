// Package rundir is a training run and its directory. Run trains as a
// configuration says (a train.Trainer on the target backend) and writes
// into the run directory: config.yaml (the resolved configuration),
// metrics.jsonl (a record per step and per validation), summary.json,
// curves.png, timeline.json (with memory.timeline) and checkpoints/; the
// charts and timeline.json's format are package report's.
//
// Checkpoints are directories written atomically (everything into a
// temporary directory, fsynced, renamed; see package checkpoint) holding the
// state_dict, Adam's moments and a manifest with the scaler, the position in
// the data and the metrics so far. Saving from a trainer and Restore, which
// puts a trainer back in a checkpoint's state so that the resumed run is bit
// for bit the uninterrupted one, are here; reading a checkpoint (verifying
// it, its manifest, resolving what --resume names) is package checkpoint's.
//
// Files by role: run.go (Run and its records), checkpoint.go (saving,
// restoring, what may change on resume), checkpoint_run.go (Run's schedule of
// saves, pruning, metrics.jsonl on resume), curves.go (metrics.jsonl read
// back into curves), progress.go (the progress bar and lines).
package rundir
