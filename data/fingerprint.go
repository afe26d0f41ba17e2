package data

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"

	"github.com/memunet/memunet/infile"
)

// Fingerprint identifies the data a run trained on, so that resuming on a
// changed dataset is noticed: its counts and size, and for file sources a
// hash of every sample's id, image and mask file (name relative to
// data.path, and size) and of the raw mask value -> class mapping (Files),
// and the same with each file's bytes (Contents). A file added, removed,
// renamed or resized is seen by Files, one rewritten with the same name
// and size (two masks swapped) by Contents.
type Fingerprint struct {
	Samples int `json:"samples"`
	Train   int `json:"train"`
	Val     int `json:"val"`
	Height  int `json:"height"`
	Width   int `json:"width"`
	// Files is the hex SHA-256 of the file list; "" for synthetic data,
	// which its configuration determines.
	Files string `json:"files,omitempty"`
	// Contents is the hex SHA-256 of the file list with the SHA-256 of
	// each file's bytes; "" for synthetic data, and in checkpoints written
	// before it was kept, which are compared by Files alone.
	Contents string `json:"contents,omitempty"`
}

// Fingerprint is the set's fingerprint.
func (s *Set) Fingerprint() Fingerprint { return s.fingerprint }

// Diff lists, as "field: was, now", how g (the data now) differs from f.
func (f Fingerprint) Diff(g Fingerprint) []string {
	var out []string
	add := func(name string, a, b int) {
		if a != b {
			out = append(out, fmt.Sprintf("%s: %d, now %d", name, a, b))
		}
	}
	add("samples", f.Samples, g.Samples)
	add("training samples", f.Train, g.Train)
	add("validation samples", f.Val, g.Val)
	if f.Height != g.Height || f.Width != g.Width {
		out = append(out, fmt.Sprintf("size: %dx%d, now %dx%d", f.Height, f.Width, g.Height, g.Width))
	}
	switch {
	case f.Files != g.Files:
		out = append(out, "files: images or masks were added, removed, renamed or changed in size, or the mask values found changed")
	case f.Contents != "" && g.Contents != "" && f.Contents != g.Contents:
		out = append(out, "contents: images or masks were rewritten with the same names and sizes (edited, or swapped with one another)")
	}
	return out
}

// fingerprintOf is the fingerprint of the file source at root read as
// pairs with the mask value -> class mapping lut.
func fingerprintOf(root string, pairs []pair, lut []int16) string {
	h := sha256.New()
	rel := func(p string) string {
		if r, err := filepath.Rel(root, p); err == nil {
			return filepath.ToSlash(r)
		}
		return filepath.ToSlash(p)
	}
	var n [8]byte
	for _, p := range pairs {
		for _, s := range []string{p.id, rel(p.image), rel(p.mask)} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
			h.Write(n[:])
			h.Write([]byte(s))
		}
		for _, f := range []string{p.image, p.mask} {
			binary.LittleEndian.PutUint64(n[:], uint64(stampOf(f).size))
			h.Write(n[:])
		}
	}
	for _, c := range lut {
		binary.LittleEndian.PutUint16(n[:2], uint16(c))
		h.Write(n[:2])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fileSum is the SHA-256 of a file's bytes.
type fileSum [sha256.Size]byte

// sumFile hashes the file at path (a regular file: infile refuses any
// other). The scan reads the file next, so its bytes come from the page
// cache: hashing costs CPU, not a second read from disk.
func sumFile(path string) (fileSum, error) {
	f, _, err := infile.Open(path, 0)
	if err != nil {
		return fileSum{}, fileError(path, err)
	}
	defer f.Close()
	return sumReader(path, f)
}

// sumReader hashes r through; errors name path.
func sumReader(path string, r io.Reader) (fileSum, error) {
	var sum fileSum
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return sum, fmt.Errorf("%s: cannot read: %v", path, unwrapPath(err))
	}
	h.Sum(sum[:0])
	return sum, nil
}

// contentsOf is Fingerprint.Contents of the file source at root: the
// file list as fingerprintOf hashes it, with sums[k] the image's and the
// mask's bytes of pairs[k]. fingerprintOf stays as it was, so that
// checkpoints written before Contents was kept still compare by Files.
func contentsOf(root string, pairs []pair, sums [][2]fileSum, lut []int16) string {
	h := sha256.New()
	io.WriteString(h, fingerprintOf(root, pairs, lut))
	for _, s := range sums {
		h.Write(s[0][:])
		h.Write(s[1][:])
	}
	return hex.EncodeToString(h.Sum(nil))
}
