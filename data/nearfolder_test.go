package data

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNearFolder: a data.path that does not exist names the folder beside
// it whose name is nearest, if one is near; files and hidden folders are
// not offered.
func TestNearFolder(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"shapes/images", "shapes/masks", ".shapez", "other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "shape"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"shapse", "did you mean " + filepath.Join(root, "shapes") + "? "},
		{"shapes/imagse", "did you mean " + filepath.Join(root, "shapes/images") + "? "},
		{"voc", ""},
		{"nope/shapes", ""},
	} {
		if got := nearFolder(filepath.Join(root, c.path)); got != c.want {
			t.Errorf("nearFolder(%s) = %q, want %q", c.path, got, c.want)
		}
	}
	p := checkDir(filepath.Join(root, "shapse"), "set data.path to the dataset folder")
	if want := filepath.Join(root, "shapse") + ": does not exist; did you mean " + filepath.Join(root, "shapes") + "? set data.path to the dataset folder"; p == nil || p.File+": "+p.Msg != want {
		t.Errorf("checkDir: %+v, want %q", p, want)
	}
}
