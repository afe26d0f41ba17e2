package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/runfiles"
)

// TestCheckNotInRun: an output path over a run's own file, inside its
// checkpoints/ or tb/, or inside an input is refused, links resolved,
// naming the path; the run's other files and folders, and a folder that is
// not a run (a lone config.yaml, a user's own checkpoints/), are not.
func TestCheckNotInRun(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "run")
	for _, d := range []string{filepath.Join(run, runfiles.Checkpoints, "step-00000002"), filepath.Join(run, runfiles.TensorBoard),
		filepath.Join(root, "mine", runfiles.Checkpoints)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(run, "config.yaml"), filepath.Join(run, "metrics.jsonl"), filepath.Join(root, "mine", "config.yaml")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(run, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	for _, tc := range []struct {
		out  string
		want string // "" is accepted
	}{
		{"run/config.yaml", "the own config.yaml of the run in"},
		{"run/summary.json", "the own summary.json of the run in"}, // not written yet
		{"run/checkpoints", "the own checkpoints of the run in"},
		{"run/checkpoints/cpu.pprof", "inside the checkpoints/ of the run in"},
		{"run/checkpoints/step-00000002/model.safetensors", "inside the checkpoints/ of the run in"},
		{"run/tb/p.png", "inside the tb/ of the run in"},
		{"link/metrics.jsonl", "the own metrics.jsonl of the run in"},
		{"link/checkpoints/new/p.png", "inside the checkpoints/ of the run in"},
		{"run/cpu.pprof", ""},
		{"run/eval/p.png", ""},
		{"mine/config.yaml", ""},
		{"mine/checkpoints/p.png", ""},
		{"elsewhere/summary.json", ""},
		{"data/images/0.png", "inside " + data + ", which it reads"},
		{"data", "inside " + data + ", which it reads"},
		{"data.png", ""},
	} {
		out := filepath.Join(root, tc.out)
		err := CheckNotInRun(out, "", data)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.out, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), out+" ")):
			t.Errorf("%s: %v, want a refusal naming it, %q", tc.out, err, tc.want)
		}
	}
}

// TestCheckOutsideOtherRuns: eval's, predict's and export's --out may not
// replace another run's files either, not only those of the run read.
func TestCheckOutsideOtherRuns(t *testing.T) {
	root := t.TempDir()
	read, other := filepath.Join(root, "read", runfiles.Checkpoints, "step-00000002"), filepath.Join(root, "other")
	for _, d := range []string{read, filepath.Join(other, runfiles.Checkpoints, "step-00000004")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "config.yaml"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		out, want string
	}{
		{"other/config.yaml", "the own config.yaml of the run in"},
		{"other/checkpoints/x.safetensors", "inside the checkpoints/ of the run in"},
		{"read/checkpoints/step-00000002/m.onnx", "inside the checkpoint"},
		{"other/model.safetensors", ""},
		{"elsewhere/model.safetensors", ""},
	} {
		err := CheckOutside(filepath.Join(root, tc.out), read)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.out, err, tc.want)
		}
	}
}

// TestMembers: a --checkpoint of comma-separated paths is an ensemble's
// list (spaces and empty parts dropped), one that exists with a comma in
// its name is itself; OpenModel refuses a list, saying predict takes it.
func TestMembers(t *testing.T) {
	dir := t.TempDir()
	comma := filepath.Join(dir, "a,b")
	if err := os.Mkdir(comma, 0o755); err != nil {
		t.Fatal(err)
	}
	for arg, want := range map[string][]string{
		"runs/a":               {"runs/a"},
		"runs/a,runs/b":        {"runs/a", "runs/b"},
		" runs/a , runs/b ,":   {"runs/a", "runs/b"},
		"fold_0,fold_1,fold_2": {"fold_0", "fold_1", "fold_2"},
		",":                    {","},
		comma:                  {comma},
	} {
		if got, err := Members(arg); err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Members(%q) = %q, %v, want %q", arg, got, err, want)
		}
	}
	// A finished cv folder names its folds; one without cv.json is a run.
	cv := filepath.Join(dir, "cv")
	for _, sub := range []string{"fold_0", "fold_1", "fold_2"} {
		if err := os.MkdirAll(filepath.Join(cv, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := Members(cv); len(got) != 1 || err != nil {
		t.Errorf("a folder of empty fold_K folders: %q %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(cv, "cv.json"), []byte(`{"folds": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := Members(cv); strings.Join(got, "|") != strings.Join([]string{filepath.Join(cv, "fold_0"), filepath.Join(cv, "fold_1"), filepath.Join(cv, "fold_2")}, "|") {
		t.Errorf("Members(cv folder) = %q", got)
	}
	if _, err := OpenModel("runs/a,runs/b", false); err == nil || !strings.Contains(err.Error(), "names 2 checkpoints, an ensemble, which memunet predict averages") {
		t.Errorf("OpenModel of a list: %v", err)
	}
}

// TestMembersOfABrokenCV: a cv folder whose cv.json is unreadable or
// lists folds that are not there, or that has no cv.json yet while its
// folds hold runs, is refused naming the folder, the file and the fix,
// never a smaller ensemble or "manifest.json is missing".
func TestMembersOfABrokenCV(t *testing.T) {
	for _, tc := range []struct {
		name, cvJSON string
		folds        []string // fold_K folders, each with a config.yaml
		file         string   // a fold_K that is a file
		want         []string
	}{
		{"a fold deleted", `{"folds": 3}`, []string{"fold_0", "fold_2"}, "", []string{"lists 3 folds", "fold_1 is missing or not a folder", "memunet cv --out"}},
		{"a fold a file", `{"folds": 2}`, []string{"fold_1"}, "fold_0", []string{"lists 2 folds", "fold_0 is missing or not a folder"}},
		{"cv.json corrupt", `{"folds": 3`, []string{"fold_0", "fold_1", "fold_2"}, "", []string{"cv.json is not a memunet cv's", "run memunet cv --out", "fold_0,..."}},
		{"cv.json no folds", `{}`, []string{"fold_0", "fold_1"}, "", []string{"folds is 0, not 2 or more"}},
		{"unfinished", "", []string{"fold_0", "fold_1"}, "", []string{"a memunet cv folder without its cv.json (fold_0/, fold_1/)", "has not finished", "memunet cv --out"}},
	} {
		dir := filepath.Join(t.TempDir(), "cv")
		for _, f := range tc.folds {
			if err := os.MkdirAll(filepath.Join(dir, f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f, runfiles.Config), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if tc.file != "" {
			if err := os.WriteFile(filepath.Join(dir, tc.file), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if tc.cvJSON != "" {
			if err := os.WriteFile(filepath.Join(dir, runfiles.CrossValidation), []byte(tc.cvJSON), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, open := range []func() error{
			func() error { _, err := Members(dir); return err },
			func() error { _, err := OpenModel(dir, false); return err },
		} {
			err := open()
			if err == nil || !strings.Contains(err.Error(), "--checkpoint "+dir) {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v\nlacks %q", tc.name, err, w)
				}
			}
		}
	}
}
