package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPredictSkipsAnOddName: memunet predict of a folder holding
// "a\nb.png" and a plain image exits 0 having predicted the plain one; it
// warns on stderr of the other, quoted, and its summary and predict.json
// count it as skipped. With only the odd name left it exits 1, naming it.
func TestPredictSkipsAnOddName(t *testing.T) {
	runDir, images := predictInputs(t, 1)
	odd := filepath.Join(images, "a\nb.png")
	b, err := os.ReadFile(filepath.Join(images, "00000.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runOut("predict", "--checkpoint", runDir, "--input", images, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := `memunet: predict: warning: skipped "` + images + `/a\nb.png": its name holds a line break`; !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr %q, want one line starting %q", stderr, want)
	}
	if !strings.Contains(stdout, "predicted 1 image with") || !strings.Contains(stdout, "; skipped 1 input file(s) whose names cannot name outputs") {
		t.Errorf("stdout %q does not count the skipped file", stdout)
	}
	if rep := readReport(t, out); rep.Images != 1 || len(rep.Skipped) != 1 || rep.Skipped[0].Input != odd {
		t.Errorf("predict.json: %d images, skipped %+v", rep.Images, rep.Skipped)
	}

	if err := os.Remove(filepath.Join(images, "00000.png")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runOut("predict", "--checkpoint", runDir, "--input", images, "--out", filepath.Join(t.TempDir(), "none"))
	if code != 1 || !strings.Contains(stderr, "nothing to predict") || !strings.Contains(stderr, `"`+images+`/a\nb.png"`) {
		t.Errorf("only the odd name: exit %d, stderr %q", code, stderr)
	}
}
