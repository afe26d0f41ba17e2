// Package tensorboard writes a run's TensorBoard event files
// (RUN/tb/events.out.tfevents.*): scalars and PNG images by step, which
// `tensorboard --logdir runs/` shows while the run trains.
//
// Format: a file is a sequence of records, each a little-endian uint64
// length, the masked CRC32C (Castagnoli) of those 8 bytes, the data and the
// masked CRC32C of the data (TensorFlow's TFRecord framing, record.go); the
// data is an Event message from generated protobuf code (internal/tbpb,
// TensorBoard's field numbers). A file starts with a file_version event.
//
// Invariants:
//   - Each step is in the folder's files at most once. Open for a run
//     resumed at step S rewrites the files already there without their
//     records after S (atomically, outdir.WriteFile) and starts a new file,
//     named to sort after them, whose first event is a SessionLog START at
//     S+1: a TensorBoard already showing the old steps drops them, as it
//     does for a restarted TensorFlow job.
//   - Writing never stops a run: the first failure (a folder that cannot be
//     made, a full disk) is reported once through the warn callback, and the
//     Writer writes nothing after it.
//
// Memory: a Writer owns its open file and a small buffer, flushed after
// each call so that a live TensorBoard sees every step; images are encoded
// and dropped in the call. Open reads the files already there record by
// record (infile: regular files only), holding one record at a time; a
// record's length is at most maxRecord (64 MiB) and within the bytes left
// in its file, else it is damage, dropped as a cut record is.
package tensorboard
