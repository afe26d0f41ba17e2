package genfiles

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSplice(t *testing.T) {
	src := []byte("intro <!-- b --> in a line\n<!-- b -->\nold\n<!-- e -->\ntail\n")
	got, err := Splice("p.md", src, "<!-- b -->", "<!-- e -->", "<!-- b -->\nnew\n<!-- e -->")
	if want := "intro <!-- b --> in a line\n<!-- b -->\nnew\n<!-- e -->\ntail\n"; err != nil || string(got) != want {
		t.Errorf("Splice: %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"<!-- b -->\nold\n", "old\n<!-- e -->\n<!-- b -->\n", "x <!-- b -->\n<!-- e -->\n"} {
		if _, err := Splice("p.md", []byte(bad), "<!-- b -->", "<!-- e -->", ""); err == nil || !strings.Contains(err.Error(), "p.md: the lines") {
			t.Errorf("Splice of %q: %v, want the missing lines named", bad, err)
		}
	}
}

// TestWrite: only changed files are written, and said, in path order.
func TestWrite(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "same.txt"), []byte("same"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	var say bytes.Buffer
	files := map[string][]byte{"same.txt": []byte("same"), "d/new.txt": []byte("new"), "b.txt": []byte("b")}
	if err := Write(root, files, "gen", &say); err != nil {
		t.Fatal(err)
	}
	if say.String() != "gen: wrote b.txt\ngen: wrote d/new.txt\n" {
		t.Errorf("said %q", say.String())
	}
	if b, _ := os.ReadFile(filepath.Join(root, "d", "new.txt")); string(b) != "new" {
		t.Errorf("d/new.txt holds %q", b)
	}
}
