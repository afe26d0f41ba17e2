package data

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
)

// Fingerprint identifies the data a run trained on, so that resuming on a
// changed dataset is noticed: its counts and size, and for file sources a
// hash of every sample's id, image and mask file (name relative to
// data.path, and size) and of the raw mask value -> class mapping. A file
// rewritten in place with the same size is not seen; a file added, removed,
// renamed or resized is, and so is a change of the classes found in masks.
type Fingerprint struct {
	Samples int `json:"samples"`
	Train   int `json:"train"`
	Val     int `json:"val"`
	Height  int `json:"height"`
	Width   int `json:"width"`
	// Files is the hex SHA-256 of the file list; "" for synthetic data,
	// which its configuration determines.
	Files string `json:"files,omitempty"`
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
	if f.Files != g.Files {
		out = append(out, "files: images or masks were added, removed, renamed or changed in size, or the mask values found changed")
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
