package checkpoint

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/runfiles"
)

func testParts(data map[string]string) []Part {
	var parts []Part
	for _, n := range []string{"a.bin", "b.bin"} {
		body := data[n]
		parts = append(parts, Part{Name: n, Write: func(w io.Writer) error { _, err := io.WriteString(w, body); return err }})
	}
	return parts
}

func testManifest(sums map[string]Sum) ([]byte, error) {
	return json.Marshal(map[string]any{"format": Format, "format_version": FormatVersion, "files": sums})
}

func save(t *testing.T, parent string, step int) string {
	t.Helper()
	name, err := NextName(parent, step)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Save(parent, name, testParts(map[string]string{"a.bin": "alpha data", "b.bin": strings.Repeat("b", 1000)}), testManifest)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSaveOpenDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "checkpoints")
	dir := save(t, parent, 12)
	if filepath.Base(dir) != "step-00000012" {
		t.Errorf("name %s", dir)
	}
	o, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(o.Files["a.bin"]) != "alpha data" || len(o.Files["b.bin"]) != 1000 {
		t.Errorf("files %v", o.Files)
	}
	des, _ := os.ReadDir(parent)
	if len(des) != 1 {
		t.Errorf("left behind: %v", des)
	}
	// The checksum file is what sha256sum -c reads.
	line, _ := os.ReadFile(filepath.Join(dir, runfiles.ManifestSum))
	if !strings.HasSuffix(string(line), "  manifest.json\n") || len(line) != 64+2+len("manifest.json")+1 {
		t.Errorf("checksum line %q", line)
	}
	// Never replaces: a second save for step 12 gets the next sequence.
	again := save(t, parent, 12)
	if filepath.Base(again) != "step-00000012-2" {
		t.Errorf("second checkpoint of step 12 named %s", again)
	}
	if _, err := Save(parent, "step-00000012", testParts(nil), testManifest); err == nil {
		t.Error("Save replaced an existing checkpoint")
	}
	if _, err := OpenDir(dir); err != nil {
		t.Errorf("the first checkpoint no longer opens: %v", err)
	}
}

// TestOpenRefuses: each kind of damage is refused with its own message, and
// Open never changes anything on disk.
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(dir string)
		kind   error
		want   string
	}{
		{"flipped byte", func(d string) { flip(t, filepath.Join(d, "b.bin"), 500) }, ErrCorrupt, "b.bin is corrupt: its SHA-256 is"},
		{"truncated", func(d string) { os.Truncate(filepath.Join(d, "b.bin"), 999) }, ErrTruncated, "b.bin is truncated: 999 bytes, the manifest says 1000"},
		{"grown", func(d string) { appendTo(t, filepath.Join(d, "a.bin"), "x") }, ErrCorrupt, "a.bin is corrupt: 11 bytes, the manifest says 10"},
		{"missing", func(d string) { os.Remove(filepath.Join(d, "a.bin")) }, ErrMissing, "a.bin is missing (the manifest lists it"},
		{"no manifest", func(d string) { os.Remove(filepath.Join(d, runfiles.Manifest)) }, ErrMissing, "manifest.json is missing"},
		{"no manifest sum", func(d string) { os.Remove(filepath.Join(d, runfiles.ManifestSum)) }, ErrMissing, "manifest.json.sha256 is missing"},
		{"manifest flipped", func(d string) { flip(t, filepath.Join(d, runfiles.Manifest), 3) }, ErrCorrupt, "manifest.json is corrupt"},
		{"manifest truncated", func(d string) { os.Truncate(filepath.Join(d, runfiles.Manifest), 10) }, ErrCorrupt, "manifest.json is corrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := save(t, t.TempDir(), 3)
			tc.damage(dir)
			before := snapshot(t, dir)
			_, err := OpenDir(dir)
			var ce *Error
			if !errors.As(err, &ce) || !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a %v containing %q", err, tc.kind, tc.want)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("message does not name the checkpoint: %v", err)
			}
			if after := snapshot(t, dir); !equalMaps(before, after) {
				t.Error("Open changed the directory")
			}
		})
	}
	if _, err := OpenDir(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing dir: %v", err)
	}
}

func TestOpenRefusesFormat(t *testing.T) {
	parent := t.TempDir()
	dir, err := Save(parent, "step-00000001", nil, func(map[string]Sum) ([]byte, error) {
		return []byte(`{"format":"memunet-checkpoint","format_version":99,"files":{}}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(dir); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "format version 99") {
		t.Errorf("got %v", err)
	}
}

func TestListRemoveCleanUp(t *testing.T) {
	parent := t.TempDir()
	for _, s := range []int{3, 12, 6, 12} {
		save(t, parent, s)
	}
	os.Mkdir(filepath.Join(parent, TempPrefix+"step-00000015-123"), 0o755)
	os.Mkdir(filepath.Join(parent, TrashPrefix+"step-00000001-9"), 0o755)
	os.Mkdir(filepath.Join(parent, "notes"), 0o755)
	os.WriteFile(filepath.Join(parent, "step-00000099"), nil, 0o644) // a file, not a checkpoint
	list, err := List(parent)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, " "); got != "step-00000003 step-00000006 step-00000012 step-00000012-2" {
		t.Errorf("list %s", got)
	}
	if err := Remove(list[0].Path); err != nil {
		t.Fatal(err)
	}
	if err := CleanUp(parent); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(parent)
	var left []string
	for _, d := range des {
		left = append(left, d.Name())
	}
	if got := strings.Join(left, " "); got != "notes step-00000006 step-00000012 step-00000012-2 step-00000099" {
		t.Errorf("left %s", got)
	}
	if _, err := OpenDir(filepath.Join(parent, TempPrefix+"x")); err == nil {
		t.Error("opened a temporary directory")
	}
}

func flip(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, s string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(s)
	f.Close()
}

func snapshot(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
