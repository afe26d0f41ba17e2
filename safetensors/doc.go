// Package safetensors reads and writes tensors in the safetensors format
// (an 8-byte header length, a JSON header naming each tensor's dtype, shape
// and byte range, then the bytes), in pure Go, checked as the reference
// implementation checks it: a header within 100 MB, known dtypes,
// non-negative shapes, byte ranges that match and tile the data exactly.
// Parse reads exactly the language Write writes: keys spelled exactly
// (serde's matching, not encoding/json's case-folding), none repeated or
// missing, no other key in a tensor's entry, no tensor named "", integers
// as integers; so whatever Parse accepts, Write writes again (FuzzParse).
//
// Parse decodes a file held in memory; its tensors' Data alias the caller's
// bytes, so the caller keeps them alive and unmodified while the File is in
// use. Open reads a named file header first: a FIFO or a device is
// refused before a byte is read, the header (at most MaxHeaderBytes) is
// checked against the file's size, and the Reader's Layout gives every
// tensor's name, type and shape before any data is read, so that a caller
// refuses a file it does not expect (a sparse file declaring gigabytes) at
// the cost of its header. Reader.Read then reads the tensors it keeps,
// exactly the bytes their header entries give, into a File that owns them.
// ReadFile is Open and Read of every tensor. Write streams tensors to an
// io.Writer without copying them.
package safetensors
