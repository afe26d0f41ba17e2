// Package checkpoint reads and writes memunet's checkpoint files: tensors in
// the safetensors format (written and read here in pure Go, checked as the
// reference implementation checks them) and checkpoint directories that are
// written atomically and verified on load.
//
// A checkpoint directory holds data files, a JSON manifest (manifest.json)
// that records the SHA-256 and size of each, and manifest.json.sha256 with
// the manifest's own SHA-256 in sha256sum's format, so that
// "sha256sum -c manifest.json.sha256" checks it by hand. It is written into a
// temporary directory (.tmp-*), every file and the directory are fsynced,
// and only then is it renamed to its final name (step-NNNNNNNN): a directory
// under that name is always complete. Open verifies everything before
// anything is used and refuses a missing, truncated or corrupt file with an
// *Error that names it.
//
// What the manifest and the data files contain is the train package's
// business; this package only needs the manifest's "format",
// "format_version" and "files" keys.
package checkpoint
