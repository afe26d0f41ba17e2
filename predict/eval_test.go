package predict

import (
	"path/filepath"
	"testing"
)

// TestDefaultNames: an evaluation's report is named by what changed its
// scores, so that no evaluation replaces another's; a prediction's folder
// by its input.
func TestDefaultNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{EvalReportName("val", 40, false, nil), "val-step-00000040.json"},
		{EvalReportName("test", 40, true, nil), "test-step-00000040-tta.json"},
		{OutputDir("run", "dataset:val", 7), filepath.Join("run", "predict", "val-step-00000007")},
		{OutputDir("run", "/x/images/", 7), filepath.Join("run", "predict", "images-step-00000007")},
		{OutputDir("run", "scan.nii.gz", 7), filepath.Join("run", "predict", "scan.nii-step-00000007")},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	a := EvalReportName("val", 1, false, []string{"data.path=/a"})
	b := EvalReportName("val", 1, false, []string{"data.path=/b"})
	if a == b || len(a) != len("val-step-00000001-data-12345678.json") {
		t.Errorf("other data's reports: %q and %q", a, b)
	}
}
