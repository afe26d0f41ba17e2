// Package safetensors reads and writes tensors in the safetensors format
// (an 8-byte header length, a JSON header naming each tensor's dtype, shape
// and byte range, then the bytes), in pure Go, checked as the reference
// implementation checks it: a header within 100 MB, known dtypes,
// non-negative shapes, byte ranges that match and tile the data exactly.
//
// Parse decodes a file held in memory; its tensors' Data alias the caller's
// bytes, so the caller keeps them alive and unmodified while the File is in
// use. ReadFile reads a named file with a bound: a FIFO or a device is
// refused before a byte is read, the header is checked against the file's
// size before the data is read, and the File owns what was read. Write
// streams tensors to an io.Writer without copying them.
package safetensors
