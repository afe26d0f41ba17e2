package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunApartFromData: a run directory that is data.path, or inside it
// (images/, masks/, any folder there), is refused naming both, links
// resolved; so is a data.path inside the run's checkpoints/ or tb/, which
// the run prunes and --force removes. A run beside the data, a dataset
// kept in another folder of the run, and synthetic data (no data.path)
// pass.
func TestRunApartFromData(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "set")
	for _, d := range []string{"images", "masks"} {
		if err := os.MkdirAll(filepath.Join(data, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(root, "runs", "a")
	for _, c := range []struct {
		out, data, want string // want "": accepted
	}{
		{data, data, "is data.path"},
		{filepath.Join(data, "images"), data, "is data.path"},
		{filepath.Join(data, "masks"), data, "is data.path"},
		{filepath.Join(data, "runs", "new"), data, "is data.path"},
		{filepath.Join(link, "images"), data, "is data.path"},
		{filepath.Join(data, "images"), link + "/", "is data.path"},
		{run, filepath.Join(run, "checkpoints", "set"), "inside the run's checkpoints/"},
		{run, filepath.Join(run, "tb"), "inside the run's tb/"},
		{run, data, ""},
		{filepath.Join(root, "set-runs"), data, ""},
		{run, filepath.Join(run, "data"), ""},
		{run, "", ""},
	} {
		err := checkApartFromData(c.out, c.data)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("--out %s, data.path %s: %v", c.out, c.data, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), c.out) || !strings.Contains(err.Error(), c.data)):
			t.Errorf("--out %s, data.path %s: got %v, want a refusal naming both (%q)", c.out, c.data, err, c.want)
		}
	}
}
