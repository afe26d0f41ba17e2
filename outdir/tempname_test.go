package outdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// TestLongNamesWrite: a file whose name is 250 bytes (ASCII, or two-byte
// characters) or holds a '*' is written whole; while it is written its
// temporary file's name is at most 255 bytes, valid UTF-8 where the name
// is, recognisably the name's, and known to IsTemp; the journal lists
// and removes such a name too.
func TestLongNamesWrite(t *testing.T) {
	for _, base := range []string{
		strings.Repeat("a", 246) + ".png",
		strings.Repeat("é", 123) + ".png",
		strings.Repeat("é", 125),
		"a*b.png",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, base)
		p, err := Create(path)
		if err != nil {
			t.Fatalf("%d-byte name: %v", len(base), err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("%d entries while writing, want the temporary file", len(entries))
		}
		tmp := entries[0].Name()
		cut := min(len(base), 20)
		if len(tmp) > maxNameBytes || !utf8.ValidString(tmp) || !IsTemp(tmp) || !strings.HasPrefix(tmp, "."+base[:cut]) {
			t.Errorf("%d-byte name: temporary name %q (%d bytes)", len(base), tmp, len(tmp))
		}
		p.Write([]byte("x"))
		if err := p.Commit(); err != nil {
			t.Fatalf("%d-byte name: %v", len(base), err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "x" {
			t.Errorf("%d-byte name: read back %q, %v", len(base), b, err)
		}

		j, err := StartJournal(dir, "memunet test")
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Claim(base); err != nil {
			t.Fatal(err)
		}
		j.Close()
		u, err := ReadJournal(dir)
		if err != nil || u == nil || len(u.Files) != 1 || u.Files[0] != base {
			t.Fatalf("%d-byte name: the journal reads back %+v, %v", len(base), u, err)
		}
		if err := u.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%d-byte name: after the journal's Remove the folder holds %v", len(base), entries)
		}
	}
}

// TestTooLongANameFailsCleanly: a name longer than a file name may be
// fails naming it, and leaves no temporary file.
func TestTooLongANameFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, strings.Repeat("a", 256))
	err := WriteBytes(path, []byte("x"))
	if !errors.Is(err, syscall.ENAMETOOLONG) || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want file name too long naming it", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

// TestIsTemp: only .NAME.tmp-N with N a uint32 in decimal and nothing
// after it is a temporary file; a user's file that merely holds ".tmp-"
// is not.
func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".model.safetensors.tmp-123": true,
		".a.tmp-4294967295":          true,
		".a.tmp-0":                   true,
		".a.tmp-4294967296":          false,
		".notes.tmp-draft":           false,
		".a.tmp-12.png":              false,
		".a.tmp-":                    false,
		".a.tmp-+1":                  false,
		".a.tmp--1":                  false,
		"a.tmp-1":                    false,
		".tmp-1":                     false,
		tempName("x", 7):             true,
		tempName(strings.Repeat("é", 200), 4294967295): true,
	} {
		if got := IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
	if n := tempName(strings.Repeat("é", 200), 4294967295); len(n) != maxNameBytes-1 || !utf8.ValidString(n) {
		t.Errorf("tempName of a 400-byte name: %d bytes, valid UTF-8 %v", len(n), utf8.ValidString(n))
	}
}
