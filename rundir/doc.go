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
// Files by role: run.go (Run, its records and the summary), setup.go (the
// directory claimed under its lock, the trainer built, the run started),
// loop.go (the steps, validations and the end), observe.go (the observers
// the loop tells of each step and validation: metrics.jsonl, timeline.json,
// curves.png, the summary's figures, progress), guard.go (what Run refuses:
// another run's directory, a finished run, a diverged loss),
// checkpoint.go (saving, restoring, what may change on resume),
// checkpoint_run.go (the checkpoints as an observer: saves, pruning, the
// best link, metrics.jsonl on resume), init.go (train.init's weights for
// fine-tuning), curves.go (metrics.jsonl read back into curves),
// tensorboard.go (the TensorBoard observer), progress.go (the progress bar
// and lines), text.go (the start banner and the summary as text),
// interrupt.go (SIGINT and SIGTERM: the first stops and saves),
// resolve.go (train's configuration and directory from its flags),
// columns.go, columns_unix.go and columns_other.go (the terminal: is it
// one, its width), rss.go and rss_other.go (the process's peak RSS).
package rundir
